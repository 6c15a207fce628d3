// Each job's waits in wall time, for `msched status`. The scheduler keeps
// the device's clock, which is wall time on a real GPU but virtual on the
// simulator, where it moves only as jobs run: a job that waited seconds for
// its turn could show 0 ms. Synced after every change of the scheduler's
// state, with the wall time then, this records when each live job
// registered, was admitted and last left the GPU. Thread-compatible (the
// coordinator's thread). Used by the coordinator server.
#pragma once

#include <cstdint>
#include <map>

#include "coord/job.h"

namespace msched {

class JobWallClock {
 public:
  // The scheduler's `jobs` as they stand at `wall_now` (nanoseconds of a
  // monotonic clock); finished and unknown jobs are forgotten.
  void Sync(const std::map<uint64_t, Job>& jobs, uint64_t wall_now);

  struct Waits {
    uint64_t waited_ns = 0;  // from registering to admission, or to now while it waits
    uint64_t wait_ns = 0;    // off the GPU since it registered or its last turn ended; 0 on the GPU
  };
  // Job `id`'s waits at `wall_now` (zeros for a job never synced).
  Waits Of(uint64_t id, uint64_t wall_now) const;

 private:
  struct Times {
    uint64_t submitted = 0, admitted = 0, off_gpu = 0;
    bool admitted_yet = false, on_gpu = false;
  };
  std::map<uint64_t, Times> jobs_;
};

}  // namespace msched

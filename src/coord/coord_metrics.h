// mschedd's metrics as they accumulate: what the scheduler's state does not
// keep (jobs registered and admitted, the wait summed over admissions, the
// length of each turn on the GPU, bytes swapped, the counters jobs report),
// gathered from the same events the timeline sees (coord_trace.h), and a
// snapshot of all of it with the scheduler's live jobs (metrics.h).
//   - A turn begins when a job becomes active (its Go) and ends when it is
//     no longer (the stop, pause or exit); its length is device time.
//   - Swapped in: what each Stopped says the job's last Go loaded. Swapped
//     out: the fall in the job's resident bytes across a Stopped, from the
//     scheduler's estimate before to the job's figure after.
//   - Jobs report running totals (proto::JobCounters); the sums add each
//     job's increase since its previous report and never decrease.
//   - Per-job figures exist only for live jobs; what it tracks of a job is
//     dropped when the scheduler forgets it.
// Confined to the server's thread (it reads the scheduler, which is).
// Used by the server.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "coord/metrics.h"
#include "coord/scheduler.h"

namespace msched {

class CoordMetrics {
 public:
  // `job_names`: snapshots carry the jobs' names (to be published).
  CoordMetrics(std::string version, double start_time_seconds, bool job_names);

  // After the scheduler changed: counts new jobs and admissions, and begins
  // and ends turns.
  void Sync(const Scheduler& s);
  // Job `id` answered a stop with `m`. Call before the scheduler learns it
  // (its resident bytes before the stop are still the scheduler's).
  void Stopped(const Scheduler& s, uint64_t id, const proto::Stopped& m);
  // Job `id` reported its running totals.
  void Counted(uint64_t id, const proto::JobCounters& c);
  // Everything now, with the scheduler's live jobs; clears changed().
  MetricsSnapshot Snapshot(const Scheduler& s);
  // Something happened since the last snapshot.
  bool changed() const { return changed_; }

 private:
  struct Tracked {
    bool admitted = false;
    bool on_gpu = false;
    uint64_t turn_start = 0;      // device time its turn began (on_gpu)
    proto::JobCounters reported;  // its last totals (the largest of each)
  };

  const std::string version_;
  const double start_time_seconds_;
  const bool job_names_;
  std::map<uint64_t, Tracked> jobs_;  // the scheduler's jobs, finished ones included until it forgets them
  uint64_t submitted_ = 0;
  uint64_t admissions_ = 0;
  uint64_t admission_wait_ns_ = 0;
  uint64_t swap_in_bytes_ = 0;
  uint64_t swap_out_bytes_ = 0;
  uint64_t faults_ = 0;
  uint64_t prefetched_bytes_ = 0;
  MetricsHistogram slice_seconds_{SliceSecondsBounds()};
  bool changed_ = true;
};

}  // namespace msched

// What a job tells its user while it waits on msched (MSCHED_PROGRESS,
// which `msched run` turns on): one line when the job is queued for
// admission, admitted, paused, resumed and done, each wait with how long it
// took in wall time, written to a stream of the caller's choosing (the
// hook's: stderr, never stdout). Silent when not enabled. Thread-safe: the
// reader thread reports the welcome, the application thread the orders.
// Used by the hook's coordinator client.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/mutex.h"

namespace msched {

class JobProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // `name` is how the job shows in `msched status`.
  JobProgress(bool enabled, std::string name, std::FILE* out = stderr);

  // The coordinator welcomed the job as `job`, admitted or queued.
  void Welcomed(uint64_t job, bool admitted, Clock::time_point now = Clock::now());
  // A turn began: the admission or the resumption the job waited for, if any.
  void TurnBegan(Clock::time_point now = Clock::now());
  // A pause took the job off the GPU.
  void Paused(Clock::time_point now = Clock::now());
  // The job ends.
  void Done();

 private:
  enum class Awaiting : uint8_t { kNothing, kAdmission, kResume };
  void Say(const std::string& what) MSCHED_REQUIRES(mu_);

  const bool enabled_;
  const std::string name_;
  std::FILE* const out_;
  Mutex mu_;
  uint64_t job_ MSCHED_GUARDED_BY(mu_) = 0;
  Awaiting awaiting_ MSCHED_GUARDED_BY(mu_) = Awaiting::kNothing;
  Clock::time_point since_ MSCHED_GUARDED_BY(mu_);
};

}  // namespace msched

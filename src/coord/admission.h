// Memory-feasible admission and queue order. A waiting job starts only when
// its footprint fits beside the admitted ones: within oversubscribe x HBM
// (the time-sliced groups share the GPU) and within host memory (where
// evicted data lives); one that could never fit is refused at once. Waiting
// jobs are taken by rank: priority (raised one step per `aging_ns` waited,
// so nothing starves), then short before long, then first come first
// served; a smaller job may pass one that does not fit yet, unless that one
// has waited `reserve_after_ns`, which reserves the memory for it.
// Free functions over the caller's jobs (AdmitWaiting marks those it admits
// running) and JobHistory, which Record updates: thread-compatible, the
// caller serializes access. Used by the scheduler.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coord/job.h"

namespace msched {

// Mean run time of finished jobs by name: what "short" is estimated from.
class JobHistory {
 public:
  void Record(const std::string& name, uint64_t run_ns);
  // Whether a job of `j`'s class and name counts as short.
  bool IsShort(const Job& j, uint64_t threshold_ns) const;

 private:
  std::map<std::string, double> mean_ns_;  // exponentially weighted
};

struct MemoryLimits {
  uint64_t admit_limit;  // oversubscribe x HBM (UINT64_MAX while HBM is unknown)
  uint64_t host_limit;
};
MemoryLimits LimitsFor(const SchedulerOptions& o);

// Why `j` can never be admitted (its footprint exceeds the host memory that
// would hold its evicted data), or "" if it could be.
std::string NeverFits(const Job& j, const SchedulerOptions& o);

// Waiting jobs in the order they should start.
std::vector<Job*> RankWaiting(std::map<uint64_t, Job>& jobs, uint64_t now, const SchedulerOptions& o,
                              const JobHistory& history);

// Admits waiting jobs in rank order while memory allows. Returns the ids
// admitted (their state becomes kRunning).
std::vector<uint64_t> AdmitWaiting(std::map<uint64_t, Job>& jobs, uint64_t now, const SchedulerOptions& o,
                                   const JobHistory& history);

// Whether `paused`, a job admitted before it was paused, may run again
// beside the jobs running now. A pause lets others be admitted in its place,
// so a resumed job that no longer fits waits for admission again.
bool FitsOnResume(const std::map<uint64_t, Job>& jobs, const Job& paused, const SchedulerOptions& o);

}  // namespace msched

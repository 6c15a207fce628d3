// Time slicing: which admitted jobs share the GPU at once, in what order the
// groups take turns, how long a turn lasts, and what each switch evicts.
//   - Jobs whose working sets fit together in usable HBM form one group and
//     run concurrently, each with a budget (its working set plus a share of
//     the room left). Otherwise groups are packed first-fit, higher priority
//     first, and take turns.
//   - Only the groups of the highest priority take turns (a higher-priority
//     job preempts); among them the one holding the job queued longest
//     goes next (since its last turn began, or since it had work again
//     after giving its turn up), so turns rotate and services' requests are
//     answered in the order they came.
//   - A turn lasts long enough that swapping its working set in costs at
//     most `swap_fraction` of it (clamped to [min, max]), or a fixed length.
//   - A switch evicts only what the incoming group lacks room for, taking it
//     from jobs off the GPU, then from declared services without a request,
//     least recently served first (their requests come at random), then
//     from the jobs whose next turn is furthest away (OPT at job level;
//     each job then picks its own victims by OPT over its chunks).
// Pure functions; thread-safe. Used by the scheduler (coord/scheduler.h) and
// by the bench runner (bench/suite/runner.cc), whose Belady replay takes its
// budget from UsableHbm.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "coord/job.h"

namespace msched {

struct Group {
  std::vector<uint64_t> jobs;  // ids
  int priority = 0;            // the highest of its members
  uint64_t working_set = 0;    // sum of estimates
};

// HBM available to working sets.
uint64_t UsableHbm(const SchedulerOptions& o);

// Partitions the runnable jobs (kRunning, neither unresponsive nor idle) into
// groups: first fit, larger working sets first, within a priority. Two
// services (Job::Serves: declared, or by their idleness) are never put in
// one group, though they fit:
// answering requests at once, each answers at half the GPU's speed, and a
// request queued behind another of its own service waits for both; taking
// turns, each request runs at the whole GPU's speed, and a switch between
// two that fit moves nothing.
std::vector<Group> FormGroups(const std::map<uint64_t, Job>& jobs, uint64_t usable);

// Each member's HBM budget while the group runs.
std::map<uint64_t, uint64_t> GroupBudgets(const Group& g, const std::map<uint64_t, Job>& jobs, uint64_t usable);

// The bytes the group must bring in before it runs at full speed.
uint64_t SwapInBytes(const Group& g, const std::map<uint64_t, Job>& jobs, uint64_t usable);

// The length of the group's next turn.
uint64_t SliceLength(const Group& g, const std::map<uint64_t, Job>& jobs, const SchedulerOptions& o,
                     double link_bytes_per_ns);

// The length of the running group's turn when only batch jobs wait for it:
// the switch that ends it moves the running group's working set out (and,
// a turn later, back in) besides bringing `next` in, and all of that is
// amortised. The waiting group's size is a poor guide on its own: jobs that
// have not run yet have shown only their first allocations.
uint64_t BatchTurnLength(const Group& running, const Group& next, const std::map<uint64_t, Job>& jobs,
                         const SchedulerOptions& o, double link_bytes_per_ns);

// The index of the group that runs next: of the highest priority, the one
// with the job queued longest (Job::QueuedSince).
size_t PickNextGroup(const std::vector<Group>& groups, const std::map<uint64_t, Job>& jobs);

// (job, bytes to evict) pairs that make room for `next`: jobs off the GPU,
// then idle declared services least recently served, then the rest whose
// next turn is furthest away, first.
std::vector<std::pair<uint64_t, uint64_t>> PlanSwitchEvictions(const Group& next, const std::map<uint64_t, Job>& jobs,
                                                               uint64_t usable);

}  // namespace msched

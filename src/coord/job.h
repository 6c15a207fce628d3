// What the coordinator knows about each job, and the options its policy
// runs under. Times are the device's clock (wall time on a real GPU, the
// simulated device's virtual time on the simulator), in nanoseconds.
// Value types; thread-compatible. Used by the scheduling policy (admission,
// timeline, scheduler) and mschedd.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "msched/config.h"

namespace msched {

enum class JobState : uint8_t {
  kWaiting,   // submitted, not admitted: blocked before its first allocation completes
  kRunning,   // admitted: runs when its group holds the GPU
  kPaused,    // stopped by a user, memory evicted, budget released
  kFinished,  // exited (or died, or was refused)
};
const char* JobStateName(JobState s);

struct Job {
  uint64_t id = 0;
  uint32_t uid = 0;  // from the socket's peer credentials
  int32_t pid = 0;
  std::string name;
  JobClass job_class = JobClass::kUnset;  // as declared
  int priority = 0;
  uint64_t declared = 0;     // MSCHED_MEM (0: not declared)
  uint64_t allocated = 0;    // what it has allocated, as it reports
  uint64_t working_set = 0;  // bytes used in its last slice (0: not measured yet)
  uint64_t resident = 0;     // bytes it holds in HBM (estimate)
  uint64_t budget = 0;       // HBM it may hold while it runs
  // The most it reported holding in HBM beyond its budget
  // (proto::JobCounters): what its unpredicted kernels faulted in.
  uint64_t peak_over_budget = 0;
  uint64_t shared = 0;  // of its memory, shared with another process: never moved (its latest report)
  // Of its memory, what cannot page (VMM, shared): all resident while it
  // runs (its latest report).
  uint64_t unpaged = 0;
  JobState state = JobState::kWaiting;
  bool active = false;        // running and in the group that holds the GPU now
  bool was_admitted = false;  // paused before admission returns to the queue on resume
  bool unresponsive = false;  // left an answer owed: out of the rotation until it is heard from
  uint32_t stops_owed = 0;    // stops sent that it has not answered yet (they are answered in order)
  bool idle = false;          // gave its turn up for want of work: out of the rotation until it has work again
  // Active, reported going idle and told to carry on (others of its group
  // still ran, or nobody waited): its group's turn no longer waits on it,
  // until it says it has work again. Since idle_since.
  bool idle_in_turn = false;
  uint64_t idle_since = 0;
  // Active, and has work again after being idle in its turn while others
  // waited: it runs on while its group's turn lasts, but the turn no longer
  // waits on it (the waiting jobs' work came first). Until its next turn.
  bool ceded_turn = false;
  uint64_t submitted_ns = 0;
  uint64_t admitted_ns = 0;
  uint64_t finished_ns = 0;
  uint64_t last_ran_ns = 0;  // when its last slice began (0: never ran)
  uint64_t off_gpu_ns = 0;   // when it last left the GPU, or was submitted (while not on the GPU)
  uint64_t slices = 0;
  uint64_t swaps_in = 0;     // times it was brought back with its working set
  uint64_t idle_yields = 0;  // turns it gave up for want of work
  // The last time it gave its turn up: from when it went idle (its idle
  // yield ran out) to when it had work again.
  uint64_t last_pause_ns = 0;
  uint64_t back_ns = 0;  // when it last had work again after giving its turn up (0: never)

  // Where it stands in the rotation: from when its last turn began, or, back
  // from giving its turn up since, from when it had work again. A service's
  // requests are then answered in the order they came, not in the order the
  // services last held the GPU. A job on the GPU is not queued (UINT64_MAX),
  // so its group comes after every group that waits, even one whose work
  // came after its turn began.
  uint64_t QueuedSince() const { return active ? UINT64_MAX : std::max(last_ran_ns, back_ns); }

  // Paused, and the stop that gives its memory back not answered yet.
  bool Pausing() const { return state == JobState::kPaused && stops_owed > 0; }
  // A service: declared one (MSCHED_CLASS=service), or it has given turns
  // up for want of work more than once (a batch job can once, while the host
  // sets it up or tears it down).
  bool Serves() const {
    constexpr uint64_t kServingIdleYields = 2;
    return DeclaredService() || idle_yields >= kServingIdleYields;
  }
  bool DeclaredService() const { return job_class == JobClass::kService; }
  // The memory admission counts: what it declared, or what it allocated if more.
  uint64_t Footprint() const { return std::max(declared, allocated); }
  // The HBM it needs to run without faulting: its measured working set, or
  // its whole footprint until a slice has measured it; never less than the
  // memory it holds that cannot page (a slice measured before it made more
  // of that does not count it).
  uint64_t WorkingSetEstimate() const {
    const uint64_t f = Footprint();
    const uint64_t measured = working_set == 0 ? f : f == 0 ? working_set : std::min(working_set, f);
    return std::max(measured, unpaged);
  }
};

struct SchedulerOptions {
  uint64_t hbm_bytes = 0;                         // 0: learnt from the first job's device
  uint64_t host_bytes = UINT64_MAX;               // admitted footprints must fit host memory (evicted data lives there)
  double oversubscribe = 2.0;                     // admitted footprints <= ratio x HBM, time-sliced as needed
  double usable_fraction = 0.95;                  // of HBM, for working sets (contexts, fragmentation)
  double swap_fraction = 0.03;                    // slices last so that swapping takes at most this share
  uint64_t min_slice_ns = 20'000'000;             // 20 ms
  uint64_t max_slice_ns = 10'000'000'000;         // 10 s
  uint64_t fixed_slice_ns = 0;                    // nonzero: every slice this long (no adaptation)
  uint64_t aging_ns = 60'000'000'000;             // a minute of waiting is worth one priority step
  uint64_t reserve_after_ns = 300'000'000'000;    // nobody passes a job that has waited 5 min
  uint64_t short_threshold_ns = 300'000'000'000;  // undeclared jobs whose name ran shorter are short
  double link_bytes_per_ns = 25.0;                // initial swap bandwidth (25 GB/s), then measured
  // A job that holds its turn this long without work while others wait gives
  // it up (0: never). A declared service, and a service by its idleness
  // (Job::Serves) whose last pause was at least that long, give it up after
  // serving_idle_yield_ns if shorter (0: the same): a service's pauses are
  // the gaps between requests, and each millisecond of the yield is one
  // that every request waiting for it loses. A job back
  // sooner than the idle yield (a trainer that evaluates now and then,
  // whose short pauses between steps the shorter yield would take for
  // idleness) gets the idle yield until it pauses long again. 2 ms is
  // longer than a decoding service's host work between one step's
  // synchronise and the next step's first launch (sampling, a stop check:
  // well under a millisecond), and short enough that a request that comes
  // just after the last was answered is seen as a new one, which then
  // waits behind requests that came first (docs/coordinator.md, "Idle yield").
  uint64_t idle_yield_ns = 50'000'000;
  uint64_t serving_idle_yield_ns = 2'000'000;
  // The serving idle yield in force: never longer than the idle yield, and
  // none when the idle yield is off.
  uint64_t ServingIdleYield() const {
    return serving_idle_yield_ns != 0 ? std::min(idle_yield_ns, serving_idle_yield_ns) : idle_yield_ns;
  }
  // The idle yield in force for `j`'s turns. A declared service gets the
  // serving one from its first turn, however short its pauses: no pause of
  // a server is a training step's. While it loads its model it may then
  // give its turn up at pauses of more than the serving yield, where any
  // job would at more than the idle yield; keeping the idle yield until its
  // first turn given up raised the services scenario's median from 436 to
  // 457 ms, and one request trace's p99 from 1,023 to 1,071 ms.
  uint64_t IdleYieldFor(const Job& j) const {
    const bool serving = j.DeclaredService() || (j.Serves() && j.last_pause_ns >= idle_yield_ns);
    return serving ? ServingIdleYield() : idle_yield_ns;
  }
};

}  // namespace msched

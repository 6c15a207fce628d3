// The coordinator's policy as an event-driven state machine: jobs arrive,
// allocate, reach the ends of their slices, answer stops, exit or die, and
// users pause, resume and reprioritise them; each event returns the commands
// the coordinator must send. It combines admission (admission.h) with time
// slicing (timeline.h):
//   - When every admitted job's working set fits, all run at once with
//     budgets, and no slice ends.
//   - Otherwise the active group runs until its slice ends; each member
//     reports its slice end at a kernel boundary; the switch then stops the
//     outgoing jobs (drain, evict what the incoming group lacks room for,
//     from the jobs needed furthest in the future) and, once they answer,
//     sends the incoming jobs Go with their budgets and the start time, and
//     they bring their working sets back in access order.
//   - A job of higher priority than the active ones preempts: its Go is
//     sent together with the outgoing jobs' Stops, so its working set is
//     moving in while they drain.
//   - A job that holds its turn without work while others wait gives it up
//     (Idle): its turn ends as of when it went idle, so the next group's Go
//     is dated then, and it stays out of the rotation until it has work
//     again (Busy), when it waits for its turn like any other. What it
//     holds is evicted, as far as needed, before a job joins the running
//     group beside it. Each Go carries the turn's idle yield: a declared
//     service, and a service back from a long pause, get the shorter one
//     (IdleYieldFor).
//   - Pause stops a job, evicts all of its memory and releases its budget;
//     resume puts it back in the rotation.
// Time is the device clock the jobs report; the scheduler never reads a
// clock itself. It waits for answers forever: the server's watchdog calls
// Unresponsive for a job that does not answer in time.
// Thread-compatible (mschedd drives it from one thread).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <variant>

#include "coord/admission.h"
#include "coord/job.h"
#include "coord/timeline.h"
#include "msched/protocol.h"
#include "msched/status.h"

namespace msched {

// What the scheduler tells one job: exactly the message the server sends it.
using Order = std::variant<proto::Go, proto::Stop, proto::Budget, proto::Refused>;
struct Command {
  uint64_t job = 0;
  Order order;
};
using Commands = std::vector<Command>;

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);

  // A new job; `device_total` (what its driver reports) teaches the
  // scheduler the GPU's size when no option gave it.
  Commands Submit(Job job, uint64_t device_total, uint64_t now);
  // The job's allocated bytes changed. A nonzero `ask` (proto::Usage) is
  // answered by a Budget to the job after the orders the change caused.
  Commands Allocated(uint64_t id, uint64_t bytes, uint64_t now, uint64_t ask = 0);
  Commands SliceEnded(uint64_t id, uint64_t now);
  // The job reported its running totals (with a usage report, a stop's
  // answer or its goodbye): keeps what `status` shows of them.
  void Counted(uint64_t id, const proto::JobCounters& c);
  // The active job launched nothing from `since_ns` on while others waited
  // for their turns (proto::Idle). It is idle in its turn from then on
  // (Job::idle_in_turn). When that ends the active group's turn (every
  // other member reached its slice end or is idle too) and others wait, the
  // group's idle members are stopped and leave the rotation, and the turn
  // passes on as of when the last of them went idle (not before the turn
  // began) if all were idle, else as a slice end does. Otherwise (nobody
  // waits, a switch is under way, other members still run) it is told to
  // carry on (a Go with its turn unchanged). From a job whose turn is
  // already ending (its Stop answers it), or that is not on the GPU, it
  // changes nothing.
  Commands Idle(uint64_t id, uint64_t since_ns);
  // A job that gave its turn up, or was idle in it, has work again: back in
  // the rotation, or busy in its turn. One that was idle in its turn while
  // others waited runs on only as long as the rest of its group does: its
  // part of the turn counts as done (the waiting jobs' work came first).
  Commands Busy(uint64_t id, uint64_t now);
  Commands Stopped(uint64_t id, const proto::Stopped& s);
  // The job exited (cleanly or not): its memory and budget are released.
  Commands Exited(uint64_t id, uint64_t now);
  // The job did not answer in time: carry on as if it had, and leave it out
  // of the rotation until it answers what it owes (its Stopped, or its slice
  // end when it owed no stop). Usage reports and the like do not bring it
  // back: a job that sends them and never answers a stop would otherwise
  // take the GPU again and stall everyone for another answer timeout.
  Commands Unresponsive(uint64_t id);

  Result<Commands> Pause(uint64_t id);
  Result<Commands> Resume(uint64_t id);
  Result<Commands> SetPriority(uint64_t id, int priority);

  const std::map<uint64_t, Job>& jobs() const { return jobs_; }
  const Job* Find(uint64_t id) const;
  const SchedulerOptions& options() const { return options_; }
  uint64_t now() const { return now_; }
  // The end of the active group's slice (proto::kNever when it has none).
  uint64_t slice_end_ns() const { return slice_end_; }
  // The job may launch now (its gate is open).
  bool MayRun(const Job& j) const { return j.state == JobState::kRunning && j.active && !pending_.count(j.id); }
  // Jobs whose answer the scheduler is waiting for: stops not yet answered,
  // and, while slices are in force, active jobs yet to report their end
  // (not those idle in their turn).
  std::set<uint64_t> Awaiting() const;
  uint64_t switches() const { return switches_; }
  double link_bytes_per_ns() const { return link_bytes_per_ns_; }
  size_t group_count() const { return group_count_; }

 private:
  Job* Get(uint64_t id);
  std::vector<uint64_t> Active() const;
  // The job's part of the active group's turn is done: it reported its
  // slice end, or is idle in its turn.
  bool Done(uint64_t id) const;
  // Every active job's part is done (and some job is active).
  bool TurnOver() const;
  // The active group's turn is over and others wait: its idle members leave
  // the rotation (they are stopped at the switch). Dates the switch when the
  // last of them went idle, not before `not_before` (when others began to
  // wait), if all were idle (no drain to wait for). Returns whether any left.
  bool IdleMembersLeave(uint64_t not_before);
  // Decides what runs now (RescheduleGroups), then answers the usage asks
  // (AnswerAsks). `slice_over`: the active group's slice has ended.
  void Reschedule(bool slice_over, Commands* out);
  void RescheduleGroups(bool slice_over, Commands* out);
  void AnswerAsks(Commands* out);
  void BeginSwitch(const Group& next, bool preempt, Commands* out);
  // Starts `g` for `length` (kNever: no end) from the switch's time.
  void StartGroup(const Group& g, uint64_t length, Commands* out);
  // When the switch under way takes effect: when the job that gave its turn
  // up went idle, else now (its last stop answered).
  uint64_t SwitchTime() const { return switch_at_ != 0 ? switch_at_ : now_; }
  // Starts the group a switch was waiting to start, once no stop is pending.
  void FinishSwitch(Commands* out);
  Group GroupOf(const std::vector<uint64_t>& ids) const;
  void ForgetOldJobs();

  SchedulerOptions options_;
  std::map<uint64_t, Job> jobs_;
  JobHistory history_;
  uint64_t now_ = 0;
  uint64_t slice_end_ = proto::kNever;
  uint64_t turn_start_ = 0;     // when the running group's slice began (slice_end_ finite)
  std::set<uint64_t> pending_;  // stops not yet answered
  // Usage asks not yet answered, by job (the highest): answered once no
  // switch is under way, after the orders that settle the grants.
  std::map<uint64_t, uint64_t> unanswered_;
  std::set<uint64_t> reported_;  // active jobs that reported their slice end
  std::vector<uint64_t> next_;   // the group to start when pending_ empties
  uint64_t switch_at_ = 0;       // an idle switch's time, until the next group starts (0: none)
  uint64_t switches_ = 0;
  double link_bytes_per_ns_;
  size_t group_count_ = 0;
};

}  // namespace msched

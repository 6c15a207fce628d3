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

#include "coord/admission.h"
#include "coord/job.h"
#include "msched/status.h"
#include "msched/protocol.h"
#include "coord/timeline.h"

namespace msched {

struct Command {
  enum class Kind : uint8_t { kGo, kStop, kBudget, kRefuse };
  Kind kind = Kind::kGo;
  uint64_t job = 0;
  proto::Go go;         // kGo
  proto::Stop stop;     // kStop
  uint64_t budget = 0;  // kBudget
  std::string reason;   // kRefuse
};
using Commands = std::vector<Command>;

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);

  // A new job; `device_total` (what its driver reports) teaches the
  // scheduler the GPU's size when no option gave it.
  Commands Submit(Job job, uint64_t device_total, uint64_t now);
  Commands Allocated(uint64_t id, uint64_t bytes, uint64_t now);
  Commands SliceEnded(uint64_t id, uint64_t now);
  Commands Stopped(uint64_t id, const proto::Stopped& s);
  // The job exited (cleanly or not): its memory and budget are released.
  Commands Exited(uint64_t id, uint64_t now);
  // The job did not answer in time: carry on as if it had, and leave it out
  // of the rotation until it is heard from again (any event about it).
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
  // and, while slices are in force, active jobs yet to report their end.
  std::set<uint64_t> Awaiting() const;
  uint64_t switches() const { return switches_; }
  double link_bytes_per_ns() const { return link_bytes_per_ns_; }
  size_t group_count() const { return group_count_; }

 private:
  Job* Get(uint64_t id);
  // Get, for an event the job itself sent: it is alive.
  Job* Heard(uint64_t id);
  std::vector<uint64_t> Active() const;
  bool AllActiveReported() const;
  // Decides what runs now. `slice_over`: the active group's slice has ended.
  void Reschedule(bool slice_over, Commands* out);
  void BeginSwitch(const Group& next, bool preempt, Commands* out);
  void StartGroup(const Group& g, uint64_t slice_end, Commands* out);
  // Starts the group a switch was waiting to start, once no stop is pending.
  void FinishSwitch(Commands* out);
  Group GroupOf(const std::vector<uint64_t>& ids) const;
  void ForgetOldJobs();

  SchedulerOptions options_;
  std::map<uint64_t, Job> jobs_;
  JobHistory history_;
  uint64_t now_ = 0;
  uint64_t slice_end_ = proto::kNever;
  uint64_t turn_start_ = 0;  // when the running group's slice began (slice_end_ finite)
  std::set<uint64_t> pending_;    // stops not yet answered
  std::set<uint64_t> reported_;   // active jobs that reported their slice end
  std::vector<uint64_t> next_;    // the group to start when pending_ empties
  uint64_t switches_ = 0;
  double link_bytes_per_ns_;
  size_t group_count_ = 0;
};

}  // namespace msched

#include "coord/scheduler.h"

#include <algorithm>

namespace msched {
namespace {

constexpr size_t kFinishedKept = 256;                // finished jobs kept for msched status
constexpr uint64_t kMinLoadForBandwidth = 16 << 20;  // smaller loads say little about the link
// What any link between host and GPU can measure, PCIe 3 to NVLink-C2C (GB/s
// are bytes per ns): a job's report outside it is a lie or a broken clock,
// and the shared estimate that sizes everyone's slices never leaves it.
constexpr double kSlowestLinkBytesPerNs = 1.0;
constexpr double kFastestLinkBytesPerNs = 1000.0;

// A stop for `job`, which then owes one more answer.
Command StopCommand(Job& job, uint64_t evict, proto::StopReason reason) {
  ++job.stops_owed;
  proto::Stop stop;
  stop.evict_bytes = evict;
  stop.reason = reason;
  return {job.id, stop};
}

// Tells an active job that reported going idle to go on with its turn as it
// was: dated when it went idle, which its clock has passed (a Go never moves
// a job's clock back).
Command CarryOn(const Job& j, uint64_t at, uint64_t slice_end, uint64_t idle_yield) {
  proto::Go go;
  go.start_ns = at;
  go.budget = j.budget;
  go.slice_end_ns = slice_end;
  go.idle_yield_ns = idle_yield;
  return {j.id, go};
}

}  // namespace

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kWaiting: return "waiting";
    case JobState::kRunning: return "running";
    case JobState::kPaused: return "paused";
    case JobState::kFinished: return "finished";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options), link_bytes_per_ns_(options.link_bytes_per_ns) {}

Job* Scheduler::Get(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() || it->second.state == JobState::kFinished ? nullptr : &it->second;
}

const Job* Scheduler::Find(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<uint64_t> Scheduler::Active() const {
  std::vector<uint64_t> out;
  for (const auto& [id, j] : jobs_) {
    if (j.active) out.push_back(id);
  }
  return out;
}

bool Scheduler::Done(uint64_t id) const {
  const Job& j = jobs_.at(id);
  return reported_.count(id) > 0 || j.idle_in_turn || j.ceded_turn;
}

bool Scheduler::TurnOver() const {
  const std::vector<uint64_t> active = Active();
  return !active.empty() && std::all_of(active.begin(), active.end(), [&](uint64_t id) { return Done(id); });
}

bool Scheduler::IdleMembersLeave(uint64_t not_before) {
  uint64_t last_idle = 0;
  bool all_idle = true, any = false;
  for (uint64_t id : Active()) {
    Job& j = jobs_.at(id);
    if (!j.idle_in_turn) {
      all_idle = false;
      continue;
    }
    any = true;
    last_idle = std::max(last_idle, j.idle_since);
    j.idle_in_turn = false;
    j.idle = true;
    ++j.idle_yields;
    reported_.insert(id);
  }
  // They left the GPU idle from then: the next group may use it from then
  // (their clocks move there). Beside jobs that reached their slice ends,
  // the switch waits for them to drain, as at any slice end.
  if (any && all_idle) switch_at_ = std::max(last_idle, not_before);
  return any;
}

std::set<uint64_t> Scheduler::Awaiting() const {
  std::set<uint64_t> out = pending_;
  if (slice_end_ != proto::kNever) {
    for (uint64_t id : Active()) {
      if (!Done(id)) out.insert(id);
    }
  }
  return out;
}

Group Scheduler::GroupOf(const std::vector<uint64_t>& ids) const {
  Group g;
  for (uint64_t id : ids) {
    const Job* j = Find(id);
    if (j == nullptr || j->state != JobState::kRunning) continue;
    g.jobs.push_back(id);
    g.priority = g.jobs.size() == 1 ? j->priority : std::max(g.priority, j->priority);
    g.working_set += j->WorkingSetEstimate();
  }
  return g;
}

Commands Scheduler::Submit(Job job, uint64_t device_total, uint64_t now) {
  Commands out;
  now_ = std::max(now_, now);
  if (options_.hbm_bytes == 0 && device_total > 0) options_.hbm_bytes = device_total;
  job.state = JobState::kWaiting;
  job.submitted_ns = now;
  job.off_gpu_ns = now;
  const uint64_t id = job.id;
  const std::string never = NeverFits(job, options_);
  jobs_[id] = std::move(job);
  if (!never.empty()) {
    Job& j = jobs_[id];
    j.state = JobState::kFinished;
    j.finished_ns = now;
    out.push_back({id, proto::Refused{never}});
    return out;
  }
  Reschedule(false, &out);
  return out;
}

Commands Scheduler::Allocated(uint64_t id, uint64_t bytes, uint64_t now, uint64_t ask) {
  Commands out;
  now_ = std::max(now_, now);
  Job* j = Get(id);
  if (j == nullptr) return out;
  j->allocated = bytes;
  if (ask != 0) unanswered_[id] = std::max(unanswered_[id], ask);
  Reschedule(false, &out);
  return out;
}

void Scheduler::Counted(uint64_t id, const proto::JobCounters& c) {
  Job* j = Get(id);
  if (j == nullptr) return;
  j->peak_over_budget = std::max(j->peak_over_budget, c.peak_over_budget);
  j->shared = c.shared;
  j->unpaged = c.unpaged;
}

Commands Scheduler::SliceEnded(uint64_t id, uint64_t now) {
  Commands out;
  now_ = std::max(now_, now);
  Job* j = Get(id);
  if (j == nullptr) return out;
  // The answer a job owes when it owes no stop: back in the rotation.
  if (j->unresponsive && j->stops_owed == 0) j->unresponsive = false;
  if (!j->active) {                // a stale report: its slice was already taken away
    Reschedule(TurnOver(), &out);  // (it may be back from being unresponsive)
    return out;
  }
  reported_.insert(id);
  // With no slice in force (everything fits again), the job just goes on.
  if (TurnOver() || slice_end_ == proto::kNever) Reschedule(true, &out);
  return out;
}

Commands Scheduler::Idle(uint64_t id, uint64_t since) {
  Commands out;
  now_ = std::max(now_, since);
  Job* j = Get(id);
  if (j == nullptr) return out;
  if (!j->active || reported_.count(id)) {  // its turn is already ending: its Stop (or Go) answers
    Reschedule(TurnOver(), &out);
    return out;
  }
  j->idle_in_turn = true;
  j->idle_since = since;
  if (slice_end_ == proto::kNever || !pending_.empty() || !TurnOver()) {
    out.push_back(CarryOn(*j, since, slice_end_, options_.IdleYieldFor(*j)));
    return out;
  }
  IdleMembersLeave(turn_start_);
  Reschedule(/*slice_over=*/true, &out);
  return out;
}

Commands Scheduler::Busy(uint64_t id, uint64_t now) {
  Commands out;
  now_ = std::max(now_, now);
  Job* j = Get(id);
  if (j == nullptr) return out;
  // Idle in its turn while others waited, it has no claim left on the turn:
  // the others' work came first. It runs on while the rest of its group
  // does, and the turn ends when they are done, not at its own slice end.
  if (j->active && j->idle_in_turn && slice_end_ != proto::kNever) j->ceded_turn = true;
  if (j->idle) {
    j->last_pause_ns = now_ - std::min(now_, j->idle_since);
    j->back_ns = now_;
  }
  j->idle = false;
  j->idle_in_turn = false;
  Reschedule(TurnOver(), &out);
  return out;
}

Commands Scheduler::Stopped(uint64_t id, const proto::Stopped& s) {
  Commands out;
  now_ = std::max(now_, s.now_ns);
  if (Job* j = Get(id)) {
    // Only an answer to a stop it was sent counts: an unsolicited one says
    // nothing about the job's memory or the link, and must not bring a job
    // that still owes its answer back into the rotation.
    if (j->stops_owed > 0) {
      --j->stops_owed;
      j->resident = s.resident;
      if (s.working_set > 0) j->working_set = s.working_set;
      if (s.loaded >= kMinLoadForBandwidth && s.load_ns > 0) {
        const double measured = std::clamp(static_cast<double>(s.loaded) / static_cast<double>(s.load_ns),
                                           kSlowestLinkBytesPerNs, kFastestLinkBytesPerNs);
        link_bytes_per_ns_ = 0.7 * link_bytes_per_ns_ + 0.3 * measured;
      }
      if (j->stops_owed == 0) j->unresponsive = false;  // it answered all it owed: back in the rotation
    }
  }
  if (pending_.erase(id) > 0) {
    FinishSwitch(&out);
  } else {
    Reschedule(TurnOver(), &out);  // an answer nobody waited for: it may rejoin the rotation
  }
  return out;
}

Commands Scheduler::Exited(uint64_t id, uint64_t now) {
  Commands out;
  now_ = std::max(now_, now);
  Job* j = Get(id);
  if (j == nullptr) return out;
  if (j->was_admitted && j->state != JobState::kPaused) history_.Record(j->name, now_ - std::min(now_, j->admitted_ns));
  j->state = JobState::kFinished;
  j->finished_ns = now_;
  j->active = false;
  j->stops_owed = 0;
  j->resident = 0;
  reported_.erase(id);
  unanswered_.erase(id);
  next_.erase(std::remove(next_.begin(), next_.end(), id), next_.end());
  const bool was_pending = pending_.erase(id) > 0;
  ForgetOldJobs();
  if (was_pending) {
    FinishSwitch(&out);
  } else {
    Reschedule(TurnOver(), &out);
  }
  return out;
}

Commands Scheduler::Unresponsive(uint64_t id) {
  Commands out;
  Job* j = Get(id);
  if (j != nullptr) j->unresponsive = true;
  if (pending_.erase(id) > 0) {
    FinishSwitch(&out);
  } else if (j != nullptr && j->active) {
    // Its turn is over; if it wakes, it stops at its next launch and answers.
    j->active = false;
    j->off_gpu_ns = now_;
    reported_.erase(id);
    out.push_back(StopCommand(*j, 0, proto::StopReason::kSlice));
    Reschedule(TurnOver() || Active().empty(), &out);
  }
  return out;
}

Result<Commands> Scheduler::Pause(uint64_t id) {
  Job* j = Get(id);
  if (j == nullptr) return Status::NotFound("no job " + std::to_string(id));
  if (j->state == JobState::kPaused) return Status::InvalidArgument("job " + std::to_string(id) + " is already paused");
  Commands out;
  const bool running = j->state == JobState::kRunning;
  j->state = JobState::kPaused;
  j->budget = 0;  // released: its next turn, after a resume, brings a new one
  if (j->active) j->off_gpu_ns = now_;
  j->active = false;
  reported_.erase(id);
  next_.erase(std::remove(next_.begin(), next_.end(), id), next_.end());
  if (running) {
    out.push_back(StopCommand(*j, proto::kNever, proto::StopReason::kPause));
    pending_.insert(id);
  } else {
    Reschedule(TurnOver(), &out);
  }
  return out;
}

Result<Commands> Scheduler::Resume(uint64_t id) {
  Job* j = Get(id);
  if (j == nullptr) return Status::NotFound("no job " + std::to_string(id));
  if (j->state != JobState::kPaused) return Status::InvalidArgument("job " + std::to_string(id) + " is not paused");
  Commands out;
  j->state = j->was_admitted && FitsOnResume(jobs_, *j, options_) ? JobState::kRunning : JobState::kWaiting;
  Reschedule(TurnOver(), &out);
  return out;
}

Result<Commands> Scheduler::SetPriority(uint64_t id, int priority) {
  Job* j = Get(id);
  if (j == nullptr) return Status::NotFound("no job " + std::to_string(id));
  Commands out;
  j->priority = priority;
  Reschedule(TurnOver(), &out);
  return out;
}

void Scheduler::Reschedule(bool slice_over, Commands* out) {
  RescheduleGroups(slice_over, out);
  AnswerAsks(out);
}

void Scheduler::AnswerAsks(Commands* out) {
  if (!pending_.empty()) return;  // grants are not settled until the switch is done
  for (const auto& [id, ask] : unanswered_) {
    const Job* j = Get(id);
    if (j == nullptr) continue;
    // The grant in force: that of a job on the GPU (after any order it was
    // just given); a job off it learns its grant from its next Go.
    out->push_back({id, proto::Budget{j->active ? j->budget : 0, ask}});
  }
  unanswered_.clear();
}

void Scheduler::RescheduleGroups(bool slice_over, Commands* out) {
  if (!pending_.empty()) return;  // a switch is under way; FinishSwitch comes back here
  AdmitWaiting(jobs_, now_, options_, history_);
  const uint64_t usable = UsableHbm(options_);
  std::vector<Group> groups = FormGroups(jobs_, usable);
  // Others wait from now if no slice end was in force.
  if (groups.size() > 1 && TurnOver() && IdleMembersLeave(slice_end_ == proto::kNever ? now_ : turn_start_)) {
    groups = FormGroups(jobs_, usable);
    slice_over = true;
  }
  group_count_ = groups.size();
  if (groups.empty()) {
    slice_end_ = proto::kNever;
    switch_at_ = 0;
    return;
  }
  if (groups.size() == 1) {
    // A job that left the rotation while it held the GPU (it went idle) is
    // stopped first, evicting what the group lacks room for; so is memory
    // that jobs out of the rotation still hold where a joining member needs
    // room (else the driver would evict behind everyone's back).
    const std::vector<uint64_t> active = Active();
    const std::set<uint64_t> members(groups[0].jobs.begin(), groups[0].jobs.end());
    if (std::any_of(active.begin(), active.end(), [&](uint64_t id) { return !members.count(id); }) ||
        !PlanSwitchEvictions(groups[0], jobs_, usable).empty()) {
      BeginSwitch(groups[0], /*preempt=*/false, out);
    } else {
      StartGroup(groups[0], proto::kNever, out);
    }
    return;
  }
  const Group& next = groups[PickNextGroup(groups, jobs_)];
  const std::vector<uint64_t> active = Active();
  if (active.empty()) {
    BeginSwitch(next, /*preempt=*/false, out);
    return;
  }
  int active_priority = jobs_.at(active[0]).priority;
  for (uint64_t id : active) active_priority = std::max(active_priority, jobs_.at(id).priority);
  // Jobs running together that no longer fit together (they allocated more
  // than they first showed) would thrash: their turn ends now.
  const bool overfull = active.size() > 1 && GroupOf(active).working_set > usable;
  if (next.priority > active_priority) {
    BeginSwitch(next, /*preempt=*/true, out);
  } else if (slice_over || overfull) {
    BeginSwitch(next, /*preempt=*/false, out);
  } else if (slice_end_ == proto::kNever || now_ < slice_end_) {
    // The jobs now running no longer fit with the rest: their turn ends after
    // one slice, long enough to amortise the switch it ends in (loading the
    // next group), not only their own load (nothing, for jobs that started
    // on an empty GPU). Jobs show their footprints as they allocate, so the
    // slice grows with them until it ends: fixed from the first allocations,
    // it would be a tenth of what the groups' final sizes call for, and batch
    // jobs that fit in two groups would be switched three times instead of once.
    // When a short job waits, the turn amortises only the switch's loads,
    // so it comes soon; batch jobs alone would lose to running one at a time
    // unless the running group's own eviction is amortised too.
    if (slice_end_ == proto::kNever) turn_start_ = now_;
    const Group running = GroupOf(active);
    const bool short_waits = std::any_of(next.jobs.begin(), next.jobs.end(), [&](uint64_t id) {
      return history_.IsShort(jobs_.at(id), options_.short_threshold_ns);
    });
    const uint64_t length = short_waits ? std::max(SliceLength(running, jobs_, options_, link_bytes_per_ns_),
                                                   SliceLength(next, jobs_, options_, link_bytes_per_ns_))
                                        : BatchTurnLength(running, next, jobs_, options_, link_bytes_per_ns_);
    slice_end_ = slice_end_ == proto::kNever ? now_ + length : std::max(slice_end_, turn_start_ + length);
  }
}

void Scheduler::BeginSwitch(const Group& next, bool preempt, Commands* out) {
  const std::set<uint64_t> members(next.jobs.begin(), next.jobs.end());
  std::map<uint64_t, uint64_t> evict;
  for (const auto& [id, bytes] : PlanSwitchEvictions(next, jobs_, UsableHbm(options_))) evict[id] = bytes;
  bool switched = false;
  for (uint64_t id : Active()) {
    if (members.count(id)) continue;
    Job& j = jobs_.at(id);
    j.active = false;
    j.off_gpu_ns = SwitchTime();
    out->push_back(StopCommand(j, evict[id], preempt ? proto::StopReason::kPreempt : proto::StopReason::kSlice));
    pending_.insert(id);
    evict.erase(id);
    switched = true;
  }
  for (const auto& [id, bytes] : evict) {  // victims that are not running now
    out->push_back(StopCommand(jobs_.at(id), bytes, proto::StopReason::kEvictOnly));
    pending_.insert(id);
  }
  if (switched) ++switches_;
  next_ = next.jobs;
  if (preempt || pending_.empty()) {
    const std::vector<uint64_t> ids = std::move(next_);
    next_.clear();
    const Group g = GroupOf(ids);
    StartGroup(g, SliceLength(g, jobs_, options_, link_bytes_per_ns_), out);
  }
}

void Scheduler::FinishSwitch(Commands* out) {
  if (!pending_.empty()) return;
  if (!next_.empty()) {
    const std::vector<uint64_t> ids = std::move(next_);
    next_.clear();
    const Group g = GroupOf(ids);
    // Unless a job left and everything fits now (Reschedule then runs all).
    if (!g.jobs.empty() && FormGroups(jobs_, UsableHbm(options_)).size() > 1) {
      StartGroup(g, SliceLength(g, jobs_, options_, link_bytes_per_ns_), out);
    }
  }
  Reschedule(TurnOver(), out);
}

void Scheduler::StartGroup(const Group& g, uint64_t length, Commands* out) {
  const std::map<uint64_t, uint64_t> budgets = GroupBudgets(g, jobs_, UsableHbm(options_));
  const uint64_t start = SwitchTime();
  switch_at_ = 0;
  const uint64_t slice_end = length == proto::kNever ? proto::kNever : start + length;
  slice_end_ = slice_end;
  turn_start_ = start;
  for (uint64_t id : g.jobs) {
    Job& j = jobs_.at(id);
    const uint64_t budget = budgets.at(id);
    const bool waiting = !j.active || reported_.count(id) > 0;  // blocked until told to go on
    if (waiting) {
      proto::Go go;
      go.start_ns = start;
      go.budget = budget;
      go.slice_end_ns = slice_end;
      go.idle_yield_ns = options_.IdleYieldFor(j);
      go.load = !j.active && j.last_ran_ns > 0;  // back from a switch: bring its working set in
      if (go.load) ++j.swaps_in;
      out->push_back({id, go});
    } else if (budget != j.budget) {
      out->push_back({id, proto::Budget{budget, 0}});
    }
    if (!j.active || waiting) {
      j.last_ran_ns = std::max<uint64_t>(start, 1);
      ++j.slices;
      j.idle_in_turn = false;  // a new turn: it is told to go, not to carry on
    }
    j.active = true;
    j.ceded_turn = false;  // a new turn, which waits for it again
    j.budget = budget;
    j.resident = std::max(j.resident, std::min(j.WorkingSetEstimate(), budget));
  }
  reported_.clear();
}

void Scheduler::ForgetOldJobs() {
  size_t finished = 0;
  for (const auto& [id, j] : jobs_) finished += j.state == JobState::kFinished;
  for (auto it = jobs_.begin(); it != jobs_.end() && finished > kFinishedKept;) {
    if (it->second.state == JobState::kFinished) {
      it = jobs_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
}

}  // namespace msched

#include "coord/job_side.h"

#include <algorithm>
#include <utility>

#include "base/atomic_max.h"

namespace msched {

uint64_t JobSide::Hello(uint64_t allocating) {
  const uint64_t bytes = std::max(allocating, allocated_.load());
  hello_allocated_.store(bytes);
  return bytes;
}

void JobSide::OnWelcome(const proto::Welcome& w) {
  holds_turn_.store(false);
  {
    MutexLock usage(&usage_mu_);  // this connection's hello told it all
    seen_allocated_ = last_ask_bytes_ = hello_allocated_.load();
    RaiseAtLeast(answered_, asks_.load());
  }
  SetIdleness(Idleness::kBusy);
  idle_yield_ns_.store(w.idle_yield_ns);
  welcomed_ = true;
  dropped_ = false;
}

bool JobSide::ConnectionLost() {
  bool welcomed = false;
  {
    MutexLock lock(&mu_);
    welcomed = welcomed_;
    if (!welcomed) dropped_ = true;
  }
  holds_turn_.store(false);
  device_.WithdrawGrant();
  MutexLock lock(&mu_);
  welcomed_ = false;
  SetIdleness(Idleness::kBusy);
  return welcomed;
}

bool JobSide::OnGo(const proto::Go& go) {
  clock_.AdvanceTo(go.start_ns);
  const bool new_yield = idle_yield_ns_.exchange(go.idle_yield_ns) != go.idle_yield_ns;
  // The working set comes back in access order before the first kernel;
  // the kernels would wait for it anyway, so waiting here costs nothing
  // and measures the link for the coordinator.
  const uint64_t t0 = clock_.Now();
  const uint64_t loaded = device_.StartSlice(go.budget, go.load);
  if (loaded > 0) {
    loaded_bytes_ = loaded;
    load_ns_ = clock_.Now() - t0;
  }
  MutexLock lock(&mu_);
  slice_end_sent_ = false;
  // A Go while it asked is the answer: others in its group still run.
  SetIdleness(idleness_ == Idleness::kAsked ? Idleness::kCarriedOn : Idleness::kBusy);
  holds_turn_.store(true);
  // The turn (or its remainder) starts now: idleness counts from here.
  NoteActiveNow(link_.SliceEnd());
  return new_yield;
}

void JobSide::OnStop(const proto::Stop& stop) {
  holds_turn_.store(false);  // closes the gate; then the calls already past it end
  device_.Drain();
  proto::Stopped reply;
  reply.now_ns = clock_.Now();
  // The evictions overlap the incoming job's loads; a pause answers once
  // they are complete (the memory is on the host).
  const bool wait = stop.reason == proto::StopReason::kPause;
  const JobDevice::Ended end = device_.EndSlice(stop.evict_bytes, wait);
  reply.working_set = stop.reason == proto::StopReason::kEvictOnly ? 0 : end.working_set;
  if (wait) reply.now_ns = clock_.Now();
  reply.resident = end.resident;
  reply.loaded = std::exchange(loaded_bytes_, 0);
  reply.load_ns = std::exchange(load_ns_, 0);
  reply.counters = device_.Counters();
  link_.Send(reply);
  MutexLock lock(&mu_);
  if (idleness_ == Idleness::kAsked || idleness_ == Idleness::kCarriedOn) SetIdleness(Idleness::kYielded);
}

void JobSide::OnBudget(const proto::Budget& budget) {
  if (budget.budget != 0) device_.FitBudget(budget.budget);
  if (budget.answers == 0) return;
  MutexLock usage(&usage_mu_);
  // Answers to older asks say nothing of what the last one reported.
  if (budget.answers == asks_.load()) seen_allocated_ = last_ask_bytes_;
  RaiseAtLeast(answered_, budget.answers);
}

void JobSide::ReportUsage(uint64_t bytes, bool coordinated) {
  allocated_.store(bytes);  // the next hello's figure, even while the job runs alone
  if (!coordinated) return;
  uint64_t ask = 0;
  if (bytes > seen_allocated_) {
    last_ask_bytes_ = bytes;
    ask = asks_.fetch_add(1) + 1;
  } else {
    seen_allocated_ = bytes;
    last_ask_bytes_ = std::min(last_ask_bytes_, bytes);
  }
  link_.Send(proto::Usage{bytes, clock_.Now(), device_.Counters(), ask});
}

bool JobSide::Runnable() const { return holds_turn_.load() && !carried_on_.load() && answered_.load() >= asks_.load(); }

JobSide::Position JobSide::Look(uint64_t end) const {
  if (end == proto::kNever) return {};
  const uint64_t now = clock_.Now();
  if (now >= end) return {At::kOver, now, 0};
  const uint64_t since = IdleSince(now, end);
  return {since != 0 ? At::kIdle : At::kOpen, now, since};
}

bool JobSide::Pass(uint64_t end) {
  const Position p = Look(end);
  if (p.at != At::kOpen) return false;
  NoteActive(p.now, end);
  return true;
}

void JobSide::NoteActive(uint64_t now, uint64_t end) {
  if (end == proto::kNever) return;  // nobody waits: no count
  last_active_ns_.store(now, std::memory_order_relaxed);
  last_active_end_.store(end, std::memory_order_relaxed);
}

void JobSide::NoteActiveNow(uint64_t end) {
  if (end != proto::kNever) NoteActive(clock_.Now(), end);
}

void JobSide::Passed(uint64_t end) {
  NoteActiveNow(end);
  passes_.fetch_add(1, std::memory_order_release);  // its work is queued: a synchronisation from now covers it
}

void JobSide::Synchronized(uint64_t passes_before, uint64_t end) {
  RaiseAtLeast(synced_passes_, passes_before, std::memory_order_release);
  NoteActiveNow(end);
}

void JobSide::ReachedSliceEnd(uint64_t now) {
  if (slice_end_sent_) return;
  slice_end_sent_ = true;
  link_.Send(proto::SliceEnd{now});
}

void JobSide::HasWork() {
  if (idleness_ != Idleness::kYielded && idleness_ != Idleness::kCarriedOn) return;
  // Back in the rotation, or busy in its turn again (which the others'
  // turns may no longer wait on it to end).
  SetIdleness(Idleness::kBusy);
  link_.Send(proto::Idle{clock_.Now(), false});
}

void JobSide::SetIdleness(Idleness i) {
  idleness_ = i;
  carried_on_.store(i == Idleness::kCarriedOn);
}

uint64_t JobSide::IdleSince(uint64_t now, uint64_t end) const {
  const uint64_t idle = idle_yield_ns_.load(std::memory_order_relaxed);
  if (idle == 0 || end == proto::kNever || last_active_end_.load(std::memory_order_relaxed) != end) return 0;
  if (carried_on_.load()) return 0;  // the coordinator knows
  // Work it launched and has not synchronised may still run on the GPU.
  if (synced_passes_.load(std::memory_order_acquire) != passes_.load(std::memory_order_acquire)) return 0;
  const uint64_t since = last_active_ns_.load(std::memory_order_relaxed) + idle;
  return now >= since ? since : 0;
}

uint64_t JobSide::IdleDue() const {
  return last_active_ns_.load(std::memory_order_relaxed) + idle_yield_ns_.load(std::memory_order_relaxed);
}

JobSide::Position JobSide::TimerLook(uint64_t end) {
  if (end != proto::kNever && last_active_end_.load(std::memory_order_relaxed) != end) {
    const uint64_t now = clock_.Now();
    if (now < end) NoteActive(now, end);
  }
  return Look(end);
}

bool JobSide::AskIdle(bool coordinated, uint64_t end, uint64_t since) {
  const uint64_t now = clock_.Now();
  if (!coordinated || end == proto::kNever || now >= end || IdleSince(now, end) == 0) {
    // A call that was under way made it busy, nobody waits any longer, or
    // its slice is over (the launch path reports that): the gate opens
    // again. (Should the connection have just been replaced, the new
    // coordinator's slot keeps it closed until its Go.)
    holds_turn_.store(true);
    return false;
  }
  idleness_ = Idleness::kAsked;
  link_.Send(proto::Idle{since, true});
  return true;
}

}  // namespace msched

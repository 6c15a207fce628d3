// CoordClient's idle yield (coord_client.h): giving its turn up from
// whichever thread noticed that the job has been idle long enough (the
// rules, and what counts as activity, are JobSide's): the launch path, the
// simulator's idle alarm, or the timer thread on a real GPU. The alarm and
// the timer look again every idle yield while the job stays idle: another
// job may come to wait for the GPU meanwhile, which gives this job's turn
// an end; and they report a slice end that an idle job passed, and carry
// out orders that come for a job the coordinator counts idle.
#include <algorithm>
#include <chrono>

#include "client/coord_client.h"

namespace msched::hook {
namespace {

constexpr auto kIdleRecheckEvery = std::chrono::milliseconds(50);

}  // namespace

void CoordClient::Synchronized(uint64_t passes_before) { side_.Synchronized(passes_before, ReadGate().end); }

bool CoordClient::Yield(uint64_t since) {
  MutexLock order(&side_.order_mu());
  if (!side_.GiveTurnUp()) return false;  // its turn was already taken away
  WaitForPasses();
  const Gate gate = ReadGate();
  MutexLock lock(&side_.mu());
  if (side_.AskIdle(Active() == this, gate.open ? gate.end : proto::kNever, since)) return true;
  cv_.NotifyAll();  // the gate opens again
  return false;
}

void CoordClient::AwaitYieldAnswer() {
  MutexLock lock(&side_.mu());
  while (side_.idle_asked() && Active() == this) {
    ExecuteInbox();
    if (!side_.idle_asked()) break;
    cv_.WaitFor(&side_.mu(), kIdleRecheckEvery);
  }
}

void CoordClient::CarryOutOrders() {
  {
    MutexLock lock(&side_.mu());
    lockstep_->HoldWhile(&Lockstep::OrderInFlight, &side_.mu(), &cv_);
    ExecuteInbox();
  }
  HoldUntilHeard();  // the answers it sent (a Stop's reply), and the jobs they wake
}

void CoordClient::OnIdleAlarm() {
  CoordClient* c = Active();
  if (c == nullptr || ExecutingOrder::Active()) return;
  Safely(c->rt_, "giving an idle turn up", [c] {
    c->lockstep_->WaitForTurn();  // the gate as of this moment of the clock (EnterGate)
    // Orders the coordinator sent up to this moment (a Stop of its turn, an
    // eviction that makes room for another's) are carried out now, in
    // virtual time, not at the job's next launch.
    c->CarryOutOrders();
    const Gate gate = c->ReadGate();
    if (!gate.open || !c->side_.holds_turn()) return;
    const JobSide::Position p = c->side_.TimerLook(gate.end);
    if (p.at == JobSide::At::kOver) {
      {
        MutexLock lock(&c->side_.mu());
        c->side_.ReachedSliceEnd(p.now);
      }
      c->HoldUntilHeard();
      c->CarryOutOrders();  // the Stop, if the others' turn waited only for this job
      return;
    }
    if (p.at != JobSide::At::kIdle) return;
    // The turn passes on as of when the idle yield ran out (at or before
    // now: the alarm looks every idle yield), and the Stop is carried out
    // now, in virtual time, while the process holds the others back.
    if (c->Yield(p.idle_since)) {
      c->AwaitYieldAnswer();
      c->HoldUntilHeard();  // the clock moves on from here when this returns
    }
  });
}

void CoordClient::IdleTimerLoop() {
  MutexLock lock(&side_.mu());
  for (;;) {
    const Gate gate = ReadGate();
    if (attention_.load(std::memory_order_acquire) && (side_.known_idle() || !gate.open)) {
      // Orders for a job that launches nothing (the coordinator counts it
      // idle, or closed its gate: a Stop is on its way), such as the Stop of
      // its turn or evictions that make room for others' turns, are
      // carried out now, not at its next launch.
      ExecuteInbox();
      continue;
    }
    std::chrono::nanoseconds wait = kIdleRecheckEvery;
    if (side_.idle_yield_ns() != 0 && Active() == this && side_.holds_turn() && gate.open && passes_held_.load() == 0) {
      const JobSide::Position p = side_.TimerLook(gate.end);
      if (p.at == JobSide::At::kIdle) {
        lock.Unlock();
        if (Yield(p.idle_since)) AwaitYieldAnswer();
        lock.Lock();
        continue;
      }
      if (p.at == JobSide::At::kOver) {
        side_.ReachedSliceEnd(p.now);
      } else if (gate.end != proto::kNever) {
        const uint64_t due = side_.IdleDue();
        if (due > p.now) wait = std::min<std::chrono::nanoseconds>(wait, std::chrono::nanoseconds(due - p.now));
      }
    }
    cv_.WaitFor(&side_.mu(), wait);
  }
}

}  // namespace msched::hook

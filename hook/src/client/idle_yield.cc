// CoordClient's idle yield (coord_client.h): giving its turn up from
// whichever thread noticed that the job has been idle long enough (the
// rules, and what counts as activity, are JobSide's): the launch path, the
// simulator's idle alarm, or the idle timer on a real GPU (idle_timer.h).
// The alarm looks again every idle yield while the job stays idle, as the
// timer does: another job may come to wait for the GPU meanwhile, which
// gives this job's turn an end; and it reports a slice end that an idle job
// passed, and carries out orders that come for a job the coordinator counts
// idle.
#include <algorithm>
#include <chrono>

#include "client/coord_client.h"

namespace msched::hook {

void CoordClient::Synchronized(uint64_t passes_before) { side_.Synchronized(passes_before, gate_.Read().end); }

bool CoordClient::Yield(uint64_t since) {
  MutexLock order(&side_.order_mu());
  if (!side_.GiveTurnUp()) return false;  // its turn was already taken away
  gate_.WaitForPasses();
  const JobGate::View gate = gate_.Read();
  MutexLock lock(&side_.mu());
  if (side_.AskIdle(Active() == this, gate.open ? gate.end : proto::kNever, since)) return true;
  changed_.NotifyAll();  // the gate opens again
  return false;
}

void CoordClient::AwaitYieldAnswer() {
  MutexLock lock(&side_.mu());
  orders_.mu().AssertHeld();
  while (side_.idle_asked() && Active() == this) {
    orders_.RunQueued();
    if (!side_.idle_asked()) break;
    changed_.WaitFor(&side_.mu(), IdleTimer::kRecheckEvery);
  }
}

void CoordClient::CarryOutOrders() {
  {
    MutexLock lock(&side_.mu());
    orders_.mu().AssertHeld();
    lockstep_->HoldWhile(&Lockstep::OrderInFlight, &side_.mu(), &changed_);
    orders_.RunQueued();
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
    const JobGate::View gate = c->gate_.Read();
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

void CoordClient::GiveIdleTurnUp(uint64_t since) {
  if (Yield(since)) AwaitYieldAnswer();
}

}  // namespace msched::hook

// CoordClient's idle yield (coord_client.h): giving its turn up from
// whichever thread noticed that the job has been idle long enough (the
// rules, and what counts as activity, are JobSide's): the launch path, the
// simulator's idle alarm, or the timer thread on a real GPU.
#include <algorithm>
#include <chrono>

#include "coord_client.h"
#include "device_clock.h"

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

void CoordClient::OnIdleAlarm() {
  CoordClient* c = Active();
  if (c == nullptr || ExecutingOrder::Active()) return;
  Safely(c->rt_, "giving an idle turn up", [c] {
    DeviceWaitForTurn();  // the gate as of this moment of the clock (EnterGate)
    const Gate gate = c->ReadGate();
    if (!gate.open || !c->side_.holds_turn()) return;
    const JobSide::Position p = c->side_.Look(gate.end);
    if (p.at != JobSide::At::kIdle) return;
    // The clock stands where the idle yield ran out: the turn passes on
    // from now, and the Stop is carried out now, in virtual time, while
    // the process holds the others back at this time.
    if (c->Yield(p.now)) {
      c->AwaitYieldAnswer();
      c->HoldUntilHeard();  // the clock moves on from here when this returns
    }
  });
}

void CoordClient::IdleTimerLoop() {
  MutexLock lock(&side_.mu());
  for (;;) {
    std::chrono::nanoseconds wait = kIdleRecheckEvery;
    const Gate gate = ReadGate();
    if (side_.idle_yield_ns() != 0 && Active() == this && side_.holds_turn() && gate.open) {
      const uint64_t end = gate.end;
      const uint64_t now = DeviceNow();
      if (end != proto::kNever && now < end) {
        side_.CountFrom(now, end);  // slices began, or moved, since its last call: count from now
        const uint64_t since = side_.IdleSince(now, end);
        if (since != 0 && passes_held_.load() == 0) {
          lock.Unlock();
          if (Yield(since)) AwaitYieldAnswer();
          lock.Lock();
          continue;
        }
        const uint64_t due = side_.IdleDue();
        if (due > now) wait = std::min<std::chrono::nanoseconds>(wait, std::chrono::nanoseconds(due - now));
      }
    } else if (side_.yielded() && attention_.load(std::memory_order_acquire)) {
      // Given up and idle: orders that come meanwhile (evictions that make
      // room for others' turns) are carried out now, not at its next launch.
      ExecuteInbox();
      continue;
    }
    cv_.WaitFor(&side_.mu(), wait);
  }
}

}  // namespace msched::hook

#include "client/idle_timer.h"

#include <algorithm>

namespace msched::hook {

void IdleTimer::Run() {
  MutexLock lock(&side_.mu());
  orders_.mu().AssertHeld();  // the same JobSide's
  while (!stop_.load()) {
    const JobGate::View gate = gate_.Read();
    if (orders_.pending() && (side_.known_idle() || !gate.open)) {
      orders_.RunQueued();
      continue;
    }
    std::chrono::nanoseconds wait = kRecheckEvery;
    if (side_.idle_yield_ns() != 0 && yielder_.Coordinated() && side_.holds_turn() && gate.open && gate_.held() == 0) {
      const JobSide::Position p = side_.TimerLook(gate.end);
      if (p.at == JobSide::At::kIdle) {
        lock.Unlock();
        yielder_.GiveIdleTurnUp(p.idle_since);
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
    changed_.WaitFor(&side_.mu(), wait);
  }
}

}  // namespace msched::hook

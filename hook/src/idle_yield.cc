// CoordClient's idle yield (coord_client.h): what counts as the job's
// activity, when it has been idle long enough, and giving its turn up from
// whichever thread noticed: the launch path, the simulator's idle alarm, or
// the timer thread on a real GPU.
#include <algorithm>
#include <chrono>

#include "coord_client.h"
#include "device_clock.h"

namespace msched::hook {
namespace {

constexpr auto kIdleRecheckEvery = std::chrono::milliseconds(50);

}  // namespace

void CoordClient::NoteActive(uint64_t now, uint64_t end) {
  last_active_ns_.store(now, std::memory_order_relaxed);
  last_active_end_.store(end, std::memory_order_relaxed);
}

void CoordClient::Synchronized(uint64_t passes_before) {
  uint64_t known = synced_passes_.load(std::memory_order_relaxed);
  while (known < passes_before &&
         !synced_passes_.compare_exchange_weak(known, passes_before, std::memory_order_release)) {
  }
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  const uint64_t end = slot != nullptr ? slot->slice_end_ns.load(std::memory_order_relaxed) : proto::kNever;
  if (end != proto::kNever) NoteActive(DeviceNow(), end);
}

uint64_t CoordClient::IdleSince(uint64_t now, uint64_t end) const {
  const uint64_t idle = idle_yield_ns_.load(std::memory_order_relaxed);
  if (idle == 0 || end == proto::kNever || last_active_end_.load(std::memory_order_relaxed) != end) return 0;
  // Work it launched and has not synchronised may still run on the GPU.
  if (synced_passes_.load(std::memory_order_acquire) != passes_.load(std::memory_order_acquire)) return 0;
  const uint64_t since = last_active_ns_.load(std::memory_order_relaxed) + idle;
  return now >= since ? since : 0;
}

bool CoordClient::Yield(uint64_t since) {
  MutexLock exec(&exec_mu_);
  if (!running_.exchange(false)) return false;  // its turn was already taken away
  WaitForPasses();
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  const uint64_t end = slot != nullptr && slot->may_run.load(std::memory_order_acquire) != 0
                           ? slot->slice_end_ns.load(std::memory_order_relaxed)
                           : proto::kNever;
  const uint64_t now = DeviceNow();
  MutexLock lock(&mu_);
  if (Active() != this || end == proto::kNever || now >= end || IdleSince(now, end) == 0) {
    // A call that was under way made it busy, nobody waits any longer, or
    // its slice is over (the launch path reports that): the gate opens
    // again. (Should the connection have just been replaced, the new
    // coordinator's slot keeps it closed until its Go.)
    running_.store(true);
    cv_.NotifyAll();
    return false;
  }
  idleness_ = Idleness::kAsked;
  Send(proto::Idle{since, true});
  return true;
}

void CoordClient::AwaitYieldAnswer() {
  MutexLock lock(&mu_);
  while (idleness_ == Idleness::kAsked && Active() == this) {
    ExecuteInbox();
    if (idleness_ != Idleness::kAsked) break;
    cv_.WaitFor(&mu_, kIdleRecheckEvery);
  }
}

void CoordClient::OnIdleAlarm() {
  CoordClient* c = Active();
  if (c == nullptr || ExecutingOrder::Active()) return;
  Safely(c->rt_, "giving an idle turn up", [c] {
    DeviceWaitForTurn();  // the gate as of this moment of the clock (EnterGate)
    const ShmSlot* slot = c->gate_.load(std::memory_order_acquire);
    if (slot == nullptr || !c->running_.load() || slot->may_run.load(std::memory_order_acquire) == 0) return;
    const uint64_t end = slot->slice_end_ns.load(std::memory_order_relaxed);
    const uint64_t now = DeviceNow();
    if (end == proto::kNever || now >= end || c->IdleSince(now, end) == 0) return;
    // The clock stands where the idle yield ran out: the turn passes on
    // from now, and the Stop is carried out now, in virtual time, while
    // the process holds the others back at this time.
    if (c->Yield(now)) {
      c->AwaitYieldAnswer();
      c->HoldUntilHeard();  // the clock moves on from here when this returns
    }
  });
}

void CoordClient::IdleTimerLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    std::chrono::nanoseconds wait = kIdleRecheckEvery;
    const uint64_t idle = idle_yield_ns_.load();
    const ShmSlot* slot = gate_.load(std::memory_order_acquire);
    if (idle != 0 && Active() == this && running_.load() && slot != nullptr &&
        slot->may_run.load(std::memory_order_acquire) != 0) {
      const uint64_t end = slot->slice_end_ns.load(std::memory_order_relaxed);
      const uint64_t now = DeviceNow();
      if (end != proto::kNever && now < end) {
        // Slices began, or moved, since its last call: count from now.
        if (last_active_end_.load(std::memory_order_relaxed) != end) NoteActive(now, end);
        const uint64_t since = IdleSince(now, end);
        if (since != 0 && passes_held_.load() == 0) {
          lock.Unlock();
          if (Yield(since)) AwaitYieldAnswer();
          lock.Lock();
          continue;
        }
        const uint64_t due = last_active_ns_.load(std::memory_order_relaxed) + idle;
        if (due > now) wait = std::min<std::chrono::nanoseconds>(wait, std::chrono::nanoseconds(due - now));
      }
    } else if (idleness_ == Idleness::kYielded && attention_.load(std::memory_order_acquire)) {
      // Given up and idle: orders that come meanwhile (evictions that make
      // room for others' turns) are carried out now, not at its next launch.
      ExecuteInbox();
      continue;
    }
    cv_.WaitFor(&mu_, wait);
  }
}

}  // namespace msched::hook

#include "client/coord_lockstep.h"

namespace msched::hook {
namespace {

// Lockstep::None().
class NoLockstep final : public Lockstep {
 public:
  void WaitForTurn() override {}
  bool HoldsLaunches() const override { return false; }
  bool Unsettled() const override { return false; }
  bool OrderInFlight() const override { return false; }
  bool Unheard() const override { return false; }
  uint64_t Progress() const override { return 0; }
};

// A shared virtual clock's (the simulator's).
class SharedClockLockstep final : public Lockstep {
 public:
  SharedClockLockstep(DeviceEnv& env, const LinkCounts& link) : env_(env), link_(link) {}

  void WaitForTurn() override { env_.WaitForTurn(); }
  bool HoldsLaunches() const override { return MessageUnhandled() || OrderInFlight(); }
  bool Unsettled() const override { return HoldsLaunches() || PeerAboutToWake(); }
  bool OrderInFlight() const override {
    const ShmSlot* slot = link_.gate.load(std::memory_order_acquire);
    return slot != nullptr && slot->orders_sent.load(std::memory_order_acquire) > link_.orders_received.load();
  }
  bool Unheard() const override {
    // A goodbye's slot may be freed, and taken by another job, once handled.
    const ShmSlot* slot = link_.gate.load(std::memory_order_acquire);
    const bool mine = slot != nullptr && slot->job.load(std::memory_order_acquire) == link_.job_id.load();
    return (mine && MessageUnhandled()) || PeerAboutToWake();
  }
  uint64_t Progress() const override {
    const ShmSlot* slot = link_.gate.load(std::memory_order_acquire);
    const uint64_t coordinator = slot == nullptr ? 0
                                                 : slot->messages_handled.load(std::memory_order_acquire) +
                                                       slot->orders_sent.load(std::memory_order_acquire);
    return coordinator + link_.messages_sent.load() + link_.orders_received.load();
  }

 private:
  bool MessageUnhandled() const {
    const ShmSlot* slot = link_.gate.load(std::memory_order_acquire);
    return slot != nullptr && slot->messages_handled.load(std::memory_order_acquire) < link_.messages_sent.load();
  }
  // Another job is blocked with an order on its way to it (it was woken
  // with this one, say).
  bool PeerAboutToWake() const {
    const CoordShm* page = link_.page.load(std::memory_order_acquire);
    if (page == nullptr) return false;
    const uint32_t own = link_.slot_index.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < kShmSlots; ++i) {
      const ShmSlot& s = page->slot(i);
      if (i == own || s.job.load(std::memory_order_acquire) == 0) continue;
      const int32_t pid = s.pid.load(std::memory_order_relaxed);
      if (pid != 0 && env_.PeerAboutToWake(pid, s.orders_sent.load(std::memory_order_acquire))) return true;
    }
    return false;
  }

  DeviceEnv& env_;
  const LinkCounts& link_;
};

}  // namespace

std::unique_ptr<Lockstep> Lockstep::For(DeviceEnv& env, const LinkCounts& link) {
  if (!env.lockstep()) return None();
  return std::make_unique<SharedClockLockstep>(env, link);
}

std::unique_ptr<Lockstep> Lockstep::None() { return std::make_unique<NoLockstep>(); }

void Lockstep::HoldWhile(bool (Lockstep::*unsettled)() const, Mutex* mu, CondVar* cv) {
  HoldDeadline hold;
  while ((this->*unsettled)() && hold.Open(Progress())) HoldAWhile(mu, cv);
}

void Lockstep::HoldAWhile(Mutex* mu, CondVar* cv) {
  mu->Unlock();
  WaitForTurn();
  mu->Lock();
  cv->WaitFor(mu, kHandledRecheckEvery);
}

}  // namespace msched::hook

// The simulator's lockstep members of CoordClient (coord_lockstep.h).
#include <thread>

#include "coord_client.h"
#include "coord_lockstep.h"
#include "device_clock.h"

namespace msched::hook {

void CoordClient::HoldUntilHeard() {
  if (!DeviceIsSimulated()) return;
  HoldDeadline hold;
  MutexLock lock(&side_.mu());
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  // A goodbye's slot may be freed, and taken by another job, once handled.
  auto mine = [&] { return slot != nullptr && slot->job.load(std::memory_order_acquire) == job_id_.load(); };
  while (((mine() && MessageUnhandled()) || PeerAboutToWake()) && hold.Open(Progress())) HoldAWhile();
}

bool CoordClient::MessageUnhandled() const {
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  return slot != nullptr && slot->messages_handled.load(std::memory_order_acquire) < messages_sent_.load();
}

bool CoordClient::OrderInFlight() const {
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  return slot != nullptr && slot->orders_sent.load(std::memory_order_acquire) > orders_received_.load();
}

bool CoordClient::PeerAboutToWake() const {
  if (gate_page_ == nullptr) return false;
  for (uint32_t i = 0; i < kShmSlots; ++i) {
    const ShmSlot& s = gate_page_->slot(i);
    if (i == gate_slot_ || s.job.load(std::memory_order_acquire) == 0) continue;
    const int32_t pid = s.pid.load(std::memory_order_relaxed);
    if (pid != 0 && DevicePeerAboutToWake(pid, s.orders_sent.load(std::memory_order_acquire))) return true;
  }
  return false;
}

bool CoordClient::Unsettled() const {
  return DeviceIsSimulated() && (MessageUnhandled() || OrderInFlight() || PeerAboutToWake());
}

uint64_t CoordClient::Progress() const {
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  const uint64_t coordinator = slot == nullptr ? 0
                                               : slot->messages_handled.load(std::memory_order_acquire) +
                                                     slot->orders_sent.load(std::memory_order_acquire);
  return coordinator + messages_sent_.load() + orders_received_.load();
}

void CoordClient::HoldAWhile() {
  side_.mu().Unlock();
  DeviceWaitForTurn();
  side_.mu().Lock();
  cv_.WaitFor(&side_.mu(), kHandledRecheckEvery);
}

}  // namespace msched::hook

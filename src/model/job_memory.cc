#include "model/job_memory.h"

#include <algorithm>

#include "model/action_executor.h"

namespace msched {

JobMemory::JobMemory(EvictionPolicy policy) { manager_.set_eviction_policy(policy); }

void JobMemory::SetConfigured(uint64_t bytes) {
  budget_.configured = bytes;
  ApplyBudget();
}

void JobMemory::SetDevice(uint64_t bytes) {
  budget_.device = bytes;
  ApplyBudget();
}

void JobMemory::SetGranted(uint64_t bytes) {
  budget_.granted = bytes;
  ApplyBudget();
}

void JobMemory::AddPinned(int64_t delta) {
  budget_.pinned = static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(budget_.pinned) + delta));
  ApplyBudget();
}

MoveOutcome JobMemory::MakeResident(const std::vector<PredictedRegion>& regions, uint64_t seq, StreamHandle stream,
                                    DeviceOps& ops, Load load) {
  if (regions.empty() || budget_.Total() == 0) return {};
  MemoryActions actions;
  manager_.PlanAccess(regions, seq, &actions);
  if (load == Load::kLeaveToFaults) {
    actions.load.clear();
    actions.load_bytes = 0;
  }
  MoveOutcome out = Carry(actions, stream, ops, /*wait=*/false);
  out.unserved = actions.unserved_bytes;
  return out;
}

MoveOutcome JobMemory::EvictAll(DeviceOps& ops, bool wait) {
  MemoryActions all;
  manager_.PlanEvictAll(&all);
  const uint64_t known = all.evict_bytes;
  MoveOutcome out = Carry(all, /*stream=*/0, ops, /*wait=*/false);
  MemoryActions duplicates;
  manager_.DropReadMostly(&duplicates);
  const MoveOutcome again = Carry(duplicates, /*stream=*/0, ops, wait);
  if (out.status.ok()) out.status = again.status;
  if (wait && duplicates.empty()) {
    if (Status s = ops.SynchronizeTransfers(); out.status.ok()) out.status = s;
  }
  // The passes name whole allocations: count what was known to be there.
  out.evicted = out.status.ok() ? known : std::min(known, out.evicted);
  return out;
}

MoveOutcome JobMemory::Reload(const std::vector<ByteRange>& ranges, DeviceOps& ops) {
  if (ranges.empty()) return {};
  manager_.ForgetResidency();
  MemoryActions actions;
  manager_.PlanLoad(ranges, &actions);
  return Carry(actions, /*stream=*/0, ops, /*wait=*/true);
}

MoveOutcome JobMemory::Evict(uint64_t bytes, DeviceOps& ops) {
  if (bytes == 0) return {};
  MemoryActions actions;
  manager_.PlanEviction(bytes, &actions);
  return Carry(actions, /*stream=*/0, ops, /*wait=*/false);
}

MoveOutcome JobMemory::FitBudget(DeviceOps& ops) {
  const uint64_t resident = manager_.resident_bytes(), limit = manager_.budget();
  return resident > limit ? Evict(resident - limit, ops) : MoveOutcome{};
}

MoveOutcome JobMemory::ForgoReadMostly(DeviceOps& ops) {
  MemoryActions actions;
  manager_.ForgoReadMostly(&actions);
  return Carry(actions, /*stream=*/0, ops, /*wait=*/false);
}

MoveOutcome JobMemory::Carry(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, bool wait) {
  MoveOutcome out;
  if (actions.empty()) return out;
  MovedBytes moved;
  out.status = ExecuteActions(actions, stream, ops, manager_, &moved);
  if (wait) {
    if (Status s = ops.SynchronizeTransfers(); out.status.ok()) out.status = s;
  }
  out.loaded = moved.loaded;
  out.evicted = moved.evicted;
  return out;
}

}  // namespace msched

#include "model/job_memory.h"

#include <algorithm>

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

void JobMemory::AddShared(int64_t delta) {
  shared_ = static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(shared_) + delta));
  CountPinned();
}

MoveOutcome JobMemory::MakeResident(const std::vector<PredictedRegion>& regions, uint64_t seq, StreamHandle stream,
                                    DeviceOps& ops, Load load) {
  if (regions.empty() || budget_.Total() == 0) return {};
  MemoryActions actions;
  // Left to faults, only what the launch's regions touch comes in.
  manager_.PlanAccess(
      regions, seq, &actions,
      load == Load::kPrefetch ? MemoryManager::Granularity::kWholeChunks : MemoryManager::Granularity::kPredicted);
  if (load == Load::kLeaveToFaults) {
    actions.load.clear();
    actions.load_bytes = 0;
  }
  // A plan that moves nothing (advice alone included) marks its place here,
  // one that moves marks it in Execute. A failed mark costs only overlap: a
  // later eviction waits longer.
  if (actions.load.empty() && actions.evict.empty() && UnderPressure()) (void)ops.MarkQueued(stream, seq);
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
  const MoveOutcome again = Carry(duplicates, /*stream=*/0, ops, /*wait=*/false);
  if (out.status.ok()) out.status = again.status;
  if (wait) {
    if (Status s = ops.SynchronizeTransfers(); out.status.ok()) out.status = s;
  }
  // The passes name whole allocations: count what was known to be there.
  out.evicted = out.status.ok() ? known : std::min(known, out.evicted);
  return out;
}

JobMemory::SliceEnd JobMemory::EndSlice(uint64_t completed, uint64_t evict_bytes, bool wait, DeviceOps& ops) {
  manager_.MarkCompleted(completed);
  std::vector<ByteRange> used = manager_.TakeWorkingSet();
  if (!used.empty()) last_working_set_ = std::move(used);
  // Evict what the next slice needs last: its own working set comes back first.
  manager_.SetFuture({last_working_set_});
  SliceEnd end;
  end.working_set = TotalBytes(last_working_set_);
  const bool all = evict_bytes > 0 && evict_bytes >= manager_.resident_bytes();
  end.moved = all ? EvictAll(ops, wait) : Evict(evict_bytes, ops);
  return end;
}

MoveOutcome JobMemory::StartSlice(bool load, DeviceOps& ops) {
  manager_.SetFuture({});
  if (!load || last_working_set_.empty()) return {};
  const uint64_t held = manager_.resident_bytes();
  manager_.ForgetResidency();
  MemoryActions actions;
  manager_.PlanLoad(last_working_set_, &actions);
  MoveOutcome out = Carry(actions, /*stream=*/0, ops, /*wait=*/true);
  out.loaded = out.loaded > held ? out.loaded - held : 0;
  return out;
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

void JobMemory::NoteEvictionTime(uint64_t bytes, uint64_t held_ns) {
  if (manager_.drop_preference() > 1) return;  // priced already
  eviction_bytes_ += bytes;
  eviction_held_ns_ += held_ns;
  if (eviction_bytes_ >= kMinEvictionSample && eviction_held_ns_ * kFastLinkBytesPerNs >= eviction_bytes_) {
    manager_.set_drop_preference(ResidencyPlanner::kDropPreference);
  }
}

MoveOutcome JobMemory::Carry(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, bool wait) {
  MoveOutcome out;
  if (actions.empty()) return out;
  MovedBytes moved;
  out.status = Execute(actions, stream, ops, &moved);
  if (wait) {
    if (Status s = ops.SynchronizeTransfers(); out.status.ok()) out.status = s;
  }
  out.loaded = moved.loaded;
  out.evicted = moved.evicted;
  return out;
}

Status JobMemory::Execute(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, MovedBytes* moved) {
  if (actions.empty()) return Status::Ok();
  Status first_error;
  MemoryActions failed;
  auto note = [&](const Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
    return s.ok();
  };
  // Advice first: a write must not land on a read duplicate, and loads made
  // after the advice keep their host copies. Failed advice only costs the
  // copies back it would have saved.
  for (const ByteRange& r : actions.read_mostly_off) note(ops.SetReadMostly(r, false));
  for (const ByteRange& r : actions.read_mostly_on) note(ops.SetReadMostly(r, true));
  // Each plan that moves memory marks its place in the launch stream, so
  // that a later plan's evictions can wait for exactly the kernels that
  // used their victims rather than for everything queued by then.
  if (actions.op != 0 && !(actions.load.empty() && actions.evict.empty())) note(ops.MarkQueued(stream, actions.op));
  evicted_ |= !actions.evict.empty();
  // This plan's evictions and loads touch different chunks and may overlap;
  // earlier plans' evictions must not overtake its loads.
  if (!actions.load.empty()) note(ops.LoadsAfterEvictions());
  const auto load = [&] {
    for (const ByteRange& r : actions.load) {
      if (!note(ops.Prefetch(r, /*to_device=*/true))) failed.load.push_back(r);
    }
  };
  // Loads first where the device has room for them beside the budget: an
  // eviction waits for the kernels using its victims (and, on a GPU, holds
  // the calling thread until its copy is done), and the launch needs only
  // the loads.
  const bool loads_first = actions.load_bytes <= Headroom();
  if (loads_first) load();
  if (actions.evict_after != 0 && !note(ops.EvictionsAfter(stream, actions.evict_after))) {
    // Evicting now could take memory from queued kernels: skip the evictions.
    failed.evict = actions.evict;
  } else if (!actions.evict.empty()) {
    const uint64_t began = ops.NowNs();
    for (const ByteRange& r : actions.evict) {
      if (!note(ops.Prefetch(r, /*to_device=*/false))) failed.evict.push_back(r);
    }
    NoteEvictionTime(TotalBytes(actions.evict) - TotalBytes(failed.evict), ops.NowNs() - began);
  }
  if (!loads_first) load();
  if (!actions.load.empty()) note(ops.StreamAfterTransfers(stream));
  if (!failed.empty()) manager_.Invalidate(failed);
  if (moved != nullptr) {
    moved->evicted = TotalBytes(actions.evict) - TotalBytes(failed.evict);
    moved->loaded = TotalBytes(actions.load) - TotalBytes(failed.load);
  }
  return first_error;
}

}  // namespace msched

#include "memory_manager.h"

#include <algorithm>
#include <unordered_set>

namespace msched {

std::vector<ByteRange> MergeAdjacent(const std::vector<ByteRange>& ranges) {
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && out.back().end == r.begin) out.back().end = r.end;
    else out.push_back(r);
  }
  return out;
}

void MemoryManager::AddAllocation(uint64_t base, uint64_t size) {
  if (size == 0 || (size + kChunkSize - 1) / kChunkSize >= (uint64_t{1} << kChunkIndexBits)) return;
  RemoveAllocation(base);
  Alloc a{base, size, next_serial_++, std::vector<Chunk>((size + kChunkSize - 1) / kChunkSize)};
  base_of_serial_[a.serial] = base;
  allocs_[base] = std::move(a);
}

void MemoryManager::RemoveAllocation(uint64_t base) {
  auto it = allocs_.find(base);
  if (it == allocs_.end()) return;
  for (size_t i = 0; i < it->second.chunks.size(); ++i) {
    if (it->second.chunks[i].resident) resident_bytes_ -= ChunkBytes(it->second, i);
  }
  base_of_serial_.erase(it->second.serial);
  allocs_.erase(it);
}

uint64_t MemoryManager::managed_bytes() const {
  uint64_t total = 0;
  for (const auto& [base, a] : allocs_) total += a.size;
  return total;
}

MemoryManager::Alloc* MemoryManager::Find(uint64_t addr) {
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return nullptr;
  --it;
  return addr - it->second.base < it->second.size ? &it->second : nullptr;
}

uint64_t MemoryManager::ChunkBytes(const Alloc& a, size_t i) const {
  return std::min<uint64_t>(kChunkSize, a.size - i * kChunkSize);
}

MemoryManager::Chunk* MemoryManager::ChunkAt(ChunkId id, ByteRange* range) {
  auto base = base_of_serial_.find(id >> kChunkIndexBits);
  if (base == base_of_serial_.end()) return nullptr;
  Alloc& a = allocs_.at(base->second);
  const size_t i = id & ((uint64_t{1} << kChunkIndexBits) - 1);
  if (i >= a.chunks.size()) return nullptr;
  const uint64_t begin = a.base + i * kChunkSize;
  if (range) *range = {begin, begin + ChunkBytes(a, i)};
  return &a.chunks[i];
}

void MemoryManager::ChunksIn(const ByteRange& r, AccessStep* out) {
  for (uint64_t p = r.begin; p < r.end;) {
    Alloc* a = Find(p);
    if (a == nullptr) {  // not managed: on to the next allocation, if any
      auto next = allocs_.upper_bound(p);
      if (next == allocs_.end() || next->second.base >= r.end) return;
      p = next->second.base;
      continue;
    }
    const uint64_t end = std::min(r.end, a->base + a->size);
    for (size_t i = (p - a->base) / kChunkSize; i <= (end - 1 - a->base) / kChunkSize; ++i) out->push_back(IdOf(*a, i));
    p = end;
  }
}

std::vector<ChunkId> MemoryManager::ResidentByRecency() const {
  std::vector<std::pair<uint64_t, ChunkId>> by_use;
  for (const auto& [base, a] : allocs_) {
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      if (a.chunks[i].resident) by_use.push_back({a.chunks[i].last_use, IdOf(a, i)});
    }
  }
  std::sort(by_use.begin(), by_use.end());
  std::vector<ChunkId> out;
  out.reserve(by_use.size());
  for (const auto& [use, id] : by_use) out.push_back(id);
  return out;
}

void MemoryManager::Apply(const StepPlan& step, MemoryActions* out) {
  std::vector<ByteRange> evict, load;
  for (ChunkId id : step.evict) {
    ByteRange r;
    Chunk* c = ChunkAt(id, &r);
    if (c == nullptr || !c->resident) continue;
    c->resident = false;
    resident_bytes_ -= r.size();
    out->evict_bytes += r.size();
    if (c->last_use > completed_) out->evict_after_queue = true;
    evict.push_back(r);
  }
  for (ChunkId id : step.load) {
    ByteRange r;
    Chunk* c = ChunkAt(id, &r);
    if (c == nullptr || c->resident) continue;
    c->resident = true;
    resident_bytes_ += r.size();
    out->load_bytes += r.size();
    load.push_back(r);
  }
  for (ChunkId id : step.unserved) {
    ByteRange r;
    if (ChunkAt(id, &r)) out->unserved_bytes += r.size();
  }
  std::sort(evict.begin(), evict.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  for (const ByteRange& r : MergeAdjacent(evict)) out->evict.push_back(r);
  for (const ByteRange& r : MergeAdjacent(load)) out->load.push_back(r);
}

void MemoryManager::PlanAccess(const std::vector<PredictedRegion>& regions, uint64_t seq, MemoryActions* out) {
  latest_ = std::max(latest_, seq);
  ++epoch_;
  need_.clear();
  bool missing = false;
  for (const PredictedRegion& pr : regions) {
    touched_.clear();
    ChunksIn(pr.range, &touched_);
    for (ChunkId id : touched_) {
      Chunk* c = ChunkAt(id, nullptr);
      if (c->epoch == epoch_) continue;  // already counted by this call
      c->epoch = epoch_;
      c->last_use = seq;
      need_.push_back(id);
      missing = missing || !c->resident;
      if (in_working_set_.insert(id).second) working_set_.push_back(id);
    }
  }
  if (!missing) return;
  PlannerInput in;
  in.capacity = budget_ / kChunkSize;
  in.resident = ResidentByRecency();
  in.future.reserve(1 + future_.size());
  in.future.push_back(need_);
  in.future.insert(in.future.end(), future_.begin(), future_.end());
  const Plan plan = PlanOpt(in);
  if (!plan.steps.empty()) Apply(plan.steps[0], out);
}

void MemoryManager::SetFuture(std::vector<std::vector<ByteRange>> steps) {
  future_.clear();
  for (const auto& ranges : steps) {
    AccessStep step;
    for (const ByteRange& r : ranges) ChunksIn(r, &step);
    future_.push_back(std::move(step));
  }
}

void MemoryManager::PlanEviction(uint64_t bytes, MemoryActions* out) {
  const uint64_t keep = bytes >= resident_bytes_ ? 0 : resident_bytes_ - bytes;
  PlannerInput in;
  in.capacity = keep / kChunkSize;
  in.resident = ResidentByRecency();
  in.future = future_;
  const Plan plan = PlanOpt(in);
  if (!plan.steps.empty()) {
    StepPlan shed;
    shed.evict = plan.steps[0].evict;
    Apply(shed, out);
  }
}

void MemoryManager::PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out) {
  std::vector<PredictedRegion> regions;
  for (const ByteRange& r : ranges) regions.push_back({r, AccessMode::kRead});
  PlanAccess(regions, latest_, out);
}

void MemoryManager::Invalidate(const MemoryActions& actions) {
  auto set = [this](const std::vector<ByteRange>& ranges, bool resident) {
    AccessStep ids;
    for (const ByteRange& r : ranges) ChunksIn(r, &ids);
    for (ChunkId id : ids) {
      ByteRange cr;
      Chunk* c = ChunkAt(id, &cr);
      if (c == nullptr || c->resident == resident) continue;
      c->resident = resident;
      if (resident) resident_bytes_ += cr.size();
      else resident_bytes_ -= cr.size();
    }
  };
  set(actions.load, false);   // a failed load left its data on the host
  set(actions.evict, true);   // a failed eviction left its data on the device
}

std::vector<ByteRange> MemoryManager::TakeWorkingSet() {
  std::vector<ByteRange> ranges;
  for (ChunkId id : working_set_) {
    ByteRange r;
    if (ChunkAt(id, &r)) ranges.push_back(r);
  }
  working_set_.clear();
  in_working_set_.clear();
  return MergeAdjacent(ranges);
}

}  // namespace msched

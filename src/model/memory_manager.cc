#include "model/memory_manager.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace msched {

std::vector<ByteRange> MemoryManager::MergeWithinAllocations(const std::vector<ByteRange>& ranges) const {
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && out.back().end == r.begin && allocs_.count(r.begin) == 0) out.back().end = r.end;
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
    resident_bytes_ -= UnitBytes(it->second, i, it->second.chunks[i].resident);
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

bool MemoryManager::Lookup(ChunkId id, ChunkRef* out) {
  auto base = base_of_serial_.find(id >> kChunkIndexBits);
  if (base == base_of_serial_.end()) return false;
  Alloc& a = allocs_.at(base->second);
  const size_t i = id & ((uint64_t{1} << kChunkIndexBits) - 1);
  if (i >= a.chunks.size()) return false;
  *out = {&a, i};
  return true;
}

template <typename Fn>
void MemoryManager::ForEachChunk(const ByteRange& r, Fn&& fn) {
  for (uint64_t p = r.begin; p < r.end;) {
    Alloc* a = Find(p);
    if (a == nullptr) {  // not managed: on to the next allocation, if any
      auto next = allocs_.upper_bound(p);
      if (next == allocs_.end() || next->second.base >= r.end) return;
      p = next->second.base;
      continue;
    }
    const uint64_t end = std::min(r.end, a->base + a->size);
    for (size_t i = (p - a->base) / kChunkSize; i <= (end - 1 - a->base) / kChunkSize; ++i) {
      const uint64_t chunk_begin = a->base + i * kChunkSize;
      const uint64_t lo = std::max(p, chunk_begin) - chunk_begin;
      const uint64_t hi = std::min(end, chunk_begin + kChunkSize) - chunk_begin;  // exclusive
      const uint32_t first = static_cast<uint32_t>(lo / kUnit), last = static_cast<uint32_t>((hi - 1) / kUnit);
      const uint32_t units = last - first == kUnitsPerChunk - 1 ? ~0u : ((1u << (last - first + 1)) - 1) << first;
      fn(IdOf(*a, i), a->chunks[i], units);
    }
    p = end;
  }
}

uint64_t MemoryManager::UnitBytes(const Alloc& a, size_t i, uint32_t units) const {
  if (units == 0) return 0;
  const uint64_t chunk_bytes = std::min<uint64_t>(kChunkSize, a.size - i * kChunkSize);
  const uint32_t last_unit = static_cast<uint32_t>((chunk_bytes - 1) / kUnit);
  uint64_t bytes = std::popcount(units) * kUnit;
  if (units >> last_unit & 1u) bytes -= (last_unit + 1) * kUnit - chunk_bytes;  // the partial tail unit
  return bytes;
}

uint32_t MemoryManager::AllUnits(const Alloc& a, size_t i) {
  const uint64_t chunk_bytes = std::min<uint64_t>(kChunkSize, a.size - i * kChunkSize);
  const uint32_t last_unit = static_cast<uint32_t>((chunk_bytes - 1) / kUnit);
  return last_unit == kUnitsPerChunk - 1 ? ~0u : (1u << (last_unit + 1)) - 1;
}

void MemoryManager::UnitRanges(const Alloc& a, size_t i, uint32_t units, std::vector<ByteRange>* out) const {
  const uint64_t chunk_begin = a.base + i * kChunkSize;
  const uint64_t alloc_end = a.base + a.size;
  while (units) {
    const uint32_t first = std::countr_zero(units);
    const uint32_t run = std::countr_one(units >> first);
    const uint64_t begin = chunk_begin + first * kUnit;
    out->push_back({begin, std::min(alloc_end, begin + run * kUnit)});
    units = run == 32 ? 0 : units & ~(((1u << run) - 1) << first);
  }
}

Plan MemoryManager::Planned(const PlannerInput& in) const {
  return policy_ == EvictionPolicy::kLru ? PlanLru(in) : PlanOpt(in);
}

uint64_t MemoryManager::PredictedNextUse(const Chunk& c, uint64_t loop) const {
  const uint64_t last = c.last_use(), prev = c.prev_use();
  const uint64_t own = prev != 0 && prev < last ? last + (last - prev) : 0;
  if (loop == 0) return own;
  // Each use within the last loop comes back one loop later.
  uint64_t next = 0;
  for (uint64_t u : c.uses) {
    if (u != 0 && u + loop > latest_ && (next == 0 || u + loop < next)) next = u + loop;
  }
  // The chunk's own interval serves where the loop says nothing, if it
  // still lies ahead (a loop estimated too short misses the chunk's uses).
  if (own > latest_ && next == 0) next = own;
  // A chunk used more than four times a loop lost a use within it from the
  // history, which may come back before the remembered ones: its own
  // interval, even one already past (it is due any time), ranks it near.
  // (Training's gradient buffers, used every other launch in backward,
  // stay resident so: 1.42x Belady at E-train 150% without this, 1.27x.)
  if (c.forgotten_use != 0 && c.forgotten_use + loop > latest_ && own != 0) next = std::min(next, own);
  return next;
}

std::vector<ChunkId> MemoryManager::ResidentVictimOrder() const {
  // Sort key: (0, last use) for chunks with no predicted next use, then
  // (1, -predicted next use), so that ascending order puts the best victims
  // first.
  std::vector<std::tuple<int, uint64_t, ChunkId>> keyed;
  const uint64_t loop = loop_interval();
  for (const auto& [base, a] : allocs_) {
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      const Chunk& c = a.chunks[i];
      if (!c.resident) continue;
      const uint64_t next = policy_ == EvictionPolicy::kLru ? 0 : PredictedNextUse(c, loop);
      if (next == 0) {
        keyed.emplace_back(0, c.last_touch, IdOf(a, i));
      } else {
        keyed.emplace_back(1, UINT64_MAX - next, IdOf(a, i));
      }
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<ChunkId> out;
  out.reserve(keyed.size());
  for (const auto& [group, key, id] : keyed) out.push_back(id);
  return out;
}

void MemoryManager::Apply(const StepPlan& step, MemoryActions* out) {
  std::vector<ByteRange> evict, load;
  for (ChunkId id : step.evict) {
    ChunkRef ref;
    if (!Lookup(id, &ref) || ref.chunk().resident == 0) continue;
    Chunk& c = ref.chunk();
    const uint64_t bytes = UnitBytes(*ref.alloc, ref.index, c.resident);
    resident_bytes_ -= bytes;
    out->evict_bytes += bytes;
    if (c.last_touch > completed_) out->evict_after = std::max(out->evict_after, c.last_touch);
    UnitRanges(*ref.alloc, ref.index, c.resident, &evict);
    c.resident = 0;
  }
  std::unordered_set<ChunkId> unserved(step.unserved.begin(), step.unserved.end());
  // Every chunk this call needs and the plan keeps gets its missing units, in
  // access order (the plan lists only chunks that were not resident at all).
  for (ChunkId id : need_) {
    ChunkRef ref;
    if (!Lookup(id, &ref)) continue;
    Chunk& c = ref.chunk();
    ref.alloc->touched = true;
    const uint32_t missing = c.need & ~c.resident;
    if (missing == 0) continue;
    const uint64_t bytes = UnitBytes(*ref.alloc, ref.index, missing);
    // Loaded or not, the launch brings what it touches to the device: left
    // out, it faults in (over the budget until the next plan sheds it).
    resident_bytes_ += bytes;
    c.resident |= missing;
    if (unserved.count(id)) {
      out->unserved_bytes += bytes;
      continue;
    }
    out->load_bytes += bytes;
    UnitRanges(*ref.alloc, ref.index, missing, &load);
  }
  std::sort(evict.begin(), evict.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  for (const ByteRange& r : MergeWithinAllocations(evict)) out->evict.push_back(r);
  for (const ByteRange& r : MergeWithinAllocations(load)) out->load.push_back(r);
}

void MemoryManager::NoteAccessModes(const std::vector<PredictedRegion>& regions, MemoryActions* out) {
  for (const PredictedRegion& pr : regions) {
    Alloc* a = Find(pr.range.begin);
    if (a == nullptr) continue;
    const ByteRange whole{a->base, a->base + a->size};
    if (pr.mode != AccessMode::kRead) {
      a->reads_since_write = 0;
      if (a->read_mostly) a->read_mostly = false, out->read_mostly_off.push_back(whole);
    } else if (read_mostly_allowed_ && !a->read_mostly && ++a->reads_since_write >= kReadsBeforeReadMostly) {
      a->read_mostly = true;
      out->read_mostly_on.push_back(whole);
    }
  }
}

void MemoryManager::ForgoReadMostly(MemoryActions* out) {
  read_mostly_allowed_ = false;
  for (auto& [base, a] : allocs_) {
    if (a.read_mostly) a.read_mostly = false, out->read_mostly_off.push_back(ByteRange{a.base, a.base + a.size});
  }
}

void MemoryManager::NoteLaunch(uint64_t signature, uint64_t seq) {
  // The multiply carries low bits up only: fold the high bits down before
  // indexing.
  SeenLaunch& seen = seen_launches_[(signature ^ signature >> 32 ^ signature >> 48) & (kSeenLaunches - 1)];
  if (seen.signature == signature && seen.seq < seq) {
    const uint64_t interval = seq - seen.seq;
    if (interval == loop_candidate_) {
      loop_votes_ = std::min(loop_votes_ + 1, kLoopVotes);
    } else {
      loop_candidate_ = interval;
      loop_votes_ = 1;
    }
  }
  seen = {signature, seq};
}

void MemoryManager::Access(const std::vector<PredictedRegion>& regions, uint64_t seq, bool launch,
                           MemoryActions* out, Granularity granularity) {
  NoteAccessModes(regions, out);
  latest_ = std::max(latest_, seq);
  ++epoch_;
  need_.clear();
  // FNV-1a over the chunks and units each region touches, and its mode:
  // which memory the launch accesses, named by allocation and place in it
  // rather than by address, so that the same program numbers its launches
  // alike in every run (addresses move with the address-space layout).
  uint64_t signature = 0xcbf29ce484222325ull;
  auto mix = [&signature](uint64_t v) { signature = (signature ^ v) * 0x100000001b3ull; };
  bool missing = false;
  for (const PredictedRegion& pr : regions) {
    mix(static_cast<uint64_t>(pr.mode));
    ForEachChunk(pr.range, [&](ChunkId id, Chunk& c, uint32_t units) {
      mix(id);
      mix(units);
      if (c.epoch != epoch_) {  // first time this call sees the chunk
        c.epoch = epoch_;
        c.need = 0;
        if (launch && c.last_use() != seq) {
          c.forgotten_use = c.uses.back();
          std::copy_backward(c.uses.begin(), c.uses.end() - 1, c.uses.end());
          c.uses[0] = seq;
        }
        c.last_touch = seq;  // seq only grows: a load uses the latest launch's
        need_.push_back(id);
        if (in_working_set_.insert(id).second) working_set_.push_back(id);
      }
      c.need |= units;
      missing = missing || (units & ~c.resident) != 0;
    });
  }
  if (launch) NoteLaunch(signature, seq);
  if (!missing && resident_bytes_ <= budget_) return;
  if (missing && granularity == Granularity::kWholeChunks) WidenToWholeChunks();
  PlannerInput in;
  in.capacity = budget_;
  in.resident = ResidentVictimOrder();
  for (ChunkId id : in.resident) {
    ChunkRef ref;
    Lookup(id, &ref);
    in.size[id] = UnitBytes(*ref.alloc, ref.index, ref.chunk().resident);
  }
  for (ChunkId id : need_) {
    ChunkRef ref;
    Lookup(id, &ref);
    in.size[id] = UnitBytes(*ref.alloc, ref.index, ref.chunk().resident | ref.chunk().need);
  }
  for (const auto& [id, bytes] : future_bytes_) in.size.emplace(id, bytes);
  in.future.reserve(1 + future_.size());
  in.future.push_back(need_);
  in.future.insert(in.future.end(), future_.begin(), future_.end());
  const Plan plan = Planned(in);
  if (launch) out->op = seq;
  Apply(plan.steps.empty() ? StepPlan{} : plan.steps[0], out);
}

void MemoryManager::WidenToWholeChunks() {
  // What each widening adds to the resident bytes: the chunks lacking units,
  // whole; then the rest of the untouched allocations among them.
  uint64_t chunks = resident_bytes_, fresh = 0;
  std::vector<Alloc*> untouched;
  for (ChunkId id : need_) {
    ChunkRef ref;
    if (!Lookup(id, &ref) || (ref.chunk().need & ~ref.chunk().resident) == 0) continue;
    chunks += UnitBytes(*ref.alloc, ref.index, AllUnits(*ref.alloc, ref.index) & ~ref.chunk().resident);
    if (!ref.alloc->touched && ref.alloc->size <= kMaxWholeAllocation &&
        std::find(untouched.begin(), untouched.end(), ref.alloc) == untouched.end()) {
      untouched.push_back(ref.alloc);
      for (size_t i = 0; i < ref.alloc->chunks.size(); ++i) {
        if (ref.alloc->chunks[i].epoch != epoch_) fresh += UnitBytes(*ref.alloc, i, AllUnits(*ref.alloc, i));
      }
    }
  }
  if (chunks > budget_) return;
  for (ChunkId id : need_) {
    ChunkRef ref;
    if (Lookup(id, &ref) && (ref.chunk().need & ~ref.chunk().resident) != 0) {
      ref.chunk().need |= AllUnits(*ref.alloc, ref.index);
    }
  }
  if (chunks + fresh > budget_) return;
  for (Alloc* a : untouched) {
    for (size_t i = 0; i < a->chunks.size(); ++i) {
      Chunk& c = a->chunks[i];
      if (c.epoch == epoch_) continue;  // needed already, and widened above
      c.epoch = epoch_;
      c.need = AllUnits(*a, i);
      need_.push_back(IdOf(*a, i));
    }
  }
}

void MemoryManager::SetFuture(std::vector<std::vector<ByteRange>> steps) {
  future_.clear();
  future_bytes_.clear();
  for (const auto& ranges : steps) {
    AccessStep step;
    std::unordered_map<ChunkId, uint32_t> units;
    for (const ByteRange& r : ranges) {
      ForEachChunk(r, [&](ChunkId id, Chunk&, uint32_t u) {
        if (!units.count(id)) step.push_back(id);
        units[id] |= u;
      });
    }
    for (const auto& [id, u] : units) {
      ChunkRef ref;
      Lookup(id, &ref);
      future_bytes_[id] = std::max(future_bytes_[id], UnitBytes(*ref.alloc, ref.index, u));
    }
    future_.push_back(std::move(step));
  }
}

void MemoryManager::PlanEviction(uint64_t bytes, MemoryActions* out) {
  PlannerInput in;
  in.capacity = bytes >= resident_bytes_ ? 0 : resident_bytes_ - bytes;
  in.resident = ResidentVictimOrder();
  for (ChunkId id : in.resident) {
    ChunkRef ref;
    Lookup(id, &ref);
    in.size[id] = UnitBytes(*ref.alloc, ref.index, ref.chunk().resident);
  }
  // An empty first step: nothing is needed now, so nothing is kept back;
  // the future only orders the victims (needed last goes first).
  in.future.reserve(1 + future_.size());
  in.future.push_back({});
  in.future.insert(in.future.end(), future_.begin(), future_.end());
  const Plan plan = Planned(in);
  need_.clear();  // nothing to load
  if (!plan.steps.empty()) {
    StepPlan shed;
    shed.evict = plan.steps[0].evict;
    Apply(shed, out);
  }
}

void MemoryManager::PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out) {
  std::vector<PredictedRegion> regions;
  for (const ByteRange& r : ranges) regions.push_back({r, AccessMode::kRead});
  Access(regions, latest_, /*launch=*/false, out);
  // Loading is not using: the next working set counts what launches touch.
  working_set_.clear();
  in_working_set_.clear();
}

void MemoryManager::PlanEvictAll(MemoryActions* out) {
  out->evict_bytes += resident_bytes_;
  for (auto& [base, a] : allocs_) {
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      Chunk& c = a.chunks[i];
      if (c.last_touch > completed_) out->evict_after = std::max(out->evict_after, c.last_touch);
      c.resident = 0;
    }
    out->evict.push_back({a.base, a.base + a.size});
  }
  resident_bytes_ = 0;
}

void MemoryManager::DropReadMostly(MemoryActions* out) {
  for (auto& [base, a] : allocs_) {
    if (!a.read_mostly) continue;
    a.read_mostly = false;
    a.reads_since_write = 0;
    out->read_mostly_off.push_back({a.base, a.base + a.size});
    out->evict.push_back({a.base, a.base + a.size});
  }
}

void MemoryManager::ForgetResidency() {
  for (auto& [base, a] : allocs_) {
    for (Chunk& c : a.chunks) c.resident = 0;
  }
  resident_bytes_ = 0;
}

void MemoryManager::Invalidate(const MemoryActions& actions) {
  auto set = [this](const std::vector<ByteRange>& ranges, bool resident) {
    for (const ByteRange& r : ranges) {
      ForEachChunk(r, [&](ChunkId id, Chunk& c, uint32_t units) {
        ChunkRef ref;
        Lookup(id, &ref);
        const uint32_t change = resident ? units & ~c.resident : units & c.resident;
        const uint64_t bytes = UnitBytes(*ref.alloc, ref.index, change);
        if (resident) {
          c.resident |= change;
          resident_bytes_ += bytes;
        } else {
          c.resident &= ~change;
          resident_bytes_ -= bytes;
        }
      });
    }
  };
  set(actions.load, false);   // a failed load left its data on the host
  set(actions.evict, true);   // a failed eviction left its data on the device
}

std::vector<ByteRange> MemoryManager::TakeWorkingSet() {
  std::vector<ByteRange> ranges;
  for (ChunkId id : working_set_) {
    ChunkRef ref;
    if (!Lookup(id, &ref)) continue;
    const uint64_t begin = ref.alloc->base + ref.index * kChunkSize;
    ranges.push_back({begin, std::min(ref.alloc->base + ref.alloc->size, begin + kChunkSize)});
  }
  working_set_.clear();
  in_working_set_.clear();
  return MergeWithinAllocations(ranges);
}

}  // namespace msched

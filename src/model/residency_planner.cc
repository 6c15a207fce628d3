#include "model/residency_planner.h"

#include <algorithm>
#include <tuple>
#include <unordered_set>

namespace msched {

void ResidencyPlanner::SetFuture(const std::vector<std::vector<ByteRange>>& steps) {
  future_.clear();
  future_bytes_.clear();
  for (const auto& ranges : steps) {
    AccessStep step;
    std::unordered_map<ChunkId, uint32_t> units;
    for (const ByteRange& r : ranges) {
      table_.ForEachChunk(r, [&](ChunkId id, ChunkState&, uint32_t u) {
        if (!units.count(id)) step.push_back(id);
        units[id] |= u;
      });
    }
    for (const auto& [id, u] : units) {
      ChunkTable::ChunkRef ref;
      table_.Lookup(id, &ref);
      future_bytes_[id] = std::max(future_bytes_[id], ChunkTable::UnitBytes(*ref.alloc, ref.index, u));
    }
    future_.push_back(std::move(step));
  }
}

std::vector<ChunkId> ResidencyPlanner::VictimOrder() const {
  // Sort key: (0, copies, last touch) for chunks with no predicted next
  // use, then (1, -priced next use), so that ascending order puts the best
  // victims first. While copies back are priced (set_drop_preference),
  // `copies` is 0 for a chunk that drops free (Drops): among chunks with no
  // known future, those go first; and a priced next use is the predicted
  // one, but as far again as the preference times the distance for a chunk
  // that drops free: dropping it now and loading it back later costs less
  // than copying out one needed somewhat later.
  std::vector<std::tuple<int, uint64_t, uint64_t, ChunkId>> keyed;
  const uint64_t loop = predictor_.loop_interval(), now = predictor_.latest();
  table_.ForEachAllocation([&](const Extent& a) {
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      const ChunkState& c = a.chunks[i];
      if (!c.resident) continue;
      const bool lru = policy_ == EvictionPolicy::kLru;
      const uint64_t next = lru ? 0 : predictor_.NextUse(c.history, loop);
      const bool drops = drop_preference_ > 1 && !lru && Drops(c);
      if (next == 0) {
        keyed.emplace_back(0, drops ? 0 : 1, c.last_touch, ChunkTable::IdOf(a, i));
        continue;
      }
      uint64_t priced = next;
      if (drops && next > now) priced = now + std::min(next - now, kFar) * drop_preference_;
      keyed.emplace_back(1, UINT64_MAX - priced, 0, ChunkTable::IdOf(a, i));
    }
  });
  std::sort(keyed.begin(), keyed.end());
  std::vector<ChunkId> out;
  out.reserve(keyed.size());
  for (const auto& [group, key, recency, id] : keyed) out.push_back(id);
  return out;
}

PlannerInput ResidencyPlanner::Input(uint64_t capacity, const AccessStep& now) const {
  PlannerInput in;
  in.capacity = capacity;
  in.resident = VictimOrder();
  for (ChunkId id : in.resident) {
    ChunkTable::ChunkRef ref;
    table_.Lookup(id, &ref);
    in.size[id] = ChunkTable::UnitBytes(*ref.alloc, ref.index, ref.chunk().resident);
  }
  in.future.reserve(1 + future_.size());
  in.future.push_back(now);
  in.future.insert(in.future.end(), future_.begin(), future_.end());
  return in;
}

Plan ResidencyPlanner::Planned(const PlannerInput& in) const {
  return policy_ == EvictionPolicy::kLru ? PlanLru(in) : PlanOpt(in);
}

bool ResidencyPlanner::PlanDemand(bool missing, Granularity granularity, MemoryActions* out) {
  if (!NeedsPlan(missing)) return false;
  if (missing && granularity == Granularity::kWholeChunks) WidenToWholeChunks();
  PlannerInput in = Input(budget_, need_);
  for (ChunkId id : need_) {
    ChunkTable::ChunkRef ref;
    table_.Lookup(id, &ref);
    in.size[id] = ChunkTable::UnitBytes(*ref.alloc, ref.index, ref.chunk().resident | ref.chunk().need);
  }
  for (const auto& [id, bytes] : future_bytes_) in.size.emplace(id, bytes);
  const Plan plan = Planned(in);
  Apply(plan.steps.empty() ? StepPlan{} : plan.steps[0], out);
  return true;
}

void ResidencyPlanner::WidenToWholeChunks() {
  // What each widening adds to the resident bytes: the chunks lacking units,
  // whole; then the rest of the untouched allocations among them.
  uint64_t chunks = table_.resident_bytes(), fresh = 0;
  std::vector<Extent*> untouched;
  for (ChunkId id : need_) {
    ChunkTable::ChunkRef ref;
    if (!table_.Lookup(id, &ref) || (ref.chunk().need & ~ref.chunk().resident) == 0) continue;
    chunks += ChunkTable::UnitBytes(*ref.alloc, ref.index,
                                    ChunkTable::AllUnits(*ref.alloc, ref.index) & ~ref.chunk().resident);
    if (!ref.alloc->touched && ref.alloc->size <= kMaxWholeAllocation &&
        std::find(untouched.begin(), untouched.end(), ref.alloc) == untouched.end()) {
      untouched.push_back(ref.alloc);
      for (size_t i = 0; i < ref.alloc->chunks.size(); ++i) {
        if (ref.alloc->chunks[i].epoch != epoch_) {
          fresh += ChunkTable::UnitBytes(*ref.alloc, i, ChunkTable::AllUnits(*ref.alloc, i));
        }
      }
    }
  }
  if (chunks > budget_) return;
  for (ChunkId id : need_) {
    ChunkTable::ChunkRef ref;
    if (table_.Lookup(id, &ref) && (ref.chunk().need & ~ref.chunk().resident) != 0) {
      ref.chunk().need |= ChunkTable::AllUnits(*ref.alloc, ref.index);
    }
  }
  if (chunks + fresh > budget_) return;
  for (Extent* a : untouched) {
    for (size_t i = 0; i < a->chunks.size(); ++i) {
      ChunkState& c = a->chunks[i];
      if (c.epoch == epoch_) continue;  // needed already, and widened above
      c.epoch = epoch_;
      c.need = ChunkTable::AllUnits(*a, i);
      need_.push_back(ChunkTable::IdOf(*a, i));
    }
  }
}

void ResidencyPlanner::Apply(const StepPlan& step, MemoryActions* out) {
  std::vector<ByteRange> evict, load;
  for (ChunkId id : step.evict) {
    ChunkTable::ChunkRef ref;
    if (!table_.Lookup(id, &ref) || ref.chunk().resident == 0) continue;
    const ChunkState& c = ref.chunk();
    if (c.last_touch > completed_) out->evict_after = std::max(out->evict_after, c.last_touch);
    ChunkTable::UnitRanges(*ref.alloc, ref.index, c.resident, &evict);
    ref.chunk().host_copy |= c.resident;  // copied back, or a duplicate dropped
    out->evict_bytes += table_.MarkEvicted(ref, c.resident);
  }
  std::unordered_set<ChunkId> unserved(step.unserved.begin(), step.unserved.end());
  // Every chunk the demand needs and the plan keeps gets its missing units,
  // in access order (the plan lists only chunks that were not resident at
  // all).
  for (ChunkId id : need_) {
    ChunkTable::ChunkRef ref;
    if (!table_.Lookup(id, &ref)) continue;
    ChunkState& c = ref.chunk();
    ref.alloc->touched = true;
    const uint32_t missing = c.need & ~c.resident;
    if (missing == 0) continue;
    // The driver moves what it loads (or faults in), unless the chunk is
    // advised read-mostly (advice goes before loads): then it duplicates.
    if (!c.advised) c.host_copy &= ~missing;
    // Loaded or not, the launch brings what it touches to the device: left
    // out, it faults in (over the budget until the next plan sheds it).
    const uint64_t bytes = table_.MarkResident(ref, missing);
    if (unserved.count(id)) {
      out->unserved_bytes += bytes;
      continue;
    }
    out->load_bytes += bytes;
    ChunkTable::UnitRanges(*ref.alloc, ref.index, missing, &load);
  }
  std::sort(evict.begin(), evict.end(), [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  for (const ByteRange& r : table_.MergeWithinAllocations(evict)) out->evict.push_back(r);
  for (const ByteRange& r : table_.MergeWithinAllocations(load)) out->load.push_back(r);
}

void ResidencyPlanner::PlanEviction(uint64_t bytes, MemoryActions* out) {
  const uint64_t resident = table_.resident_bytes();
  // An empty first step: nothing is needed now, so nothing is kept back;
  // the future only orders the victims (needed last goes first).
  const Plan plan = Planned(Input(bytes >= resident ? 0 : resident - bytes, AccessStep{}));
  need_.clear();  // nothing to load
  if (!plan.steps.empty()) {
    StepPlan shed;
    shed.evict = plan.steps[0].evict;
    Apply(shed, out);
  }
}

void ResidencyPlanner::PlanEvictAll(MemoryActions* out) {
  out->evict_bytes += table_.resident_bytes();
  table_.ForEachAllocation([&](Extent& a) {
    for (ChunkState& c : a.chunks) {
      if (c.last_touch > completed_) out->evict_after = std::max(out->evict_after, c.last_touch);
      c.host_copy |= c.resident;
    }
    out->evict.push_back(a.range());
  });
  table_.ForgetResidency();
}

}  // namespace msched

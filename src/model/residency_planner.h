// ResidencyPlanner: decides, within a byte budget, what of the chunk table
// to evict and what to load so that what an operation needs now (its
// demand) is resident, and applies the decision to the table's residency.
// Victims go by furthest next use over the future it knows (the demand,
// then the steps the coordinator's timeline gave: SetFuture), chunks that
// future does not mention by NextUsePredictor's prediction, priced so that
// chunks that drop free (read duplicates) go before those that cost a copy
// back, and chunks with no prediction first, least recently used first
// (the placement planner, PlanOpt, does the choosing). Eviction takes whole chunks; loads take the
// units the demand lacks, widened to whole chunks while the budget has room.
// Externally synchronized (the memory manager's). Used by the memory
// manager (model/).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/address_range.h"
#include "model/chunk_table.h"
#include "model/memory_actions.h"
#include "model/next_use.h"
#include "model/placement_planner.h"
#include "msched/config.h"

namespace msched {

class ResidencyPlanner {
 public:
  // What a demand's loads bring in (MemoryManager::PlanAccess says why).
  // kWholeChunks: while the budget has room for them all, each chunk the
  // demand lacks anything of comes in whole (within its allocation), and an
  // allocation of at most kMaxWholeAllocation that no plan has touched
  // comes in whole while there is room for that too. Without room, and
  // with kPredicted, exactly the demanded units.
  static constexpr uint64_t kMaxWholeAllocation = 256ull << 20;
  enum class Granularity : uint8_t { kWholeChunks, kPredicted };

  // REQUIRES: `table` and `predictor` outlive the planner.
  ResidencyPlanner(ChunkTable* table, const NextUsePredictor* predictor, uint64_t budget_bytes)
      : table_(*table), predictor_(*predictor), budget_(budget_bytes) {}
  ResidencyPlanner(const ResidencyPlanner&) = delete;
  ResidencyPlanner& operator=(const ResidencyPlanner&) = delete;

  void set_budget(uint64_t bytes) { budget_ = bytes; }
  uint64_t budget() const { return budget_; }
  // kLru (an ablation, MSCHED_EVICTION=lru) evicts the least recently used
  // chunk and ignores the future.
  void set_eviction_policy(EvictionPolicy p) { policy_ = p; }
  // Every launch numbered <= seq has completed: evicting what only they
  // used waits for nothing.
  void MarkCompleted(uint64_t seq) { completed_ = std::max(completed_, seq); }

  // The future beyond the current demand, nearest first (the working sets of
  // the job's next slices, from the coordinator's timeline).
  void SetFuture(const std::vector<std::vector<ByteRange>>& steps);

  // A demand: what one call (a launch, a copy, a load) needs, chunk by
  // chunk in access order. BeginDemand starts an empty one; Need adds
  // `units` of chunk `id` (`c`, from the table) to it and says whether this
  // is the first time the call names the chunk.
  void BeginDemand() {
    ++epoch_;
    need_.clear();
  }
  bool Need(ChunkId id, ChunkState& c, uint32_t units) {
    const bool first = c.epoch != epoch_;
    if (first) {
      c.epoch = epoch_;
      c.need = 0;
      need_.push_back(id);
    }
    c.need |= units;
    return first;
  }
  // Plans the demand, given whether it lacks any unit (`missing`): evicts
  // to make room and loads what it lacks, or, when nothing is missing but
  // the table holds more than the budget (what launches faulted in), only
  // evicts the excess; never evicts a chunk of the demand. A demand that
  // alone exceeds the budget gets the chunks that fit in access order, and
  // the rest counts as resident and unserved (it will fault in). Fills
  // `out` and records the new residency; false, with `out` untouched, on
  // the common path (nothing missing, within the budget).
  bool PlanDemand(bool missing, Granularity granularity, MemoryActions* out);
  // Whether a demand that lacks units or not (`missing`) needs a plan:
  // PlanDemand does nothing otherwise.
  bool NeedsPlan(bool missing) const { return missing || table_.resident_bytes() > budget_; }

  // Plans evicting `bytes` of resident memory (all of it when bytes is
  // UINT64_MAX), choosing what is needed last; records it as evicted.
  void PlanEviction(uint64_t bytes, MemoryActions* out);
  // Plans evicting every allocation whole, resident as far as the table
  // knows or not (MemoryManager::PlanEvictAll says why). Records nothing as
  // resident.
  void PlanEvictAll(MemoryActions* out);

  // Resident chunks, best victim first: those with no predicted next use
  // (those that drop free first, then least recently touched first), then
  // by furthest predicted next use, priced (VictimOrder's comment says
  // how); under kLru, least recently touched first.
  std::vector<ChunkId> VictimOrder() const;

  // How much further ahead a chunk that drops free counts as needed, for
  // the victim order, where copies back cost the program (JobMemory says
  // when): copying a chunk out costs 4-10 times loading it on the links
  // measured (an H200 loads at 49 GB/s and copies what the GPU wrote back at
  // 4.9-11.9: docs/simulator.md), and a duplicate drops for almost nothing.
  // 1 (the default) prices nothing: victims go by next use alone. Distances
  // are capped at kFar launches first.
  static constexpr uint64_t kDropPreference = 4;
  void set_drop_preference(uint64_t p) { drop_preference_ = std::max<uint64_t>(p, 1); }
  uint64_t drop_preference() const { return drop_preference_; }
  static constexpr uint64_t kFar = uint64_t{1} << 32;
  // Whether evicting `c` would drop duplicates and copy nothing back: it is
  // advised read-mostly and every resident unit has a host copy.
  static bool Drops(const ChunkState& c) { return c.advised && (c.resident & ~c.host_copy) == 0; }

 private:
  // Granularity::kWholeChunks: widens the demand's chunks that lack units to
  // whole chunks, and adds the other chunks of allocations no plan has
  // touched yet, as far as the budget holds them all.
  void WidenToWholeChunks();
  // The placement planner's input: `capacity`, the resident chunks in
  // victim order with what they hold, and the step `now`, then the future.
  PlannerInput Input(uint64_t capacity, const AccessStep& now) const;
  Plan Planned(const PlannerInput& in) const;
  // Applies a plan's first step to the residency (evicting its victims,
  // then loading what the demand lacks, unless unserved) and fills `out`.
  void Apply(const StepPlan& step, MemoryActions* out);

  ChunkTable& table_;
  const NextUsePredictor& predictor_;
  uint64_t budget_;
  EvictionPolicy policy_ = EvictionPolicy::kOpt;
  uint64_t drop_preference_ = 1;
  uint64_t completed_ = 0;
  uint64_t epoch_ = 0;
  AccessStep need_;  // the demand; kept to avoid allocating per launch
  std::vector<AccessStep> future_;
  std::unordered_map<ChunkId, uint64_t> future_bytes_;  // what future steps need of each chunk
};

}  // namespace msched

// MemoryManager: one process's view of which parts of its managed
// allocations are resident in HBM, kept within a byte budget, and what to
// move for each launch (or copy, or time slice) so that its predicted
// working set is resident. It composes four pieces, each with its own
// header and tests:
//  - ChunkTable (chunk_table.h): the job's allocation map, whose managed
//    entries hold their memory in 2 MiB chunks of 64 KiB units (the
//    driver's fault unit), what is resident of each, and each chunk's and
//    allocation's state for the pieces below;
//  - NextUsePredictor (next_use.h): when a chunk is needed next, from its
//    own reuse interval or the job's loop;
//  - ReadMostlyAdvisor (read_mostly.h): which chunks to advise
//    read-mostly, and when to take the advice back;
//  - ResidencyPlanner (residency_planner.h): what to evict (by furthest
//    next use over the future it knows: the launch itself, then any
//    timeline the coordinator gave, then the predictions) and what to load.
// This class walks each launch's chunks once on the common path (again when
// a plan needs the demand listed), feeding all four, and keeps the working
// set of the current slice.
// Residency is an estimate: what a launch's regions touch counts as resident
// from that launch on, loaded or left to fault; memory that kernels touch
// beyond their predicted regions is not seen, and memory the driver evicts
// on its own is still counted until the manager evicts it.
// Externally synchronized. Used by JobMemory (and through it the hook).
#pragma once

#include <cstdint>
#include <vector>

#include "model/address_range.h"
#include "model/chunk_table.h"
#include "model/memory_actions.h"
#include "model/next_use.h"
#include "model/read_mostly.h"
#include "model/residency_planner.h"
#include "model/template_eval.h"
#include "msched/config.h"

namespace msched {

class MemoryManager {
 public:
  explicit MemoryManager(uint64_t budget_bytes) : planner_(&table_, &predictor_, budget_bytes) {}
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  void set_budget(uint64_t bytes) { planner_.set_budget(bytes); }
  // kLru (an ablation, MSCHED_EVICTION=lru) evicts the least recently used
  // chunk and ignores the future.
  void set_eviction_policy(EvictionPolicy p) { planner_.set_eviction_policy(p); }
  uint64_t budget() const { return planner_.budget(); }
  // Victims priced by what evicting them copies back
  // (ResidencyPlanner::set_drop_preference).
  void set_drop_preference(uint64_t p) { planner_.set_drop_preference(p); }
  uint64_t drop_preference() const { return planner_.drop_preference(); }

  // Allocations and the managed pool's chunks come and go, in the one map
  // (ChunkTable::Add, Remove, RemovePoolChunk); the managed ones are cut
  // into chunks. Forgetting one forgets its chunks.
  Status AddAllocation(uint64_t base, uint64_t size, AllocKind kind = AllocKind::kManaged) {
    return table_.Add(base, size, kind);
  }
  Result<Allocation> RemoveAllocation(uint64_t base) { return table_.Remove(base); }
  Status RemovePoolChunk(uint64_t base) { return table_.RemovePoolChunk(base); }
  const AllocationMap& allocations() const { return table_.allocations(); }

  // What a launch's loads bring in. kWholeChunks: while the budget has room
  // for them all, each chunk the launch lacks anything of comes in whole
  // (within its allocation), so that what a kernel touches beside its
  // predicted regions in that chunk (a page below its pointer, past a
  // rounded extent) does not fault; it is what the driver's own prefetch
  // within a 2 MiB block would bring in at the first fault. An allocation
  // of at most kMaxWholeAllocation that the launch is the first to touch
  // comes in whole while there is room for that too: one call instead of
  // one per launch that touches more of it (a caching allocator's segment
  // holds many tensors). A larger one (an arena preallocated whole) does
  // not: what it never uses would cross the link at every switch. Without
  // room, and with kPredicted, exactly the predicted units.
  static constexpr uint64_t kMaxWholeAllocation = ResidencyPlanner::kMaxWholeAllocation;
  using Granularity = ResidencyPlanner::Granularity;
  // A launch numbered `seq` (increasing) needs `regions`. Fills `out` with
  // the evictions and loads that make them resident within the budget, and
  // records the new residency. Ranges outside managed allocations are
  // ignored. Leaves `out` empty on the common path (all resident).
  void PlanAccess(const std::vector<PredictedRegion>& regions, uint64_t seq, MemoryActions* out,
                  Granularity granularity = Granularity::kWholeChunks) {
    Access(regions, seq, /*launch=*/true, out, granularity);
  }
  // Every launch numbered <= seq has completed.
  void MarkCompleted(uint64_t seq) { planner_.MarkCompleted(seq); }

  // The future beyond the current launch, nearest first (from the
  // coordinator's timeline: the working sets of this job's next slices).
  void SetFuture(std::vector<std::vector<ByteRange>> steps) { planner_.SetFuture(steps); }

  // Plans evicting `bytes` of resident memory (all of it when bytes is
  // UINT64_MAX), choosing what is needed last; records it as evicted.
  void PlanEviction(uint64_t bytes, MemoryActions* out) { planner_.PlanEviction(bytes, out); }
  // Plans loading `ranges` (a working set, in access order) as far as the
  // budget allows, evicting what is needed later; records it as resident.
  // Loading does not count as use in the next TakeWorkingSet.
  void PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out);
  // Plans evicting every managed allocation whole, resident as far as the
  // manager knows or not: memory that kernels faulted in beyond what was
  // predicted is the job's too, and a prefetch of pages with nothing
  // resident costs only the call. Records nothing as resident.
  void PlanEvictAll(MemoryActions* out) { planner_.PlanEvictAll(out); }
  // Takes read-mostly advice off every chunk that has it and plans evicting
  // them again: a driver keeps a device duplicate when asked to move
  // read-mostly memory to the host, and collapses the copies, to either
  // side, when the advice goes. The advice is given again once the chunk
  // qualifies anew.
  void DropReadMostly(MemoryActions* out) { TakeAllReadMostlyOff(/*evict=*/true, out); }
  // Everything may have been evicted behind the manager's back (other jobs
  // ran): treat nothing as resident, without moving anything.
  void ForgetResidency() { table_.ForgetResidency(); }
  // Takes read-mostly advice off every chunk (listed in `out`) and
  // never gives it again: a launch msched cannot predict may write anywhere,
  // and a GPU write to duplicated data collapses it fault by fault (64 MiB
  // takes 1.66 s on an H100, against 12 ms once the advice is off:
  // docs/real-gpu.md).
  void ForgoReadMostly(MemoryActions* out);
  // The transfers of `actions` failed: forget what they claimed.
  void Invalidate(const MemoryActions& actions);

  // Chunks used since the last call, in first-use order, as merged ranges:
  // the working set of the slice that just ended.
  std::vector<ByteRange> TakeWorkingSet();

  uint64_t resident_bytes() const { return table_.resident_bytes(); }
  uint64_t managed_bytes() const { return table_.managed_bytes(); }

 private:
  // PlanAccess, and PlanLoad's loads (launch=false: a load is no launch of
  // the program's, so it neither votes on the loop nor counts as a use).
  void Access(const std::vector<PredictedRegion>& regions, uint64_t seq, bool launch, MemoryActions* out,
              Granularity granularity = Granularity::kPredicted);
  // Advises every chunk that launch `seq` did not write of each allocation
  // of `regions` that qualifies whole (ReadMostlyAdvisor::AllocationQualifies).
  void AdviseWholeAllocations(const std::vector<PredictedRegion>& regions, uint64_t seq, MemoryActions* out);
  // Appends chunk `id`'s range to `ranges` (ChunkTable::AppendChunkRange).
  void ListChunk(ChunkId id, std::vector<ByteRange>* ranges);
  // Takes the advice off every chunk that has it (listed in
  // out->read_mostly_off), and lists them in out->evict as well if `evict`.
  void TakeAllReadMostlyOff(bool evict, MemoryActions* out);

  // Declared before the planner, which refers to them.
  ChunkTable table_;  // also the job's allocation map
  NextUsePredictor predictor_;
  ReadMostlyAdvisor advisor_;
  ResidencyPlanner planner_;
  // The chunks launches used since the last TakeWorkingSet, in first-use
  // order; a chunk is listed when its ChunkState::working_set is not yet
  // `working_set_generation_` (generations start at 1: a new chunk's 0 is
  // never current).
  std::vector<ChunkId> working_set_;
  uint64_t working_set_generation_ = 1;
};

}  // namespace msched

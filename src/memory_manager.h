// MemoryManager: one process's view of which 2 MiB chunks of its managed
// allocations are resident in HBM, kept within a byte budget. For each
// launch (or copy, or time slice) it decides what to evict and what to load
// so the predicted working set is resident, by Belady's OPT over the future
// it knows (the launch itself, then any timeline the coordinator gave it),
// and by least-recent use among chunks the future does not mention.
// Residency is an estimate: memory faulted in by unpredicted kernels or
// evicted by the driver on its own is not seen.
// Externally synchronized. Used by the hook and the coordinator client.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_set>
#include <vector>

#include "address_range.h"
#include "placement_planner.h"
#include "template_eval.h"

namespace msched {

// What to do before a launch runs, in order: evictions, then loads.
struct MemoryActions {
  std::vector<ByteRange> evict;  // to host, merged, clipped to allocations
  std::vector<ByteRange> load;   // to device, in access order
  // A victim was last used by a launch that may still be queued: the
  // evictions must be ordered after the launch stream's queued work.
  bool evict_after_queue = false;
  uint64_t evict_bytes = 0;
  uint64_t load_bytes = 0;
  uint64_t unserved_bytes = 0;  // predicted but left to fault: over budget alone
  bool empty() const { return evict.empty() && load.empty(); }
};

class MemoryManager {
 public:
  explicit MemoryManager(uint64_t budget_bytes) : budget_(budget_bytes) {}
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  void set_budget(uint64_t bytes) { budget_ = bytes; }
  uint64_t budget() const { return budget_; }

  // Managed allocations come and go. Freeing forgets their chunks.
  void AddAllocation(uint64_t base, uint64_t size);
  void RemoveAllocation(uint64_t base);

  // A launch numbered `seq` (increasing) needs `regions`. Fills `out` with
  // the evictions and loads that make them resident within the budget, and
  // records the new residency. Ranges outside managed allocations are
  // ignored. Leaves `out` empty on the common path (all resident).
  void PlanAccess(const std::vector<PredictedRegion>& regions, uint64_t seq, MemoryActions* out);
  // Every launch numbered <= seq has completed.
  void MarkCompleted(uint64_t seq) { completed_ = std::max(completed_, seq); }

  // The future beyond the current launch, nearest first (from the
  // coordinator's timeline: the working sets of this job's next slices).
  void SetFuture(std::vector<std::vector<ByteRange>> steps);

  // Plans evicting `bytes` of resident memory (all of it when bytes is
  // UINT64_MAX), choosing what is needed last; records it as evicted.
  void PlanEviction(uint64_t bytes, MemoryActions* out);
  // Plans loading `ranges` (a working set, in access order) as far as the
  // budget allows, evicting what is needed later; records it as resident.
  void PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out);
  // The transfers of `actions` failed: forget what they claimed.
  void Invalidate(const MemoryActions& actions);

  // Chunks used since the last call, in first-use order, as merged ranges:
  // the working set of the slice that just ended.
  std::vector<ByteRange> TakeWorkingSet();

  uint64_t resident_bytes() const { return resident_bytes_; }
  uint64_t managed_bytes() const;

 private:
  struct Chunk {
    bool resident = false;
    uint64_t last_use = 0;  // sequence number of the last launch that used it
    uint64_t epoch = 0;     // the PlanAccess call that last counted it (dedup)
  };
  // Chunks are counted from each allocation's own base (allocations need
  // not be 2 MiB-aligned, and small ones may share a 2 MiB block).
  struct Alloc {
    uint64_t base;
    uint64_t size;
    uint64_t serial;            // names the allocation in chunk ids
    std::vector<Chunk> chunks;  // chunk i covers [base + i*2MiB, ...) clipped to size
  };
  static constexpr int kChunkIndexBits = 24;  // 32 TiB per allocation
  ChunkId IdOf(const Alloc& a, size_t i) const { return (a.serial << kChunkIndexBits) | i; }
  Alloc* Find(uint64_t addr);
  Chunk* ChunkAt(ChunkId id, ByteRange* range);
  // The ids of the chunks `r` overlaps, in address order.
  void ChunksIn(const ByteRange& r, AccessStep* out);
  uint64_t ChunkBytes(const Alloc& a, size_t i) const;
  // Applies a plan's first step to the residency and fills `out`.
  void Apply(const StepPlan& step, MemoryActions* out);
  std::vector<ChunkId> ResidentByRecency() const;

  uint64_t budget_;
  uint64_t resident_bytes_ = 0;
  uint64_t completed_ = 0;
  uint64_t latest_ = 0;
  uint64_t epoch_ = 0;
  std::map<uint64_t, Alloc> allocs_;          // by base
  std::map<uint64_t, uint64_t> base_of_serial_;
  uint64_t next_serial_ = 1;
  std::vector<AccessStep> future_;
  AccessStep touched_;  // scratch for PlanAccess, kept to avoid allocating per launch
  AccessStep need_;
  std::vector<ChunkId> working_set_;
  std::unordered_set<ChunkId> in_working_set_;
};

// Merges chunk ranges that touch into fewer, larger ranges (order kept for
// non-touching ones).
std::vector<ByteRange> MergeAdjacent(const std::vector<ByteRange>& ranges);

}  // namespace msched

// MemoryManager: one process's view of which parts of its managed
// allocations are resident in HBM, kept within a byte budget. Residency is
// tracked in 64 KiB units (the driver's fault unit) within 2 MiB chunks: a
// launch loads the chunks its predicted ranges touch whole while the budget
// has room for them, else exactly the units they touch; eviction takes whole
// chunks. For each launch (or copy, or time slice) it decides
// what to evict and what to load so the predicted working set is resident,
// by furthest next use over the future it knows (the launch itself, then
// any timeline the coordinator gave it). For chunks that future does not
// mention, the next use is predicted from the chunk's last reuse interval
// (training and decode loops repeat: a layer's weights come back one
// iteration later), or, once the job is seen to repeat its launches every
// P launches (a training step, a decoded token), from the chunk's own uses
// in the last P launches, each coming back P launches later: that is the
// exact future of a program that loops exactly (the chunk's own interval
// still serves when the loop misses the chunk's uses, or a use within the
// loop fell out of its history). Chunks with no prediction go first, least
// recently used first.
// Residency is an estimate: what a launch's regions touch counts as resident
// from that launch on, loaded or left to fault; memory that kernels touch
// beyond their predicted regions is not seen, and memory the driver evicts
// on its own is still counted until the manager evicts it.
// Externally synchronized. Used by the hook and the coordinator client.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/address_range.h"
#include "msched/config.h"
#include "model/placement_planner.h"
#include "model/template_eval.h"

namespace msched {

// What to do before a launch runs, in order: evictions, then loads.
struct MemoryActions {
  std::vector<ByteRange> evict;  // to host, merged, clipped to allocations
  std::vector<ByteRange> load;   // to device, in access order
  // The operation (launch or copy) these actions prepare, queued right
  // after them; 0 for moves outside one (a time slice's).
  uint64_t op = 0;
  // The latest operation that used a victim and may not have run yet (0:
  // none): the evictions wait for it on the launch stream, and for nothing
  // queued after it.
  uint64_t evict_after = 0;
  uint64_t evict_bytes = 0;
  uint64_t load_bytes = 0;
  uint64_t unserved_bytes = 0;  // predicted but left to fault: over budget alone (counted resident)
  // Allocations to advise read-mostly (read by several launches since they
  // were last written) or no longer (about to be written): applied first.
  std::vector<ByteRange> read_mostly_on, read_mostly_off;
  bool empty() const {
    return evict.empty() && load.empty() && read_mostly_on.empty() && read_mostly_off.empty();
  }
};

class MemoryManager {
 public:
  explicit MemoryManager(uint64_t budget_bytes) : budget_(budget_bytes) {}
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  void set_budget(uint64_t bytes) { budget_ = bytes; }
  // kLru (an ablation, MSCHED_EVICTION=lru) evicts the least recently used
  // chunk and ignores the future.
  void set_eviction_policy(EvictionPolicy p) { policy_ = p; }
  uint64_t budget() const { return budget_; }

  // Managed allocations come and go. Freeing forgets their chunks.
  void AddAllocation(uint64_t base, uint64_t size);
  void RemoveAllocation(uint64_t base);

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
  static constexpr uint64_t kMaxWholeAllocation = 256ull << 20;
  enum class Granularity : uint8_t { kWholeChunks, kPredicted };
  // A launch numbered `seq` (increasing) needs `regions`. Fills `out` with
  // the evictions and loads that make them resident within the budget, and
  // records the new residency. Ranges outside managed allocations are
  // ignored. Leaves `out` empty on the common path (all resident).
  void PlanAccess(const std::vector<PredictedRegion>& regions, uint64_t seq, MemoryActions* out,
                  Granularity granularity = Granularity::kWholeChunks) {
    Access(regions, seq, /*launch=*/true, out, granularity);
  }
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
  // Loading does not count as use in the next TakeWorkingSet.
  void PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out);
  // Plans evicting every managed allocation whole, resident as far as the
  // manager knows or not: memory that kernels faulted in beyond what was
  // predicted is the job's too, and a prefetch of pages with nothing
  // resident costs only the call. Records nothing as resident.
  void PlanEvictAll(MemoryActions* out);
  // Takes read-mostly advice off every allocation that has it and plans
  // evicting them again: a driver keeps a device duplicate when asked to
  // move read-mostly memory to the host, and collapses the copies, to
  // either side, when the advice goes. The advice is given again once the
  // allocation qualifies anew.
  void DropReadMostly(MemoryActions* out);
  // Everything may have been evicted behind the manager's back (other jobs
  // ran): treat nothing as resident, without moving anything.
  void ForgetResidency();
  // Takes read-mostly advice off every allocation (listed in `out`) and
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

  uint64_t resident_bytes() const { return resident_bytes_; }
  uint64_t managed_bytes() const;

 private:
  static constexpr uint64_t kUnit = kBigPageSize;                 // 64 KiB
  static constexpr uint32_t kUnitsPerChunk = kChunkSize / kBigPageSize;  // 32
  struct Chunk {
    uint32_t resident = 0;  // mask of resident units
    uint32_t need = 0;      // scratch: units the current call needs
    // Sequence numbers of the launches that last used it, newest first
    // (0: none), and the use that fell out of that history.
    std::array<uint64_t, 4> uses{};
    uint64_t forgotten_use = 0;
    // The last launch that used it or, if later, the launch current when
    // it was loaded for a slice: its recency, for least-recently-used order
    // and for ordering its eviction after queued kernels. (A load is no use:
    // it leaves `uses`, from which next uses are predicted, alone.)
    uint64_t last_touch = 0;
    uint64_t epoch = 0;  // the call that last counted it (dedup)
    uint64_t last_use() const { return uses[0]; }
    uint64_t prev_use() const { return uses[1]; }
  };
  // Chunks are counted from each allocation's own base (allocations need
  // not be 2 MiB-aligned, and small ones may share a 2 MiB block).
  struct Alloc {
    uint64_t base;
    uint64_t size;
    uint64_t serial;            // names the allocation in chunk ids
    std::vector<Chunk> chunks;  // chunk i covers [base + i*2MiB, ...) clipped to size
    uint32_t reads_since_write = 0;  // launches that read it since one last wrote it
    bool read_mostly = false;        // advised so
    // Some plan has brought part of it in: until then nothing of it was
    // ever on the device, nor (but for host writes) holds data, so moving
    // it in whole costs only the call.
    bool touched = false;
  };
  // Launches that must read an allocation, with no write between, before it
  // is advised read-mostly: weights (written once, then read every step)
  // qualify; buffers written and read in turn do not, so advice seldom
  // flips (each flip back collapses the duplicates).
  static constexpr uint32_t kReadsBeforeReadMostly = 4;
  bool read_mostly_allowed_ = true;  // until ForgoReadMostly
  // The job's loop length in launches, when its last kLoopVotes repeats
  // agreed on it; 0 when they did not. A repeat is a launch that accesses
  // the same 64 KiB units of the same allocations, in the same modes, as an
  // earlier launch (same signature: named by allocation and place, never by
  // address, so that runs number alike), and votes for the distance between
  // them. A decode loop agrees from its second token
  // on, a training loop from its second step; a first pass votes for
  // nothing (training's backward reads what forward wrote, but with other
  // ranges), so it keeps least-recently-used order, right for the reverse
  // sweep that follows. Launches whose ranges repeat within an iteration
  // (a buffer reused by every layer) disagree with the others, and the
  // loop is then unknown: the chunk's own reuse interval predicts instead.
  // Two such repeats in a row with no other vote between do set a loop that
  // is too short; a chunk it leaves without a use in its window then falls
  // back to its own interval rather than to least-recently-used order.
  static constexpr uint32_t kLoopVotes = 2;
  uint64_t loop_candidate_ = 0;
  uint32_t loop_votes_ = 0;
  uint64_t loop_interval() const { return loop_votes_ >= kLoopVotes ? loop_candidate_ : 0; }
  void NoteLaunch(uint64_t signature, uint64_t seq);
  // Recent launches by signature, direct-mapped (a collision only loses a
  // vote): what a repeat is measured against.
  struct SeenLaunch {
    uint64_t signature = 0;
    uint64_t seq = 0;
  };
  static constexpr size_t kSeenLaunches = 4096;  // a power of two
  std::vector<SeenLaunch> seen_launches_ = std::vector<SeenLaunch>(kSeenLaunches);
  // When `c` is needed next, by the rules in the class comment; 0 when
  // nothing predicts it.
  uint64_t PredictedNextUse(const Chunk& c, uint64_t loop) const;
  // PlanAccess, and PlanLoad's loads (launch=false: a load is no launch of
  // the program's, so it does not vote).
  void Access(const std::vector<PredictedRegion>& regions, uint64_t seq, bool launch, MemoryActions* out,
              Granularity granularity = Granularity::kPredicted);
  // Granularity::kWholeChunks: widens need_'s chunks that lack units to
  // whole chunks, and adds the other chunks of allocations no plan has
  // touched yet, as far as the budget holds them all.
  void WidenToWholeChunks();
  // Tracks which allocations launches only read, asking for advice changes in `out`.
  void NoteAccessModes(const std::vector<PredictedRegion>& regions, MemoryActions* out);
  // Merges chunk ranges that touch into fewer, larger ranges (order kept for
  // non-touching ones), never across an allocation's start: small managed
  // allocations lie next to each other, and one prefetch spanning two is
  // refused by the driver (CUDA_ERROR_INVALID_VALUE seen under PyTorch).
  std::vector<ByteRange> MergeWithinAllocations(const std::vector<ByteRange>& ranges) const;
  struct ChunkRef {
    Alloc* alloc;
    size_t index;
    Chunk& chunk() const { return alloc->chunks[index]; }
  };
  static constexpr int kChunkIndexBits = 24;  // 32 TiB per allocation
  ChunkId IdOf(const Alloc& a, size_t i) const { return (a.serial << kChunkIndexBits) | i; }
  Alloc* Find(uint64_t addr);
  bool Lookup(ChunkId id, ChunkRef* out);
  // Calls fn(id, chunk, unit mask) for each chunk `r` overlaps, in address order.
  template <typename Fn>
  void ForEachChunk(const ByteRange& r, Fn&& fn);
  // Bytes that `units` of chunk `i` of `a` hold (the last unit may be partial).
  uint64_t UnitBytes(const Alloc& a, size_t i, uint32_t units) const;
  // Every unit of chunk `i` that lies within its allocation.
  static uint32_t AllUnits(const Alloc& a, size_t i);
  // The address ranges of `units` of chunk `i` of `a`, appended.
  void UnitRanges(const Alloc& a, size_t i, uint32_t units, std::vector<ByteRange>* out) const;
  // Applies a plan's first step to the residency and fills `out`.
  void Apply(const StepPlan& step, MemoryActions* out);
  // Resident chunks, best victim first: those with no predicted next use
  // (least recently touched first), then by furthest predicted next use;
  // under LRU, least recently touched first.
  std::vector<ChunkId> ResidentVictimOrder() const;
  Plan Planned(const PlannerInput& in) const;

  uint64_t budget_;
  EvictionPolicy policy_ = EvictionPolicy::kOpt;
  uint64_t resident_bytes_ = 0;
  uint64_t completed_ = 0;
  uint64_t latest_ = 0;
  uint64_t epoch_ = 0;
  std::map<uint64_t, Alloc> allocs_;          // by base
  std::map<uint64_t, uint64_t> base_of_serial_;
  uint64_t next_serial_ = 1;
  std::vector<AccessStep> future_;
  std::unordered_map<ChunkId, uint64_t> future_bytes_;  // what future steps need of each chunk
  AccessStep need_;  // scratch for PlanAccess, kept to avoid allocating per launch
  std::vector<ChunkId> working_set_;
  std::unordered_set<ChunkId> in_working_set_;
};

}  // namespace msched

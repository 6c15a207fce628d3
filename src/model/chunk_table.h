// ChunkTable: the memory manager's table of the managed memory it may move
// (managed allocations and the managed pool's chunks), cut into 2 MiB
// chunks of 64 KiB units (the driver's fault unit), with what is resident of
// each and the bytes that makes. It is the one table the memory manager's
// pieces share: each chunk carries its use history (NextUsePredictor reads
// it) and each allocation its read-mostly standing (ReadMostlyAdvisor), so
// no piece keeps a map of allocations of its own. It is not the job's
// allocation map (AllocationMap, in JobMemory): that one holds every
// allocation the program sees, pool blocks and unmanaged memory included,
// and answers what a pointer points into; this one holds only what msched
// moves, pool chunks rather than their blocks, and JobMemory is the one
// place that changes both.
// Externally synchronized (the memory manager's). Used by the memory
// manager's pieces (model/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "model/address_range.h"
#include "model/next_use.h"
#include "model/placement_planner.h"
#include "model/read_mostly.h"

namespace msched {

// One 2 MiB chunk of a managed allocation.
struct ChunkState {
  uint32_t resident = 0;  // mask of resident units
  // Units the current call needs; valid while `epoch` is the call's (see
  // ResidencyPlanner::Need).
  uint32_t need = 0;
  UseHistory history;  // the launches that used it
  // The last launch that used it or, if later, the launch current when it
  // was loaded for a slice: its recency, for least-recently-used order and
  // for ordering its eviction after queued kernels. (A load is no use: it
  // leaves `history`, from which next uses are predicted, alone.)
  uint64_t last_touch = 0;
  uint64_t epoch = 0;  // the call that last counted it (dedup)
};

// A managed allocation (or pool chunk) in chunks, counted from its own base:
// allocations need not be 2 MiB-aligned, and small ones may share a 2 MiB
// block.
struct ChunkedAllocation {
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t serial = 0;             // names the allocation in chunk ids; never reused
  std::vector<ChunkState> chunks;  // chunk i covers [base + i*2MiB, ...) clipped to size
  ReadMostlyState read_mostly;
  // Some plan has brought part of it in: until then nothing of it was ever
  // on the device, nor (but for host writes) holds data, so moving it in
  // whole costs only the call.
  bool touched = false;

  ByteRange range() const { return {base, base + size}; }
};

// Invariants: allocations do not overlap (the caller's to keep: JobMemory
// records only what AllocationMap accepted, and pool chunks are disjoint
// from allocations); resident_bytes() is the sum over chunks of the bytes of
// their resident units, kept so by changing residency only through
// MarkResident, MarkEvicted, SetResidency and ForgetResidency.
class ChunkTable {
 public:
  static constexpr uint64_t kUnit = kBigPageSize;                        // 64 KiB
  static constexpr uint32_t kUnitsPerChunk = kChunkSize / kBigPageSize;  // 32
  static constexpr int kChunkIndexBits = 24;                             // 32 TiB per allocation

  ChunkTable() = default;
  ChunkTable(const ChunkTable&) = delete;
  ChunkTable& operator=(const ChunkTable&) = delete;

  // Adds [base, base + size), replacing an allocation at `base` (ignored
  // when empty, or too large for kChunkIndexBits). Removing forgets its
  // chunks and their residency.
  void Add(uint64_t base, uint64_t size);
  void Remove(uint64_t base);

  // The allocation containing `addr` (interior pointers included), or
  // nullptr. Valid until that allocation is removed.
  ChunkedAllocation* Find(uint64_t addr);

  // A chunk by allocation and index.
  struct ChunkRef {
    ChunkedAllocation* alloc;
    size_t index;
    ChunkState& chunk() const { return alloc->chunks[index]; }
  };
  // A chunk's id: its allocation's serial and its index, so that ids stay
  // apart across allocations and are never reused.
  static ChunkId IdOf(const ChunkedAllocation& a, size_t i) { return (a.serial << kChunkIndexBits) | i; }
  // The chunk named `id`; false once its allocation is gone.
  bool Lookup(ChunkId id, ChunkRef* out);
  // Calls fn(ChunkId, ChunkState&, uint32_t units) for each chunk `r` overlaps,
  // in address order, with the mask of the units it overlaps; parts of `r`
  // outside every allocation are skipped.
  template <typename Fn>
  void ForEachChunk(const ByteRange& r, Fn&& fn);
  // Calls fn(ChunkedAllocation&) for each allocation, in address order.
  template <typename Fn>
  void ForEachAllocation(Fn&& fn) {
    for (auto& [base, a] : allocs_) fn(a);
  }

  // Bytes that `units` of chunk `i` of `a` hold (the last unit may be partial).
  static uint64_t UnitBytes(const ChunkedAllocation& a, size_t i, uint32_t units);
  // Every unit of chunk `i` that lies within its allocation.
  static uint32_t AllUnits(const ChunkedAllocation& a, size_t i);
  // The address ranges of `units` of chunk `i` of `a`, appended, clipped to
  // the allocation.
  static void UnitRanges(const ChunkedAllocation& a, size_t i, uint32_t units, std::vector<ByteRange>* out);
  // Chunk `i` of `a` whole, clipped to the allocation.
  static ByteRange ChunkRange(const ChunkedAllocation& a, size_t i) {
    const uint64_t begin = a.base + i * kChunkSize;
    return {begin, std::min(a.base + a.size, begin + kChunkSize)};
  }
  // Merges ranges that touch into fewer, larger ranges (order kept for
  // non-touching ones), never across an allocation's start: small managed
  // allocations lie next to each other, and one prefetch spanning two is
  // refused by the driver (CUDA_ERROR_INVALID_VALUE seen under PyTorch).
  std::vector<ByteRange> MergeWithinAllocations(const std::vector<ByteRange>& ranges) const;

  // Marks `units` of `ref`'s chunk resident; the bytes newly resident.
  uint64_t MarkResident(const ChunkRef& ref, uint32_t units);
  // Marks `units` of `ref`'s chunk not resident; the bytes that were.
  uint64_t MarkEvicted(const ChunkRef& ref, uint32_t units);
  // Marks what `ranges` overlap resident (or not), in 64 KiB units.
  void SetResidency(const std::vector<ByteRange>& ranges, bool resident);
  // Marks nothing resident.
  void ForgetResidency();

  uint64_t resident_bytes() const { return resident_bytes_; }
  uint64_t managed_bytes() const;

 private:
  std::map<uint64_t, ChunkedAllocation> allocs_;  // by base
  std::map<uint64_t, uint64_t> base_of_serial_;
  uint64_t next_serial_ = 1;
  uint64_t resident_bytes_ = 0;
};

template <typename Fn>
void ChunkTable::ForEachChunk(const ByteRange& r, Fn&& fn) {
  for (uint64_t p = r.begin; p < r.end;) {
    ChunkedAllocation* a = Find(p);
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

}  // namespace msched

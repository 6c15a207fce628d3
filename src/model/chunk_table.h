// ChunkTable: the job's allocation map (AllocationMap: every allocation the
// program sees, and the managed pool's chunks, which hold its blocks) with
// the memory manager's view of the managed memory in it (managed
// allocations and pool chunks) cut into 2 MiB chunks of 64 KiB units (the
// driver's fault unit): what is resident of each, and the bytes that makes.
// Each chunk's and allocation's state lives in the map's entry (Extent), so
// recording or forgetting an allocation is one change to one map. It is the
// one table the memory manager's pieces share: each chunk carries its use
// history (NextUsePredictor reads it), its read-mostly standing
// (ReadMostlyAdvisor) and its host copy (ResidencyPlanner prices victims
// by it), so no piece keeps a map of allocations of its own.
// Externally synchronized (the memory manager's). Used by the memory
// manager's pieces (model/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "model/address_range.h"
#include "model/alloc_map.h"
#include "model/chunk_state.h"
#include "model/placement_planner.h"
#include "msched/status.h"

namespace msched {

// The chunked extents are the managed ones (kManaged, kPoolChunk), each
// counted from its own base: allocations need not be 2 MiB-aligned, and
// small ones may share a 2 MiB block.
// Invariant: resident_bytes() is the sum over chunks of the bytes of their
// resident units, kept so by changing residency only through MarkResident,
// MarkEvicted, SetResidency and ForgetResidency, and extents only through
// Add and Remove.
class ChunkTable {
 public:
  static constexpr uint64_t kUnit = kBigPageSize;                        // 64 KiB
  static constexpr uint32_t kUnitsPerChunk = kChunkSize / kBigPageSize;  // 32
  static constexpr int kChunkIndexBits = 24;                             // 32 TiB per allocation

  ChunkTable() = default;
  ChunkTable(const ChunkTable&) = delete;
  ChunkTable& operator=(const ChunkTable&) = delete;

  // Records [base, base + size) (AllocationMap::Insert), in chunks if it is
  // managed memory of the driver's (kManaged, kPoolChunk) and not too large
  // for kChunkIndexBits. A stale entry at `base` (freed behind msched's
  // back: an allocation of the program's, or a pool chunk for a pool chunk)
  // gives way first. Fails as AllocationMap::Insert does.
  Status Add(uint64_t base, uint64_t size, AllocKind kind = AllocKind::kManaged);
  // Forgets the program's allocation at `base` (AllocationMap::Erase), or
  // the pool chunk there with its blocks, with their chunks and residency.
  Result<Allocation> Remove(uint64_t base);
  Status RemovePoolChunk(uint64_t base);
  const AllocationMap& allocations() const { return map_; }

  // The chunked extent containing `addr` (interior pointers included), or
  // nullptr. Valid until that extent is removed.
  Extent* Find(uint64_t addr) {
    Extent* a = map_.FindExtent(addr);
    return a != nullptr && a->serial != 0 ? a : nullptr;
  }

  // A chunk by allocation and index.
  struct ChunkRef {
    Extent* alloc;
    size_t index;
    ChunkState& chunk() const { return alloc->chunks[index]; }
  };
  // A chunk's id: its allocation's serial and its index, so that ids stay
  // apart across allocations and are never reused.
  static ChunkId IdOf(const Extent& a, size_t i) { return (a.serial << kChunkIndexBits) | i; }
  // The chunk named `id`; false once its allocation is gone.
  bool Lookup(ChunkId id, ChunkRef* out);
  // Calls fn(ChunkId, ChunkState&, uint32_t units) for each chunk `r` overlaps,
  // in address order, with the mask of the units it overlaps; parts of `r`
  // outside every allocation are skipped.
  template <typename Fn>
  void ForEachChunk(const ByteRange& r, Fn&& fn);
  // Calls fn(Extent&) for each chunked extent, in address order.
  template <typename Fn>
  void ForEachAllocation(Fn&& fn) {
    map_.ForEachExtent(AllocationMap::kEverywhere, [&](Extent& a) {
      if (a.serial != 0) fn(a);
    });
  }

  // Bytes that `units` of chunk `i` of `a` hold (the last unit may be partial).
  static uint64_t UnitBytes(const Extent& a, size_t i, uint32_t units);
  // Every unit of chunk `i` that lies within its allocation.
  static uint32_t AllUnits(const Extent& a, size_t i);
  // The address ranges of `units` of chunk `i` of `a`, appended, clipped to
  // the allocation.
  static void UnitRanges(const Extent& a, size_t i, uint32_t units, std::vector<ByteRange>* out);
  // Chunk `i` of `a` whole, clipped to the allocation.
  static ByteRange ChunkRange(const Extent& a, size_t i) {
    const uint64_t begin = a.base + i * kChunkSize;
    return {begin, std::min(a.base + a.size, begin + kChunkSize)};
  }
  // Appends chunk `i` of `a` whole to `ranges`, merged with the last range
  // when they touch within `a` (never across its start, as
  // MergeWithinAllocations): chunks listed in address order come out as
  // one range per run.
  static void AppendChunkRange(const Extent& a, size_t i, std::vector<ByteRange>* ranges) {
    const ByteRange r = ChunkRange(a, i);
    if (!ranges->empty() && ranges->back().end == r.begin && r.begin != a.base) {
      ranges->back().end = r.end;
    } else {
      ranges->push_back(r);
    }
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
  // Chunks `a` (a fresh extent), or forgets its chunks and their residency.
  void Chunk(Extent& a);
  void Unchunk(Extent& a);

  AllocationMap map_;
  std::map<uint64_t, uint64_t> base_of_serial_;  // of the chunked extents
  uint64_t next_serial_ = 1;
  uint64_t resident_bytes_ = 0;
};

template <typename Fn>
void ChunkTable::ForEachChunk(const ByteRange& r, Fn&& fn) {
  map_.ForEachExtent(r, [&](Extent& a) {
    if (a.serial == 0) return;  // not managed
    const uint64_t begin = std::max(r.begin, a.base), end = std::min(r.end, a.base + a.size);
    const size_t first_chunk = (begin - a.base) / kChunkSize, last_chunk = (end - 1 - a.base) / kChunkSize;
    for (size_t i = first_chunk; i <= last_chunk; ++i) {
      uint32_t units = ~0u;  // a chunk between the first and the last is covered whole
      if (i == first_chunk || i == last_chunk) {
        const uint64_t chunk_begin = a.base + i * kChunkSize;
        const uint64_t lo = std::max(begin, chunk_begin) - chunk_begin;
        const uint64_t hi = std::min(end, chunk_begin + kChunkSize) - chunk_begin;  // exclusive
        const uint32_t first = static_cast<uint32_t>(lo / kUnit), last = static_cast<uint32_t>((hi - 1) / kUnit);
        if (last - first != kUnitsPerChunk - 1) units = ((1u << (last - first + 1)) - 1) << first;
      }
      fn(IdOf(a, i), a.chunks[i], units);
    }
  });
}

}  // namespace msched

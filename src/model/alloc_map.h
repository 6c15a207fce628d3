// AllocationMap: the one map of the memory a process holds, answering
// "which allocation contains this (possibly interior) pointer" in O(log n).
// It has two tiers: extents, the driver allocations (those the program made,
// and the chunks of msched's managed pool), and each pool chunk's blocks (the
// program's stream-ordered allocations). A managed extent carries the memory
// manager's state of its 2 MiB chunks (ChunkTable keeps it), so that no
// other map of allocations exists. Externally synchronized. Used by the
// predictor, the memory manager and the profiler.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/address_range.h"
#include "model/chunk_state.h"
#include "msched/status.h"

namespace msched {

// How an allocation came to be, which decides whether msched may move it.
enum class AllocKind : uint8_t {
  kManaged,    // managed memory (converted or asked for): prefetchable
  kPooled,     // a block of msched's managed pool (stream-ordered): prefetchable;
               // the memory manager tracks its chunk, not the block
  kDevice,     // ordinary device memory left as it is (mode off)
  kPinned,     // VMM or IPC memory: cannot be managed, never moved by msched
  kPoolChunk,  // a chunk of msched's managed pool: its blocks, not it, are the
               // program's allocations
};

// Whether msched may move the allocation's memory (it is managed).
inline bool IsManaged(AllocKind kind) {
  return kind == AllocKind::kManaged || kind == AllocKind::kPooled || kind == AllocKind::kPoolChunk;
}

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;
  AllocKind kind = AllocKind::kManaged;
  uint64_t id = 0;  // assigned by the map, increasing; never reused

  ByteRange range() const { return {base, base + size}; }
};

// A driver allocation: one the program made (any kind but kPooled) or a pool
// chunk, with the memory manager's state of it while ChunkTable chunks it.
struct Extent : Allocation {
  // Names it in chunk ids; never reused. 0: not chunked (not managed, or
  // too large for ChunkTable::kChunkIndexBits).
  uint64_t serial = 0;
  std::vector<ChunkState> chunks;  // chunk i covers [base + i*2MiB, ...) clipped to size
  AllocationReads reads;
  // Some plan has brought part of it in: until then nothing of it was ever
  // on the device, nor (but for host writes) holds data, so moving it in
  // whole costs only the call.
  bool touched = false;
  std::map<uint64_t, Allocation> blocks;  // a pool chunk's blocks, by base
};

// Invariants: extents never overlap; a pool chunk's blocks lie within it and
// never overlap; every allocation has size > 0. The program's allocations
// are the extents other than pool chunks, and the pool chunks' blocks.
class AllocationMap {
 public:
  AllocationMap() = default;
  AllocationMap(const AllocationMap&) = delete;
  AllocationMap& operator=(const AllocationMap&) = delete;

  // Records an allocation (kPooled: a block, within a pool chunk recorded
  // before; otherwise an extent). Fails if it is empty, wraps around, or
  // overlaps one already recorded in its tier, and a block outside every
  // pool chunk. Returns the id given to it.
  Result<uint64_t> Insert(uint64_t base, uint64_t size, AllocKind kind);
  // Forgets the program's allocation that starts at `base` (a pool chunk's
  // block, else an extent other than a pool chunk); NotFound if none does.
  Result<Allocation> Erase(uint64_t base);
  // Forgets the pool chunk at `base` with its blocks; NotFound if none is there.
  Status ErasePoolChunk(uint64_t base);

  // The program's allocation containing `ptr` (interior pointers included),
  // or nullptr: never a pool chunk, but its block. The pointer stays valid
  // until that allocation is erased.
  const Allocation* Find(uint64_t ptr) const;
  // Calls fn(const Allocation&) for every program allocation overlapping
  // `r`, in address order.
  template <typename Fn>
  void ForEachOverlapping(const ByteRange& r, Fn&& fn) const;
  // Calls fn(const Allocation&) for every program allocation, in address order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    ForEachOverlapping(kEverywhere, fn);
  }

  // The extent containing `ptr`, or nullptr; the extent at `base`, or nullptr.
  Extent* FindExtent(uint64_t ptr) { return index_.Containing(ptr); }
  const Extent* FindExtent(uint64_t ptr) const { return index_.Containing(ptr); }
  Extent* ExtentAt(uint64_t base) { return At(extents_, base); }
  const Extent* ExtentAt(uint64_t base) const { return At(extents_, base); }
  // Calls fn(Extent&) for every extent overlapping `r`, in address order. fn
  // may change only the memory manager's state (serial, chunks, reads,
  // touched).
  template <typename Fn>
  void ForEachExtent(const ByteRange& r, Fn&& fn) {
    index_.ForEachOverlapping(r, fn);
  }
  template <typename Fn>
  void ForEachExtent(const ByteRange& r, Fn&& fn) const {
    index_.ForEachOverlapping(r, [&](const Extent& e) { fn(e); });
  }

  // The program's allocations: how many, and their bytes.
  size_t count() const { return count_; }
  uint64_t total_bytes() const { return total_bytes_; }
  // From the lowest extent's start to the highest one's end: every
  // allocation lies within it. Empty when there is none.
  ByteRange span() const;

  static constexpr ByteRange kEverywhere{0, UINT64_MAX};

 private:
  // The extent of `m` at `base`, or nullptr.
  template <typename Map>
  static auto At(Map& m, uint64_t base) -> decltype(&m.begin()->second) {
    auto it = m.find(base);
    return it == m.end() ? nullptr : &it->second;
  }
  // The entry of `m` (by base) containing `ptr`, or nullptr.
  template <typename Map>
  static auto Containing(Map& m, uint64_t ptr) -> decltype(&m.begin()->second);
  // Calls fn on every entry of `m` (by base) overlapping `r`, in order.
  template <typename Map, typename Fn>
  static void ForEachIn(Map& m, const ByteRange& r, Fn&& fn);

  // The extents' bases in address order, each beside its extent: what every
  // launch searches (a handful of times per region) and walks. A tree's
  // nodes lie wherever the heap put them, and a launch in a real program
  // finds them out of the caches, one memory access per level; the bases
  // here are contiguous, so a search reads a few adjacent lines. Changed
  // only when the program allocates or frees (each change moves the entries
  // above it: a few hundred in a PyTorch program).
  class Index {
   public:
    // Room for one more entry, so that the Insert after it cannot fail
    // halfway: call before adding the extent to the map.
    void Reserve();
    void Insert(Extent* e);  // after Reserve
    void Erase(uint64_t base);
    Extent* Containing(uint64_t ptr) const {
      const size_t i = Upper(ptr);
      if (i == 0) return nullptr;
      Extent* e = extents_[i - 1];
      return e->range().Contains(ptr) ? e : nullptr;
    }
    template <typename Fn>
    void ForEachOverlapping(const ByteRange& r, Fn&& fn) const {
      if (r.empty()) return;
      size_t i = Upper(r.begin);
      if (i != 0) --i;
      for (; i < bases_.size() && bases_[i] < r.end; ++i) {
        if (extents_[i]->range().Overlaps(r)) fn(*extents_[i]);
      }
    }

   private:
    // The position of the first base above `ptr`.
    size_t Upper(uint64_t ptr) const;

    std::vector<uint64_t> bases_;   // increasing
    std::vector<Extent*> extents_;  // extents_[i] starts at bases_[i]
  };

  std::map<uint64_t, Extent> extents_;  // by base; owns them (their addresses never change)
  Index index_;                         // of extents_
  size_t count_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t next_id_ = 1;
};

template <typename Map>
auto AllocationMap::Containing(Map& m, uint64_t ptr) -> decltype(&m.begin()->second) {
  auto it = m.upper_bound(ptr);
  if (it == m.begin()) return nullptr;
  --it;
  return it->second.range().Contains(ptr) ? &it->second : nullptr;
}

template <typename Map, typename Fn>
void AllocationMap::ForEachIn(Map& m, const ByteRange& r, Fn&& fn) {
  if (r.empty()) return;
  auto it = m.upper_bound(r.begin);
  if (it != m.begin()) --it;
  for (; it != m.end() && it->second.base < r.end; ++it) {
    if (it->second.range().Overlaps(r)) fn(it->second);
  }
}

template <typename Fn>
void AllocationMap::ForEachOverlapping(const ByteRange& r, Fn&& fn) const {
  ForEachExtent(r, [&](const Extent& e) {
    if (e.kind == AllocKind::kPoolChunk) {
      ForEachIn(e.blocks, r, fn);
    } else {
      fn(static_cast<const Allocation&>(e));
    }
  });
}

}  // namespace msched

// AllocationMap: the allocations a process holds, answering "which allocation
// contains this (possibly interior) pointer" in O(log n). Externally
// synchronized. Used by the predictor, the memory manager and the profiler.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "model/address_range.h"
#include "msched/status.h"

namespace msched {

// How an allocation came to be, which decides whether msched may move it.
enum class AllocKind : uint8_t {
  kManaged,  // managed memory (converted or asked for): prefetchable
  kPooled,   // a block of msched's managed pool (stream-ordered): prefetchable;
             // the memory manager tracks its chunk, not the block
  kDevice,   // ordinary device memory left as it is (mode off)
  kPinned,   // VMM or IPC memory: cannot be managed, never moved by msched
};

// Whether msched may move the allocation's memory (it is managed).
inline bool IsManaged(AllocKind kind) { return kind == AllocKind::kManaged || kind == AllocKind::kPooled; }

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;
  AllocKind kind = AllocKind::kManaged;
  uint64_t id = 0;  // assigned by the map, increasing; never reused

  ByteRange range() const { return {base, base + size}; }
};

// Invariant: stored allocations never overlap and have size > 0.
class AllocationMap {
 public:
  AllocationMap() = default;
  AllocationMap(const AllocationMap&) = delete;
  AllocationMap& operator=(const AllocationMap&) = delete;

  // Records an allocation; fails if it is empty, wraps around, or overlaps
  // one already recorded. Returns the id given to it.
  Result<uint64_t> Insert(uint64_t base, uint64_t size, AllocKind kind);
  // Forgets the allocation that starts at `base`; NotFound if none does.
  Result<Allocation> Erase(uint64_t base);
  // The allocation containing `ptr` (interior pointers included), or nullptr.
  // The pointer stays valid until that allocation is erased.
  const Allocation* Find(uint64_t ptr) const;
  // Calls fn(const Allocation&) for every allocation overlapping `r`, in address order.
  template <typename Fn>
  void ForEachOverlapping(const ByteRange& r, Fn&& fn) const;

  size_t count() const { return by_base_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  const std::map<uint64_t, Allocation>& all() const { return by_base_; }

 private:
  std::map<uint64_t, Allocation> by_base_;
  uint64_t total_bytes_ = 0;
  uint64_t next_id_ = 1;
};

template <typename Fn>
void AllocationMap::ForEachOverlapping(const ByteRange& r, Fn&& fn) const {
  if (r.empty()) return;
  auto it = by_base_.upper_bound(r.begin);
  if (it != by_base_.begin()) --it;
  for (; it != by_base_.end() && it->second.base < r.end; ++it) {
    if (it->second.range().Overlaps(r)) fn(it->second);
  }
}

}  // namespace msched

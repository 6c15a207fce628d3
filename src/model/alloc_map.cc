#include "model/alloc_map.h"

#include <string>

namespace msched {

Result<uint64_t> AllocationMap::Insert(uint64_t base, uint64_t size, AllocKind kind) {
  if (size == 0) return Status::InvalidArgument("allocation of size 0");
  if (base + size < base) return Status::InvalidArgument("allocation wraps around the address space");
  const ByteRange r{base, base + size};
  auto next = by_base_.lower_bound(base);
  if (next != by_base_.end() && next->second.range().Overlaps(r)) {
    return Status::InvalidArgument("allocation at " + std::to_string(base) + " overlaps one at " +
                                   std::to_string(next->second.base));
  }
  if (next != by_base_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.range().Overlaps(r)) {
      return Status::InvalidArgument("allocation at " + std::to_string(base) + " overlaps one at " +
                                     std::to_string(prev->second.base));
    }
  }
  const uint64_t id = next_id_++;
  by_base_.emplace_hint(next, base, Allocation{base, size, kind, id});
  total_bytes_ += size;
  return id;
}

Result<Allocation> AllocationMap::Erase(uint64_t base) {
  auto it = by_base_.find(base);
  if (it == by_base_.end()) return Status::NotFound("no allocation starts at " + std::to_string(base));
  Allocation a = it->second;
  total_bytes_ -= a.size;
  by_base_.erase(it);
  return a;
}

const Allocation* AllocationMap::Find(uint64_t ptr) const {
  auto it = by_base_.upper_bound(ptr);
  if (it == by_base_.begin()) return nullptr;
  --it;
  return it->second.range().Contains(ptr) ? &it->second : nullptr;
}

}  // namespace msched

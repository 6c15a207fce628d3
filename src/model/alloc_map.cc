#include "model/alloc_map.h"

#include <algorithm>
#include <optional>
#include <string>

namespace msched {
namespace {

// Whether [base, base + size) is clear of every entry of `m` (by base).
template <typename Map>
Status CheckClear(const Map& m, uint64_t base, uint64_t size) {
  const ByteRange r{base, base + size};
  auto next = m.lower_bound(base);
  auto clash = [&](uint64_t other) {
    return Status::InvalidArgument("allocation at " + std::to_string(base) + " overlaps one at " +
                                   std::to_string(other));
  };
  if (next != m.end() && next->second.range().Overlaps(r)) return clash(next->second.base);
  if (next != m.begin() && std::prev(next)->second.range().Overlaps(r)) return clash(std::prev(next)->second.base);
  return Status::Ok();
}

}  // namespace

Result<uint64_t> AllocationMap::Insert(uint64_t base, uint64_t size, AllocKind kind) {
  if (size == 0) return Status::InvalidArgument("allocation of size 0");
  if (base + size < base) return Status::InvalidArgument("allocation wraps around the address space");
  const uint64_t id = next_id_;
  if (kind == AllocKind::kPooled) {
    Extent* chunk = FindExtent(base);
    if (chunk == nullptr || chunk->kind != AllocKind::kPoolChunk || base + size > chunk->range().end) {
      return Status::InvalidArgument("pool block at " + std::to_string(base) + " outside every pool chunk");
    }
    MSCHED_RETURN_IF_ERROR(CheckClear(chunk->blocks, base, size));
    chunk->blocks.emplace(base, Allocation{base, size, kind, id});
  } else {
    MSCHED_RETURN_IF_ERROR(CheckClear(extents_, base, size));
    index_.Reserve();
    Extent e;
    e.base = base;
    e.size = size;
    e.kind = kind;
    e.id = id;
    index_.Insert(&extents_.emplace(base, std::move(e)).first->second);
  }
  ++next_id_;
  if (kind != AllocKind::kPoolChunk) {
    ++count_;
    total_bytes_ += size;
  }
  return id;
}

Result<Allocation> AllocationMap::Erase(uint64_t base) {
  Extent* e = FindExtent(base);
  std::optional<Allocation> a;
  if (e != nullptr && e->kind == AllocKind::kPoolChunk) {
    if (auto block = e->blocks.find(base); block != e->blocks.end()) {
      a = block->second;
      e->blocks.erase(block);
    }
  } else if (e != nullptr && e->base == base) {
    a = static_cast<const Allocation&>(*e);
    index_.Erase(base);
    extents_.erase(base);
  }
  if (!a) return Status::NotFound("no allocation starts at " + std::to_string(base));
  --count_;
  total_bytes_ -= a->size;
  return *a;
}

Status AllocationMap::ErasePoolChunk(uint64_t base) {
  auto it = extents_.find(base);
  if (it == extents_.end() || it->second.kind != AllocKind::kPoolChunk) {
    return Status::NotFound("no pool chunk starts at " + std::to_string(base));
  }
  for (const auto& [block_base, block] : it->second.blocks) {
    --count_;
    total_bytes_ -= block.size;
  }
  index_.Erase(base);
  extents_.erase(it);
  return Status::Ok();
}

const Allocation* AllocationMap::Find(uint64_t ptr) const {
  const Extent* e = FindExtent(ptr);
  if (e == nullptr || e->kind != AllocKind::kPoolChunk) return e;
  return Containing(e->blocks, ptr);
}

void AllocationMap::Index::Reserve() {
  bases_.reserve(bases_.size() + 1);
  extents_.reserve(extents_.size() + 1);
}

void AllocationMap::Index::Insert(Extent* e) {
  const size_t i = Upper(e->base);
  bases_.insert(bases_.begin() + static_cast<ptrdiff_t>(i), e->base);
  extents_.insert(extents_.begin() + static_cast<ptrdiff_t>(i), e);
}

void AllocationMap::Index::Erase(uint64_t base) {
  const size_t i = Upper(base);
  if (i == 0 || bases_[i - 1] != base) return;
  bases_.erase(bases_.begin() + static_cast<ptrdiff_t>(i - 1));
  extents_.erase(extents_.begin() + static_cast<ptrdiff_t>(i - 1));
}

size_t AllocationMap::Index::Upper(uint64_t ptr) const {
  return static_cast<size_t>(std::upper_bound(bases_.begin(), bases_.end(), ptr) - bases_.begin());
}

ByteRange AllocationMap::span() const {
  if (extents_.empty()) return {};
  return {extents_.begin()->first, extents_.rbegin()->second.range().end};
}

}  // namespace msched

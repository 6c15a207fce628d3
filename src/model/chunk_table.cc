#include "model/chunk_table.h"

#include <bit>

namespace msched {

Status ChunkTable::Add(uint64_t base, uint64_t size, AllocKind kind) {
  if (kind == AllocKind::kPoolChunk) {
    (void)RemovePoolChunk(base);
  } else {
    (void)Remove(base);
  }
  Result<uint64_t> id = map_.Insert(base, size, kind);
  if (!id.ok()) return id.status();
  if (kind == AllocKind::kManaged || kind == AllocKind::kPoolChunk) Chunk(*map_.ExtentAt(base));
  return Status::Ok();
}

Result<Allocation> ChunkTable::Remove(uint64_t base) {
  // The extent at `base` is the allocation, unless it is a pool chunk (its
  // block at `base` is).
  if (Extent* a = map_.ExtentAt(base); a != nullptr && a->kind != AllocKind::kPoolChunk) Unchunk(*a);
  return map_.Erase(base);
}

Status ChunkTable::RemovePoolChunk(uint64_t base) {
  if (Extent* a = map_.ExtentAt(base); a != nullptr && a->kind == AllocKind::kPoolChunk) Unchunk(*a);
  return map_.ErasePoolChunk(base);
}

void ChunkTable::Chunk(Extent& a) {
  const uint64_t chunks = (a.size + kChunkSize - 1) / kChunkSize;
  if (chunks >= (uint64_t{1} << kChunkIndexBits)) return;
  a.serial = next_serial_++;
  a.chunks.resize(chunks);
  base_of_serial_[a.serial] = a.base;
}

void ChunkTable::Unchunk(Extent& a) {
  if (a.serial == 0) return;
  for (size_t i = 0; i < a.chunks.size(); ++i) resident_bytes_ -= UnitBytes(a, i, a.chunks[i].resident);
  base_of_serial_.erase(a.serial);
  a.serial = 0;
  a.chunks.clear();
}

bool ChunkTable::Lookup(ChunkId id, ChunkRef* out) {
  auto base = base_of_serial_.find(id >> kChunkIndexBits);
  if (base == base_of_serial_.end()) return false;
  Extent& a = *map_.ExtentAt(base->second);
  const size_t i = id & ((uint64_t{1} << kChunkIndexBits) - 1);
  if (i >= a.chunks.size()) return false;
  *out = {&a, i};
  return true;
}

uint64_t ChunkTable::UnitBytes(const Extent& a, size_t i, uint32_t units) {
  if (units == 0) return 0;
  const uint64_t chunk_bytes = std::min<uint64_t>(kChunkSize, a.size - i * kChunkSize);
  const uint32_t last_unit = static_cast<uint32_t>((chunk_bytes - 1) / kUnit);
  uint64_t bytes = std::popcount(units) * kUnit;
  if (units >> last_unit & 1u) bytes -= (last_unit + 1) * kUnit - chunk_bytes;  // the partial tail unit
  return bytes;
}

uint32_t ChunkTable::AllUnits(const Extent& a, size_t i) {
  const uint64_t chunk_bytes = std::min<uint64_t>(kChunkSize, a.size - i * kChunkSize);
  const uint32_t last_unit = static_cast<uint32_t>((chunk_bytes - 1) / kUnit);
  return last_unit == kUnitsPerChunk - 1 ? ~0u : (1u << (last_unit + 1)) - 1;
}

void ChunkTable::UnitRanges(const Extent& a, size_t i, uint32_t units, std::vector<ByteRange>* out) {
  const uint64_t chunk_begin = a.base + i * kChunkSize;
  const uint64_t alloc_end = a.base + a.size;
  while (units) {
    const uint32_t first = std::countr_zero(units);
    const uint32_t run = std::countr_one(units >> first);
    const uint64_t begin = chunk_begin + first * kUnit;
    out->push_back({begin, std::min(alloc_end, begin + run * kUnit)});
    units = run == 32 ? 0 : units & ~(((1u << run) - 1) << first);
  }
}

std::vector<ByteRange> ChunkTable::MergeWithinAllocations(const std::vector<ByteRange>& ranges) const {
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    const Extent* starts = map_.ExtentAt(r.begin);
    if (!out.empty() && out.back().end == r.begin && (starts == nullptr || starts->serial == 0)) {
      out.back().end = r.end;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

uint64_t ChunkTable::MarkResident(const ChunkRef& ref, uint32_t units) {
  ChunkState& c = ref.chunk();
  const uint64_t bytes = UnitBytes(*ref.alloc, ref.index, units & ~c.resident);
  c.resident |= units;
  resident_bytes_ += bytes;
  return bytes;
}

uint64_t ChunkTable::MarkEvicted(const ChunkRef& ref, uint32_t units) {
  ChunkState& c = ref.chunk();
  const uint64_t bytes = UnitBytes(*ref.alloc, ref.index, units & c.resident);
  c.resident &= ~units;
  resident_bytes_ -= bytes;
  return bytes;
}

void ChunkTable::SetResidency(const std::vector<ByteRange>& ranges, bool resident) {
  for (const ByteRange& r : ranges) {
    ForEachChunk(r, [&](ChunkId id, ChunkState&, uint32_t units) {
      ChunkRef ref;
      Lookup(id, &ref);
      if (resident) {
        MarkResident(ref, units);
      } else {
        MarkEvicted(ref, units);
      }
    });
  }
}

void ChunkTable::ForgetResidency() {
  ForEachAllocation([](Extent& a) {
    for (ChunkState& c : a.chunks) c.resident = 0;
  });
  resident_bytes_ = 0;
}

uint64_t ChunkTable::managed_bytes() const {
  uint64_t total = 0;
  map_.ForEachExtent(AllocationMap::kEverywhere, [&](const Extent& a) {
    if (a.serial != 0) total += a.size;
  });
  return total;
}

}  // namespace msched

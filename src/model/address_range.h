// Byte ranges of the device address space, alignment helpers, and RangeSet,
// a set of disjoint ranges. Value types, thread-compatible (externally
// synchronized when shared). Used by every part of src/ and by the tools.
#pragma once

#include <cstdint>
#include <vector>

namespace msched {

inline constexpr uint64_t kPageSize = 4096;              // the driver's base page
inline constexpr uint64_t kBigPageSize = 64 * 1024;      // unit of a serviced fault
inline constexpr uint64_t kChunkSize = 2 * 1024 * 1024;  // VA block / eviction unit
inline constexpr int kChunkShift = 21;

// REQUIRES: `align` is a power of two.
constexpr uint64_t AlignDown(uint64_t v, uint64_t align) { return v & ~(align - 1); }
// Saturates at the highest aligned value instead of wrapping to zero.
constexpr uint64_t AlignUp(uint64_t v, uint64_t align) {
  const uint64_t top = AlignDown(UINT64_MAX, align);
  return v > top ? top : AlignDown(v + align - 1, align);
}
constexpr uint64_t ChunkOf(uint64_t addr) { return addr >> kChunkShift; }

// A half-open byte range [begin, end). Empty when begin >= end.
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  bool Contains(uint64_t addr) const { return addr >= begin && addr < end; }
  bool Overlaps(const ByteRange& o) const { return begin < o.end && o.begin < end; }
  // The smallest range of whole `align` units covering this one.
  ByteRange AlignedOut(uint64_t align) const { return {AlignDown(begin, align), AlignUp(end, align)}; }
  bool operator==(const ByteRange&) const = default;
};

// Indices of the 2 MiB chunks a non-empty range touches, [first, last].
struct ChunkSpan {
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t count() const { return last - first + 1; }
};
inline ChunkSpan ChunksOf(const ByteRange& r) { return {ChunkOf(r.begin), ChunkOf(r.end - 1)}; }

// The sum of the ranges' sizes (overlaps counted twice).
uint64_t TotalBytes(const std::vector<ByteRange>& ranges);

// RangeSet: a set of addresses kept as sorted, disjoint, non-adjacent ranges.
// Invariant: ranges()[i].end < ranges()[i+1].begin, and no range is empty.
class RangeSet {
 public:
  RangeSet() = default;

  // Adds a range, merging it with any range it overlaps or touches.
  void Add(const ByteRange& r);
  void Add(const RangeSet& other);
  // Removes every address of `r`.
  void Subtract(const ByteRange& r);
  void Clear() { ranges_.clear(); }

  bool Contains(uint64_t addr) const;
  bool ContainsRange(const ByteRange& r) const;
  // Bytes of `r` that are in the set.
  uint64_t OverlapBytes(const ByteRange& r) const;
  uint64_t OverlapBytes(const RangeSet& other) const;
  uint64_t TotalBytes() const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<ByteRange>& ranges() const { return ranges_; }

  bool operator==(const RangeSet&) const = default;

 private:
  std::vector<ByteRange> ranges_;
};

}  // namespace msched

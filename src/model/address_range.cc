#include "model/address_range.h"

#include <algorithm>

namespace msched {

void RangeSet::Add(const ByteRange& r) {
  if (r.empty()) return;
  // First range whose end reaches r.begin (touching ranges merge too).
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), r.begin,
                                [](const ByteRange& x, uint64_t v) { return x.end < v; });
  ByteRange merged = r;
  auto last = first;
  while (last != ranges_.end() && last->begin <= merged.end) {
    merged.begin = std::min(merged.begin, last->begin);
    merged.end = std::max(merged.end, last->end);
    ++last;
  }
  if (first == last) {
    ranges_.insert(first, merged);
  } else {
    *first = merged;
    ranges_.erase(first + 1, last);
  }
}

void RangeSet::Add(const RangeSet& other) {
  for (const ByteRange& r : other.ranges_) Add(r);
}

void RangeSet::Subtract(const ByteRange& r) {
  if (r.empty()) return;
  std::vector<ByteRange> out;
  out.reserve(ranges_.size() + 1);
  for (const ByteRange& x : ranges_) {
    if (!x.Overlaps(r)) {
      out.push_back(x);
      continue;
    }
    if (x.begin < r.begin) out.push_back({x.begin, r.begin});
    if (r.end < x.end) out.push_back({r.end, x.end});
  }
  ranges_ = std::move(out);
}

bool RangeSet::Contains(uint64_t addr) const {
  auto it =
      std::upper_bound(ranges_.begin(), ranges_.end(), addr, [](uint64_t v, const ByteRange& x) { return v < x.end; });
  return it != ranges_.end() && it->Contains(addr);
}

bool RangeSet::ContainsRange(const ByteRange& r) const {
  if (r.empty()) return true;
  return OverlapBytes(r) == r.size();
}

uint64_t RangeSet::OverlapBytes(const ByteRange& r) const {
  if (r.empty()) return 0;
  uint64_t total = 0;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), r.begin,
                             [](uint64_t v, const ByteRange& x) { return v < x.end; });
  for (; it != ranges_.end() && it->begin < r.end; ++it) {
    total += std::min(it->end, r.end) - std::max(it->begin, r.begin);
  }
  return total;
}

uint64_t RangeSet::OverlapBytes(const RangeSet& other) const {
  uint64_t total = 0;
  for (const ByteRange& r : other.ranges_) total += OverlapBytes(r);
  return total;
}

uint64_t TotalBytes(const std::vector<ByteRange>& ranges) {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) total += r.size();
  return total;
}

uint64_t RangeSet::TotalBytes() const { return msched::TotalBytes(ranges_); }

}  // namespace msched

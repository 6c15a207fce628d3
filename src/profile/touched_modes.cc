#include "profile/touched_modes.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace msched {

std::vector<TouchedRange> TouchedByMode(const std::vector<TouchedRange>& records, bool writes_fault) {
  // A sweep over the records' ends: how many records that read and that
  // write cover each stretch between two consecutive ends.
  std::vector<std::tuple<uint64_t, int, int>> edges;  // (address, reads +/-1, writes +/-1)
  for (const TouchedRange& r : records) {
    if (r.range.begin >= r.range.end) continue;
    const int mode = writes_fault ? static_cast<int>(r.mode) : static_cast<int>(AccessMode::kReadWrite);
    const int reads = (mode & static_cast<int>(AccessMode::kRead)) != 0;
    const int writes = (mode & static_cast<int>(AccessMode::kWrite)) != 0;
    edges.emplace_back(r.range.begin, reads, writes);
    edges.emplace_back(r.range.end, -reads, -writes);
  }
  std::sort(edges.begin(), edges.end());
  std::vector<TouchedRange> out;
  int reading = 0, writing = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    reading += std::get<1>(edges[i]);
    writing += std::get<2>(edges[i]);
    const uint64_t begin = std::get<0>(edges[i]);
    if (i + 1 == edges.size() || std::get<0>(edges[i + 1]) == begin) continue;  // an empty stretch
    const int mode = (reading > 0 ? 1 : 0) | (writing > 0 ? 2 : 0);
    if (mode == 0) continue;  // between records
    const ByteRange stretch{begin, std::get<0>(edges[i + 1])};
    if (!out.empty() && out.back().range.end == begin && static_cast<int>(out.back().mode) == mode) {
      out.back().range.end = stretch.end;
    } else {
      out.push_back({stretch, static_cast<AccessMode>(mode)});
    }
  }
  return out;
}

}  // namespace msched

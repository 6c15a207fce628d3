#include "suite/belady.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "msim/access_log.h"

namespace msched::bench {
namespace {

namespace al = msim::access_log;

constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();

// The log as a sequence of dense unit ids (a unit of memory freed and
// allocated again is a new unit), cut into its operations.
struct Sequence {
  std::vector<uint32_t> accesses;
  std::vector<uint32_t> operation_ends;  // each operation's accesses end here
  uint32_t units = 0;
};

Result<Sequence> Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof al::kMagic];
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, al::kMagic, sizeof magic) != 0) {
    return Status::Corruption(path + ": not an msim access log");
  }
  Sequence s;
  std::unordered_map<uint64_t, uint32_t> id_of;  // unit address / kUnitBytes -> dense id
  auto fail = [&] { return Status::Corruption(path + ": truncated at byte " + std::to_string(in.tellg())); };
  for (int type; (type = in.get()) != EOF;) {
    if (type == al::kOperation) {
      uint32_t n = 0;
      if (!in.read(reinterpret_cast<char*>(&n), sizeof n)) return fail();
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t block = 0;
        uint32_t mask = 0;
        if (!in.read(reinterpret_cast<char*>(&block), sizeof block) ||
            !in.read(reinterpret_cast<char*>(&mask), sizeof mask)) {
          return fail();
        }
        for (uint32_t u = 0; u < al::kUnitsPerBlock; ++u) {
          if ((mask >> u & 1) == 0) continue;
          if (s.accesses.size() >= kNever - 1) return Status::OutOfRange(path + ": more accesses than 2^32 - 2");
          const auto [it, fresh] = id_of.try_emplace(block / al::kUnitBytes + u, s.units);
          if (fresh) ++s.units;
          s.accesses.push_back(it->second);
        }
      }
      if (s.accesses.size() > (s.operation_ends.empty() ? 0 : s.operation_ends.back())) {  // not empty
        s.operation_ends.push_back(static_cast<uint32_t>(s.accesses.size()));
      }
    } else if (type == al::kFree) {
      uint64_t range[2];
      if (!in.read(reinterpret_cast<char*>(range), sizeof range)) return fail();
      const uint64_t first = range[0] / al::kUnitBytes, last = (range[1] + al::kUnitBytes - 1) / al::kUnitBytes;
      if (last < first || last - first > id_of.size()) {
        // More units than were ever touched (a huge or corrupt range): walk
        // the touched ones instead.
        for (auto it = id_of.begin(); it != id_of.end();) {
          it = it->first >= first && it->first < last ? id_of.erase(it) : std::next(it);
        }
      } else {
        for (uint64_t a = first; a < last; ++a) id_of.erase(a);
      }
    } else {
      return Status::Corruption(path + ": unknown record '" + std::to_string(type) + "'");
    }
  }
  return s;
}

// OPT's capacity misses for `s` on `capacity` units. By unit: each access on
// its own, and a unit needed furthest ahead may be the one just accessed
// (Belady's minimum). By operation: an operation's units all come in before
// any victim is chosen, and none of them is one, unless the operation alone
// exceeds the capacity: such a kernel faults in any policy, and its units
// then compete with the rest as after any access.
uint64_t OptMisses(const Sequence& s, const std::vector<uint32_t>& next, uint64_t capacity, bool by_operation) {
  const std::vector<uint32_t>& seq = s.accesses;
  // The next use of a resident unit (a next use is never index 0); 0: not
  // resident.
  std::vector<uint32_t> resident_until(s.units, 0);
  std::vector<bool> seen(s.units, false);
  // The operation a unit was last accessed in, plus one (by operation).
  std::vector<uint32_t> operation_of(by_operation ? s.units : 0, 0);
  // Resident units by next use, furthest on top; stale entries (a unit used
  // again or evicted since) are skipped when they surface.
  std::priority_queue<std::pair<uint32_t, uint32_t>> by_next_use;
  std::vector<std::pair<uint32_t, uint32_t>> held;  // the operation's own units, popped while choosing victims
  uint64_t resident = 0, misses = 0;
  size_t op = 0;
  for (size_t i = 0; i < seq.size(); ++op) {
    const size_t end = by_operation ? s.operation_ends[op] : i + 1;
    uint64_t distinct = 0;  // the operation's units
    for (; i < end; ++i) {
      const uint32_t unit = seq[i];
      if (resident_until[unit] == 0) {
        if (seen[unit]) ++misses;  // a unit's first access costs no transfer
        seen[unit] = true;
        ++resident;
      }
      resident_until[unit] = next[i];
      by_next_use.emplace(next[i], unit);
      if (by_operation && operation_of[unit] != op + 1) {
        operation_of[unit] = static_cast<uint32_t>(op + 1);
        ++distinct;
      }
    }
    const bool pinned = by_operation && distinct <= capacity;
    while (resident > capacity && !by_next_use.empty()) {
      const auto [when, victim] = by_next_use.top();
      by_next_use.pop();
      if (resident_until[victim] != when) continue;  // stale
      if (pinned && operation_of[victim] == op + 1) {
        held.emplace_back(when, victim);
        continue;
      }
      resident_until[victim] = 0;
      --resident;
    }
    for (const auto& h : held) by_next_use.push(h);
    held.clear();
  }
  return misses;
}

}  // namespace

Result<BeladyBound> BeladyMinimum(const std::string& path, uint64_t capacity_bytes, uint64_t budget_bytes) {
  Result<Sequence> read = Read(path);
  if (!read.ok()) return read.status();
  const std::vector<uint32_t>& seq = read->accesses;
  // next[i]: where seq[i]'s unit is accessed again (kNever: never).
  std::vector<uint32_t> next(seq.size(), kNever);
  {
    std::vector<uint32_t> later(read->units, kNever);
    for (size_t i = seq.size(); i-- > 0;) {
      next[i] = later[seq[i]];
      later[seq[i]] = static_cast<uint32_t>(i);
    }
  }
  const uint64_t capacity = capacity_bytes / al::kUnitBytes, budget = budget_bytes / al::kUnitBytes;
  BeladyBound b;
  b.h2d_bytes = OptMisses(*read, next, capacity, false) * al::kUnitBytes;
  b.whole_operation_h2d_bytes = OptMisses(*read, next, capacity, true) * al::kUnitBytes;
  b.whole_operation_budget_h2d_bytes = OptMisses(*read, next, budget, true) * al::kUnitBytes;
  b.accesses = seq.size();
  b.units = read->units;
  return b;
}

}  // namespace msched::bench

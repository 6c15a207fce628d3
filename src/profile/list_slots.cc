#include "profile/list_slots.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <tuple>

#include "model/address_range.h"

namespace msched {
namespace {

// A list needs this many regions in one struct (PyTorch's lists hold up to
// 110 tensors): fewer, and a struct's pointer fields (a GEMM's A, B and C)
// leave too little to tell a list from chance.
constexpr size_t kMinSlots = 8;
// The block array starts on an 8-byte boundary: PyTorch's metadata structs
// place it after arrays of 8-byte words. Zeros before it (the high bytes of
// the last slot's count) would otherwise pass for its first blocks.
constexpr uint32_t kArrayAlignment = 8;

// What a launch's trace says of one region.
enum class Evidence : uint8_t {
  kNone,         // nothing touched through its base
  kBlurred,      // rounded (CUPTI) and under 2 MiB: maybe what the driver moved along with a neighbour
  kSignificant,  // touched
};

// A region that may be a list slot: its index in the template, its base's
// offset in the struct, and what each launch says of it.
struct Candidate {
  size_t region;
  uint32_t offset;
  std::vector<Evidence> evidence;  // per launch
};

// A slot of the list under one choice of array: the launches below each
// slot value whose evidence for it is none, or blurred (prefix counts by
// the launch's last-block byte), and the least last-block byte of the
// launches that touched it.
struct Member {
  const Candidate* candidate;
  uint32_t word;  // 8-byte words from the lowest member's base
  std::array<uint32_t, 257> none_below{}, blurred_below{};
  uint32_t least_touching = std::numeric_limits<uint32_t>::max();
};

// Each launch's last-block byte of the array at `array`, or false when in
// some launch its first grid.x bytes are no block-to-slot map: the first
// block's slot is 0 and no later block's is lower.
bool LastBlockBytes(const std::vector<const Observation*>& obs, uint16_t param, uint32_t array, uint32_t size,
                    std::vector<uint8_t>* out) {
  out->clear();
  for (const Observation* o : obs) {
    const uint32_t blocks = o->launch->dims.grid[0];
    const uint8_t* bytes = o->args.ParamBytes(param);
    if (bytes == nullptr || blocks == 0 || blocks > size - array) return false;
    const uint8_t* first = bytes + array;
    if (first[0] != 0 || !std::is_sorted(first, first + blocks)) return false;
    out->push_back(first[blocks - 1]);
  }
  return true;
}

// The regions based at 8-byte words of parameter `param`, with their evidence.
std::vector<Candidate> Candidates(const std::vector<const Observation*>& obs, uint64_t precision,
                                  const KernelTemplate& t, uint16_t param) {
  std::vector<Candidate> out;
  for (size_t i = 0; i < t.regions.size(); ++i) {
    const ArgRef& base = t.regions[i].base;
    if (base.param != param || base.width != 8) continue;
    Candidate c{i, base.offset, std::vector<Evidence>(obs.size(), Evidence::kNone)};
    for (size_t o = 0; o < obs.size(); ++o) {
      auto it = obs[o]->by_base.find(base);
      if (it == obs[o]->by_base.end()) continue;
      uint64_t bytes = 0;
      for (const TouchedRange& r : it->second) bytes += r.range.size();
      if (bytes > 0) c.evidence[o] = precision > 1 && bytes < kChunkSize ? Evidence::kBlurred : Evidence::kSignificant;
    }
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.offset < b.offset; });
  return out;
}

// Calls fn(candidate, word) for the slots of the array at `array`: the
// candidates before it, on 8-byte steps from the lowest (`candidates` is
// sorted by offset), with their place in 8-byte words from it.
template <typename Fn>
void ForEachSlot(const std::vector<Candidate>& candidates, uint32_t array, Fn&& fn) {
  for (const Candidate& c : candidates) {
    if (c.offset + 8 > array) break;
    if ((c.offset - candidates[0].offset) % 8 == 0) fn(c, (c.offset - candidates[0].offset) / 8);
  }
}

// The members under the array at `array`, with the evidence of each launch
// whose last-block byte is `last[launch]`.
std::vector<Member> Members(const std::vector<Candidate>& candidates, uint32_t array,
                            const std::vector<uint8_t>& last) {
  std::vector<Member> members;
  ForEachSlot(candidates, array, [&](const Candidate& c, uint32_t word) {
    Member m;
    m.candidate = &c;
    m.word = word;
    for (size_t o = 0; o < last.size(); ++o) {
      if (c.evidence[o] == Evidence::kNone) ++m.none_below[last[o] + 1u];
      if (c.evidence[o] == Evidence::kBlurred) ++m.blurred_below[last[o] + 1u];
      if (c.evidence[o] == Evidence::kSignificant) m.least_touching = std::min<uint32_t>(m.least_touching, last[o]);
    }
    for (size_t t = 1; t < m.none_below.size(); ++t) {
      m.none_below[t] += m.none_below[t - 1];
      m.blurred_below[t] += m.blurred_below[t - 1];
    }
    members.push_back(m);
  });
  return members;
}

// A guard for one parameter: the array, and the slots per pointer array
// (0: none chosen), with what it would skip.
struct Choice {
  uint64_t untouched_skipped = 0;  // (region, launch) pairs skipped that show nothing touched
  uint64_t blurred_skipped = 0;    // and those whose evidence is blurred
  uint32_t array = 0;              // the byte array's offset in the parameter
  uint32_t slots = 0;              // slots per pointer array

  // The guard that agrees best with the trace: each (region, launch) pair
  // it skips counts for it if nothing was touched through the region, and
  // against it if something was (under 2 MiB: more is excluded outright).
  // Ties go to the earlier array (tried first), then the most slots per
  // array.
  int64_t Score() const { return static_cast<int64_t>(untouched_skipped) - static_cast<int64_t>(blurred_skipped); }
  auto Key() const { return std::make_tuple(Score(), slots); }
};

}  // namespace

void GuardListSlots(const std::vector<const Observation*>& obs, uint64_t precision, KernelTemplate* tmpl) {
  if (obs.empty()) return;
  uint32_t most_blocks = 0;
  for (const Observation* o : obs) most_blocks = std::max(most_blocks, o->launch->dims.grid[0]);
  for (uint16_t param = 0; param < tmpl->layout.size(); ++param) {
    const uint32_t size = tmpl->layout[param].size;
    const std::vector<Candidate> candidates = Candidates(obs, precision, *tmpl, param);
    if (candidates.size() < kMinSlots) continue;
    Choice best;
    // Last bytes seen at an earlier array: a later array with the same ones
    // is a copy (a struct an earlier launch left on the stack), which the
    // next launch need not rewrite.
    std::set<std::vector<uint8_t>> tried;
    std::vector<uint8_t> last;
    for (uint32_t array = kArrayAlignment; array + most_blocks <= size; array += kArrayAlignment) {
      if (!LastBlockBytes(obs, param, array, size, &last) || !tried.insert(last).second) continue;
      // A map that names slot 0 alone in every launch says nothing: zeros do.
      if (*std::max_element(last.begin(), last.end()) == 0) continue;
      const std::vector<Member> members = Members(candidates, array, last);
      if (members.size() < kMinSlots) continue;
      const uint32_t words = members.back().word + 1;
      for (uint32_t slots = 1; slots <= words; ++slots) {
        Choice c{0, 0, array, slots};
        bool consistent = true;
        for (const Member& m : members) {
          const uint32_t slot = m.word % slots;
          if (slot > std::numeric_limits<uint8_t>::max() || slot > m.least_touching) {
            consistent = false;
            break;
          }
          c.untouched_skipped += m.none_below[slot];
          c.blurred_skipped += m.blurred_below[slot];
        }
        if (consistent && c.untouched_skipped > 0 && (best.slots == 0 || c.Key() > best.Key())) best = c;
      }
    }
    if (best.slots == 0) continue;
    ForEachSlot(candidates, best.array, [&](const Candidate& c, uint32_t word) {
      tmpl->regions[c.region].list =
          ListSlot{static_cast<uint16_t>(word % best.slots), ArgRef{param, static_cast<uint16_t>(best.array), 8}};
    });
  }
}

}  // namespace msched

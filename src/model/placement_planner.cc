#include "model/placement_planner.h"

#include <cstddef>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace msched {
namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// The distinct chunks of a step, in first-access order.
std::vector<ChunkId> Distinct(const AccessStep& step) {
  std::vector<ChunkId> out;
  std::unordered_set<ChunkId> seen;
  for (ChunkId c : step) {
    if (seen.insert(c).second) out.push_back(c);
  }
  return out;
}

// The replacement policies differ only in the key that orders victims.
// Resident chunks live in an ordered set of (key, chunk); the victim is the
// greatest key. For OPT the key is (next use, then older last use first);
// for LRU it is (older last use first).
class Cache {
 public:
  using Key = std::tuple<uint64_t, uint64_t>;  // (primary, secondary); larger = evict first

  bool Resident(ChunkId c) const { return keys_.count(c) != 0; }
  size_t size() const { return keys_.size(); }

  void Put(ChunkId c, Key k) {
    Erase(c);
    keys_[c] = k;
    order_.insert({k, c});
  }
  void Erase(ChunkId c) {
    auto it = keys_.find(c);
    if (it == keys_.end()) return;
    order_.erase({it->second, c});
    keys_.erase(it);
  }
  // The resident chunk with the greatest key that is not in `pinned`.
  bool Victim(const std::unordered_set<ChunkId>& pinned, ChunkId* out) const {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (!pinned.count(it->second)) {
        *out = it->second;
        return true;
      }
    }
    return false;
  }

 private:
  std::unordered_map<ChunkId, Key> keys_;
  std::set<std::pair<Key, ChunkId>> order_;
};

enum class Policy { kOpt, kLru };

Plan Run(const PlannerInput& in, Policy policy) {
  const size_t n = in.future.size();
  std::vector<std::vector<ChunkId>> steps(n);
  for (size_t s = 0; s < n; ++s) steps[s] = Distinct(in.future[s]);
  auto size_of = [&in](ChunkId c) -> uint64_t {
    auto it = in.size.find(c);
    return it == in.size.end() ? 1 : it->second;
  };

  // next_use[s][i]: the next step after s that needs steps[s][i].
  std::vector<std::vector<uint64_t>> next_use(n);
  std::unordered_map<ChunkId, uint64_t> upcoming;
  for (size_t s = n; s-- > 0;) {
    next_use[s].resize(steps[s].size());
    for (size_t i = 0; i < steps[s].size(); ++i) {
      auto it = upcoming.find(steps[s][i]);
      next_use[s][i] = it == upcoming.end() ? kNever : it->second;
    }
    for (ChunkId c : steps[s]) upcoming[c] = s;
  }

  // Ticks order uses: resident chunks get ticks 0..k-1 (LRU first); step s uses tick k+s.
  // Keys: larger evicts first. OPT: (next use, -tick). LRU: (-tick, 0).
  auto key = [policy](uint64_t next, uint64_t tick) -> Cache::Key {
    const uint64_t age = kNever - tick;  // older tick = larger age
    return policy == Policy::kOpt ? Cache::Key{next, age} : Cache::Key{age, 0};
  };

  Plan plan;
  plan.steps.resize(std::max<size_t>(n, 1));
  Cache cache;
  uint64_t tick = 0, used = 0;
  for (ChunkId c : in.resident) {
    auto it = upcoming.find(c);
    cache.Put(c, key(it == upcoming.end() ? kNever : it->second, tick++));
    used += size_of(c);
  }
  const uint64_t base_tick = tick;

  // Evicts victims (never `pinned`) until `need` more fits; false if it cannot.
  auto make_room = [&](uint64_t need, const std::unordered_set<ChunkId>& pinned, StepPlan* sp) {
    while (used + need > in.capacity) {
      ChunkId v;
      if (!cache.Victim(pinned, &v)) return false;
      cache.Erase(v);
      used -= size_of(v);
      sp->evict.push_back(v);
    }
    return true;
  };

  // Excess residency (capacity shrank, or chunks of step 0 grew) is shed
  // first, keeping the chunks step 0 needs.
  std::unordered_set<ChunkId> first;
  if (n > 0) first.insert(steps[0].begin(), steps[0].end());
  make_room(0, first, &plan.steps[0]);
  if (n == 0) {
    plan.evictions = plan.steps[0].evict.size();
    if (plan.steps[0].evict.empty()) plan.steps.clear();
    return plan;
  }

  for (size_t s = 0; s < n; ++s) {
    StepPlan& sp = plan.steps[s];
    const std::unordered_set<ChunkId> pinned(steps[s].begin(), steps[s].end());
    for (size_t i = 0; i < steps[s].size(); ++i) {
      const ChunkId c = steps[s][i];
      if (!cache.Resident(c)) {
        if (!make_room(size_of(c), pinned, &sp)) {  // only chunks of this step remain
          sp.unserved.push_back(c);
          continue;
        }
        used += size_of(c);
        sp.load.push_back(c);
      }
      cache.Put(c, key(next_use[s][i], base_tick + s));
    }
    plan.loads += sp.load.size();
    plan.evictions += sp.evict.size();
    plan.unserved += sp.unserved.size();
  }
  return plan;
}

}  // namespace

Plan PlanOpt(const PlannerInput& input) { return Run(input, Policy::kOpt); }
Plan PlanLru(const PlannerInput& input) { return Run(input, Policy::kLru); }

}  // namespace msched

// Placement planning over 2 MiB chunks: given what fits, what is resident and
// the known future (the chunks each upcoming kernel or time slice needs, in
// order), decide what to evict and what to load at each step. PlanOpt is
// Belady's OPT (evict what is needed furthest in the future); PlanLru is the
// baseline. Pure functions over value types; thread-safe.
// Used by the memory manager's ResidencyPlanner (model/residency_planner.h),
// and for ChunkId by the chunk table (model/chunk_table.h).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace msched {

using ChunkId = uint64_t;

// The chunks one step needs resident together, in access order.
using AccessStep = std::vector<ChunkId>;

struct PlannerInput {
  uint64_t capacity = 0;           // what fits at once, in the units of `size`
  std::vector<ChunkId> resident;   // resident now, least recently used first
  std::vector<AccessStep> future;  // known future, earliest first
  // What each chunk occupies once resident (bytes, say); a chunk not listed
  // occupies 1. A resident chunk's size may exceed what it holds now: the
  // growth is charged at step 0.
  std::unordered_map<ChunkId, uint64_t> size;
};

struct StepPlan {
  std::vector<ChunkId> evict;     // in eviction order
  std::vector<ChunkId> load;      // in access order
  std::vector<ChunkId> unserved;  // needed but left out: the step exceeds capacity
};

// Promises, for each step in order:
//  - every chunk of the step is resident after it, except when the step alone
//    needs more than `capacity`: then the chunks that fit, in access order,
//    are, and the rest are listed as unserved (they will fault);
//  - a chunk of a step is never evicted to serve that same step;
//  - evictions happen only when the step would otherwise exceed capacity,
//    and the resident total never exceeds capacity after a step.
// If `resident` already exceeds capacity, the excess is evicted at step 0
// (or at once when the future is empty). With unit sizes PlanOpt is
// Belady's optimum; with sizes it evicts by furthest next use (a heuristic:
// the sized problem is NP-hard).
struct Plan {
  std::vector<StepPlan> steps;  // one per input step
  uint64_t loads = 0;           // misses served
  uint64_t evictions = 0;
  uint64_t unserved = 0;
};

Plan PlanOpt(const PlannerInput& input);
Plan PlanLru(const PlannerInput& input);

}  // namespace msched

// Planning the launches of a CUDA graph. Kernels inside a replayed graph are
// invisible to the launch hooks, so the hook walks the graph once, at
// instantiation, predicting each kernel node's working set from its template
// and its captured arguments; this file turns those per-node predictions
// into what each launch of the graph makes resident:
//   - everything at once, before the launch, when the graph's data fits the
//     budget (the common case: the launch itself is the user's, untouched);
//   - otherwise, when every node is one the driver can disable per launch
//     (kernel, memset, memcpy, empty), consecutive segments in dependency
//     order, each small enough to be made resident while the previous one
//     runs: the graph is launched once per segment with only that segment's
//     nodes enabled (cuGraphNodeSetEnabled), so its own parameters are used
//     and the order of its dependencies is kept;
//   - otherwise as much of it as the budget holds; the rest faults in.
// Plain data and pure functions: no driver. Used by hook/ and tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/template_eval.h"

namespace msched {

// One node of a graph as the planner sees it.
struct GraphNodeSpec {
  std::vector<PredictedRegion> regions;  // its predicted data (empty: touches none, or not predicted)
  std::vector<size_t> deps;              // indices of the nodes it depends on
  bool can_disable = false;              // kernel, memset, memcpy or empty: cuGraphNodeSetEnabled applies
};

// Consecutive nodes launched together, with the data they touch.
struct GraphSegment {
  std::vector<size_t> nodes;             // indices into the node list, in dependency order
  std::vector<PredictedRegion> regions;  // the nodes' regions, in node order
  uint64_t bytes = 0;                    // the size of their union (overlaps once)
};

// The nodes in an order that respects every dependency (Kahn's algorithm;
// among ready nodes the lowest index first, so a captured chain keeps its
// capture order). Empty when a dependency is out of range or the nodes form
// a cycle: then no order is known and the graph is not split.
std::vector<size_t> DependencyOrder(const std::vector<GraphNodeSpec>& nodes);

// Splits `order` (a dependency order of `nodes`) into consecutive segments
// whose data is at most `max_bytes` each; a node whose data alone is larger
// is a segment by itself. Nodes without data join the segment they fall in.
std::vector<GraphSegment> SplitInOrder(const std::vector<GraphNodeSpec>& nodes, const std::vector<size_t>& order,
                                       uint64_t max_bytes);

// How the launches of one graph are prepared, for a given budget.
struct GraphPlan {
  // Each launch runs `segments` in turn. One segment holding every node
  // means the launch is the user's own, after its data is made resident.
  std::vector<GraphSegment> segments;
  uint64_t bytes = 0;  // the size of the whole graph's data
  bool split = false;  // more than one segment: nodes are disabled per launch
};

// The plan for `nodes` under a budget of `budget` bytes: the whole graph
// when its data fits (or the budget is unknown: 0), else segments of at
// most half the budget, so that one loads while the previous one runs, when
// every node can be disabled and a dependency order exists; else the whole
// graph, of which the budget holds what it can.
GraphPlan PlanGraph(const std::vector<GraphNodeSpec>& nodes, uint64_t budget);

}  // namespace msched

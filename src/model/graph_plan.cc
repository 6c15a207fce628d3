#include "model/graph_plan.h"

#include <queue>

#include "model/address_range.h"

namespace msched {
namespace {

void AddRegions(const std::vector<PredictedRegion>& regions, GraphSegment* segment, RangeSet* data) {
  for (const PredictedRegion& r : regions) {
    segment->regions.push_back(r);
    data->Add(r.range);
  }
  segment->bytes = data->TotalBytes();
}

uint64_t UnionBytes(const std::vector<PredictedRegion>& regions) {
  RangeSet set;
  for (const PredictedRegion& r : regions) set.Add(r.range);
  return set.TotalBytes();
}

}  // namespace

std::vector<size_t> DependencyOrder(const std::vector<GraphNodeSpec>& nodes) {
  const size_t n = nodes.size();
  std::vector<size_t> waiting(n, 0);
  std::vector<std::vector<size_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t d : nodes[i].deps) {
      if (d >= n || d == i) return {};
      ++waiting[i];
      dependents[d].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t d : dependents[i]) {
      if (--waiting[d] == 0) ready.push(d);
    }
  }
  if (order.size() != n) return {};  // a cycle
  return order;
}

std::vector<GraphSegment> SplitInOrder(const std::vector<GraphNodeSpec>& nodes, const std::vector<size_t>& order,
                                       uint64_t max_bytes) {
  std::vector<GraphSegment> segments;
  GraphSegment current;
  RangeSet data;
  for (size_t i : order) {
    const GraphNodeSpec& node = nodes[i];
    if (!current.nodes.empty()) {
      RangeSet grown = data;
      for (const PredictedRegion& r : node.regions) grown.Add(r.range);
      const uint64_t bytes = grown.TotalBytes();
      if (bytes > max_bytes && bytes > current.bytes) {  // a node adding no data never starts a segment
        segments.push_back(std::move(current));
        current = GraphSegment{};
        data.Clear();
      }
    }
    current.nodes.push_back(i);
    AddRegions(node.regions, &current, &data);
  }
  if (!current.nodes.empty()) segments.push_back(std::move(current));
  return segments;
}

GraphPlan PlanGraph(const std::vector<GraphNodeSpec>& nodes, uint64_t budget) {
  GraphPlan plan;
  GraphSegment whole;
  for (size_t i = 0; i < nodes.size(); ++i) {
    whole.nodes.push_back(i);
    whole.regions.insert(whole.regions.end(), nodes[i].regions.begin(), nodes[i].regions.end());
  }
  whole.bytes = plan.bytes = UnionBytes(whole.regions);
  bool can_split = budget > 0 && plan.bytes > budget && nodes.size() > 1;
  for (const GraphNodeSpec& node : nodes) can_split = can_split && node.can_disable;
  if (can_split) {
    const std::vector<size_t> order = DependencyOrder(nodes);
    if (!order.empty()) {
      plan.segments = SplitInOrder(nodes, order, budget / 2);
      plan.split = plan.segments.size() > 1;
      if (plan.split) return plan;
      plan.segments.clear();
    }
  }
  plan.segments.push_back(std::move(whole));
  return plan;
}

}  // namespace msched

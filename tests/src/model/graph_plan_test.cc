#include "model/graph_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A node touching [begin_mib, end_mib) MiB, depending on `deps`.
GraphNodeSpec Node(uint64_t begin_mib, uint64_t end_mib, std::vector<size_t> deps = {}, bool can_disable = true) {
  GraphNodeSpec n;
  if (end_mib > begin_mib) n.regions.push_back({{begin_mib * kMiB, end_mib * kMiB}, AccessMode::kReadWrite});
  n.deps = std::move(deps);
  n.can_disable = can_disable;
  return n;
}

// A captured chain: each node depends on the one before.
std::vector<GraphNodeSpec> Chain(const std::vector<std::pair<uint64_t, uint64_t>>& mib) {
  std::vector<GraphNodeSpec> nodes;
  for (size_t i = 0; i < mib.size(); ++i) {
    nodes.push_back(Node(mib[i].first, mib[i].second, i == 0 ? std::vector<size_t>{} : std::vector<size_t>{i - 1}));
  }
  return nodes;
}

TEST(GraphPlanTest, DependencyOrderPutsEveryNodeAfterWhatItDependsOn) {
  // 0 <- 2, 1 <- 2, 3 <- 0: listed out of order, as a driver may list them.
  std::vector<GraphNodeSpec> nodes = {Node(0, 1, {3}), Node(1, 2, {2}), Node(2, 3), Node(3, 4, {2})};
  const std::vector<size_t> order = DependencyOrder(nodes);
  ASSERT_EQ(order.size(), 4u);
  std::vector<size_t> position(4);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t d : nodes[i].deps)
      EXPECT_LT(position[d], position[i]) << "node " << i << " before its dependency " << d;
  }
  EXPECT_EQ(order, (std::vector<size_t>{2, 1, 3, 0}));  // among ready nodes, the lowest index first
}

TEST(GraphPlanTest, ACycleOrABadDependencyHasNoOrder) {
  EXPECT_TRUE(DependencyOrder({Node(0, 1, {1}), Node(1, 2, {0})}).empty());
  EXPECT_TRUE(DependencyOrder({Node(0, 1, {5})}).empty());
  EXPECT_TRUE(DependencyOrder({Node(0, 1, {0})}).empty());
}

TEST(GraphPlanTest, AGraphWhoseDataFitsIsOneSegmentOfEveryNode) {
  const GraphPlan plan = PlanGraph(Chain({{0, 4}, {2, 6}, {8, 10}}), 64 * kMiB);
  EXPECT_FALSE(plan.split);
  ASSERT_EQ(plan.segments.size(), 1u);
  EXPECT_EQ(plan.segments[0].nodes, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(plan.segments[0].regions.size(), 3u);
  EXPECT_EQ(plan.bytes, 8 * kMiB);  // [0,6) and [8,10): the overlap counted once
  EXPECT_EQ(plan.segments[0].bytes, plan.bytes);
}

TEST(GraphPlanTest, AGraphLargerThanTheBudgetIsSplitIntoSegmentsOfHalfTheBudget) {
  // Six 16 MiB buffers (96 MiB) under a 64 MiB budget: segments of at most 32 MiB.
  std::vector<std::pair<uint64_t, uint64_t>> bufs;
  for (uint64_t i = 0; i < 6; ++i) bufs.push_back({16 * i, 16 * i + 16});
  const GraphPlan plan = PlanGraph(Chain(bufs), 64 * kMiB);
  EXPECT_TRUE(plan.split);
  EXPECT_EQ(plan.bytes, 96 * kMiB);
  ASSERT_EQ(plan.segments.size(), 3u);
  std::vector<size_t> all;
  for (const GraphSegment& s : plan.segments) {
    EXPECT_LE(s.bytes, 32 * kMiB);
    all.insert(all.end(), s.nodes.begin(), s.nodes.end());
  }
  EXPECT_EQ(all, (std::vector<size_t>{0, 1, 2, 3, 4, 5})) << "every node once, in dependency order";
}

TEST(GraphPlanTest, ANodeLargerThanASegmentIsASegmentByItself) {
  const GraphPlan plan = PlanGraph(Chain({{0, 4}, {10, 50}, {60, 62}}), 32 * kMiB);
  ASSERT_TRUE(plan.split);
  ASSERT_EQ(plan.segments.size(), 3u);
  EXPECT_EQ(plan.segments[1].nodes, (std::vector<size_t>{1}));
  EXPECT_EQ(plan.segments[1].bytes, 40 * kMiB);
}

TEST(GraphPlanTest, NodesWithoutDataJoinTheSegmentTheyFallIn) {
  const GraphPlan plan = PlanGraph(Chain({{0, 20}, {0, 0}, {20, 40}, {0, 0}}), 32 * kMiB);
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.segments[0].nodes, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan.segments[1].nodes, (std::vector<size_t>{2, 3}));
}

TEST(GraphPlanTest, AGraphWithANodeThatCannotBeDisabledIsNeverSplit) {
  std::vector<GraphNodeSpec> nodes = Chain({{0, 30}, {30, 60}, {60, 90}});
  nodes[1].can_disable = false;  // a host or event node would run once per segment
  const GraphPlan plan = PlanGraph(nodes, 64 * kMiB);
  EXPECT_FALSE(plan.split);
  ASSERT_EQ(plan.segments.size(), 1u);
  EXPECT_EQ(plan.segments[0].nodes.size(), 3u);
}

TEST(GraphPlanTest, AGraphWithoutADependencyOrderIsNeverSplit) {
  std::vector<GraphNodeSpec> nodes = Chain({{0, 30}, {30, 60}, {60, 90}});
  nodes[0].deps = {2};  // a cycle
  EXPECT_FALSE(PlanGraph(nodes, 64 * kMiB).split);
}

TEST(GraphPlanTest, AnUnknownBudgetPlansTheWholeGraph) {
  const GraphPlan plan = PlanGraph(Chain({{0, 300}, {300, 600}}), 0);
  EXPECT_FALSE(plan.split);
  EXPECT_EQ(plan.segments.size(), 1u);
}

}  // namespace
}  // namespace msched

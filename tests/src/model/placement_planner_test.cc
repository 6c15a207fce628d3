#include "model/placement_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace msched {
namespace {

// Minimum loads over every choice of victims: exhaustive search.
uint64_t BruteForceMinLoads(uint64_t capacity, std::set<ChunkId> resident, const std::vector<AccessStep>& future,
                            size_t step = 0, size_t pos = 0) {
  if (step == future.size()) return 0;
  if (pos == future[step].size()) return BruteForceMinLoads(capacity, resident, future, step + 1, 0);
  const ChunkId c = future[step][pos];
  if (resident.count(c)) return BruteForceMinLoads(capacity, resident, future, step, pos + 1);
  if (resident.size() < capacity) {
    resident.insert(c);
    return 1 + BruteForceMinLoads(capacity, resident, future, step, pos + 1);
  }
  uint64_t best = UINT64_MAX;
  const std::set<ChunkId> pinned(future[step].begin(), future[step].end());
  for (ChunkId v : resident) {
    if (pinned.count(v)) continue;
    std::set<ChunkId> next = resident;
    next.erase(v);
    next.insert(c);
    best = std::min(best, 1 + BruteForceMinLoads(capacity, next, future, step, pos + 1));
  }
  return best;
}

std::vector<AccessStep> RandomFuture(std::mt19937& rng, int steps, int universe, int max_step, uint64_t capacity) {
  std::vector<AccessStep> f;
  for (int s = 0; s < steps; ++s) {
    AccessStep step;
    const int n = 1 + static_cast<int>(rng() % std::min<uint64_t>(max_step, capacity));
    while (static_cast<int>(step.size()) < n) {
      const ChunkId c = rng() % universe;
      if (std::find(step.begin(), step.end(), c) == step.end()) step.push_back(c);
    }
    f.push_back(step);
  }
  return f;
}

TEST(PlacementPlannerTest, OptEqualsBruteForceOnSmallCases) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const uint64_t capacity = 2 + rng() % 2;
    PlannerInput in;
    in.capacity = capacity;
    in.future = RandomFuture(rng, 3 + rng() % 5, 5, 2, capacity);
    for (ChunkId c = 0; c < capacity; ++c) {
      if (rng() % 2) in.resident.push_back(c + 2);
    }
    const Plan opt = PlanOpt(in);
    const std::set<ChunkId> resident(in.resident.begin(), in.resident.end());
    EXPECT_EQ(opt.loads, BruteForceMinLoads(capacity, resident, in.future)) << "trial " << trial;
    EXPECT_EQ(opt.unserved, 0u);
  }
}

TEST(PlacementPlannerTest, OptNeverMissesMoreThanLru) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    PlannerInput in;
    in.capacity = 4 + rng() % 8;
    in.future = RandomFuture(rng, 50 + rng() % 100, 30, 4, in.capacity);
    const Plan opt = PlanOpt(in);
    const Plan lru = PlanLru(in);
    EXPECT_LE(opt.loads, lru.loads) << "trial " << trial;
  }
}

TEST(PlacementPlannerTest, CyclicScanShowsWhyOptBeatsLru) {
  // A cyclic scan of 5 chunks through room for 4: LRU always evicts the
  // chunk needed next (every access misses); OPT keeps most of the cycle.
  PlannerInput in;
  in.capacity = 4;
  for (int round = 0; round < 10; ++round) {
    for (ChunkId c = 0; c < 5; ++c) in.future.push_back({c});
  }
  EXPECT_EQ(PlanLru(in).loads, 50u);
  EXPECT_LT(PlanOpt(in).loads, 20u);
}

TEST(PlacementPlannerTest, HonoursPromisesPerStep) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    PlannerInput in;
    in.capacity = 3 + rng() % 5;
    in.future = RandomFuture(rng, 40, 20, 6, 8);  // some steps exceed capacity
    for (const Plan& plan : {PlanOpt(in), PlanLru(in)}) {
      std::set<ChunkId> resident;
      for (size_t s = 0; s < in.future.size(); ++s) {
        const StepPlan& sp = plan.steps[s];
        for (ChunkId v : sp.evict) {
          ASSERT_TRUE(resident.count(v));
          EXPECT_EQ(std::count(in.future[s].begin(), in.future[s].end(), v), 0) << "evicted a chunk of its own step";
          resident.erase(v);
        }
        for (ChunkId l : sp.load) resident.insert(l);
        EXPECT_LE(resident.size(), in.capacity);
        const uint64_t want = in.future[s].size();
        if (want <= in.capacity) {
          EXPECT_TRUE(sp.unserved.empty());
          for (ChunkId c : in.future[s]) EXPECT_TRUE(resident.count(c));
        } else {
          EXPECT_EQ(sp.unserved.size(), want - in.capacity);
        }
      }
    }
  }
}

TEST(PlacementPlannerTest, ShedsExcessResidencyFirst) {
  PlannerInput in;
  in.capacity = 2;
  in.resident = {10, 11, 12, 13};
  in.future = {{12}};
  Plan p = PlanOpt(in);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].evict.size(), 2u);
  EXPECT_TRUE(p.steps[0].load.empty());
  // Chunk 12, needed next, is kept.
  EXPECT_EQ(std::count(p.steps[0].evict.begin(), p.steps[0].evict.end(), 12), 0);

  in.future.clear();
  Plan empty = PlanOpt(in);
  ASSERT_EQ(empty.steps.size(), 1u);
  EXPECT_EQ(empty.steps[0].evict, (std::vector<ChunkId>{10, 11}));  // oldest first
}

TEST(PlacementPlannerTest, SizedChunksRespectByteCapacity) {
  PlannerInput in;
  in.capacity = 100;
  in.size = {{1, 60}, {2, 30}, {3, 50}, {4, 10}};
  in.resident = {1, 2};  // 90 of 100 used
  in.future = {{4}, {3}, {2}};
  Plan p = PlanOpt(in);
  // 4 (10) fits beside 1 and 2; 3 (50) needs 1, never used again, to go.
  EXPECT_TRUE(p.steps[0].evict.empty());
  EXPECT_EQ(p.steps[1].evict, (std::vector<ChunkId>{1}));
  EXPECT_EQ(p.steps[1].load, (std::vector<ChunkId>{3}));
  EXPECT_TRUE(p.steps[2].load.empty());
  // With 1 pinned by the same step, evicting 2 still leaves no room for 3.
  in.future = {{1, 3}};
  Plan q = PlanOpt(in);
  EXPECT_EQ(q.steps[0].evict, (std::vector<ChunkId>{2}));
  EXPECT_EQ(q.steps[0].unserved, (std::vector<ChunkId>{3}));
}

TEST(PlacementPlannerTest, OptPrefersVictimsNeverUsedAgain) {
  PlannerInput in;
  in.capacity = 3;
  in.resident = {1, 2, 3};  // 1 is least recently used
  in.future = {{4}, {1}, {2}};
  Plan p = PlanOpt(in);
  EXPECT_EQ(p.steps[0].evict, (std::vector<ChunkId>{3}));
  Plan l = PlanLru(in);
  EXPECT_EQ(l.steps[0].evict, (std::vector<ChunkId>{1}));
}

}  // namespace
}  // namespace msched

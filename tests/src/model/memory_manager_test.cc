#include "model/memory_manager.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::vector<PredictedRegion> Regions(std::initializer_list<ByteRange> ranges) {
  std::vector<PredictedRegion> out;
  for (const ByteRange& r : ranges) out.push_back({r, AccessMode::kRead});
  return out;
}

// Five 2 MiB layers, each its own allocation.
constexpr uint64_t kStreamLayers = 5;
uint64_t LayerBase(uint64_t l) { return 0x10000000 + l * 0x1000000; }
void AddLayers(MemoryManager& mm) {
  for (uint64_t l = 0; l < kStreamLayers; ++l) EXPECT_TRUE(mm.AddAllocation(LayerBase(l), 2 * kMiB).ok());
}
// Runs `passes` passes over the layers in order; `visit(pass, base)` makes
// one layer's launches and returns the bytes they loaded. Gives the 2 MiB
// chunks loaded per pass.
template <typename Visit>
std::vector<uint64_t> ChunksLoadedPerPass(uint64_t passes, Visit visit) {
  std::vector<uint64_t> out;
  for (uint64_t pass = 0; pass < passes; ++pass) {
    uint64_t bytes = 0;
    for (uint64_t l = 0; l < kStreamLayers; ++l) bytes += visit(pass, LayerBase(l));
    out.push_back(bytes / (2 * kMiB));
  }
  return out;
}

class MemoryManagerTest : public ::testing::Test {
 protected:
  // Three 8 MiB managed allocations (4 chunks each) and a 16 MiB budget.
  MemoryManagerTest() : mm_(16 * kMiB) {
    for (uint64_t base : {a_, b_, c_}) EXPECT_TRUE(mm_.AddAllocation(base, 8 * kMiB).ok());
  }
  // Loads exactly the predicted units: these tests are about what is
  // planned and evicted (MemoryManagerUnitsTest has the widening).
  MemoryActions Access(std::initializer_list<ByteRange> ranges) {
    MemoryActions act;
    mm_.PlanAccess(Regions(ranges), ++seq_, &act, MemoryManager::Granularity::kPredicted);
    return act;
  }
  MemoryManager mm_;
  const uint64_t a_ = 0x10000000, b_ = 0x20000000, c_ = 0x30000000;
  uint64_t seq_ = 0;
};

TEST_F(MemoryManagerTest, LoadsWhatIsMissingOnceAndNothingOnTheCommonPath) {
  MemoryActions first = Access({{a_, a_ + 8 * kMiB}});
  EXPECT_TRUE(first.evict.empty());
  ASSERT_EQ(first.load.size(), 1u);  // four adjacent chunks merged
  EXPECT_EQ(first.load[0], (ByteRange{a_, a_ + 8 * kMiB}));
  EXPECT_EQ(first.load_bytes, 8 * kMiB);
  EXPECT_EQ(mm_.resident_bytes(), 8 * kMiB);
  EXPECT_TRUE(Access({{a_, a_ + 8 * kMiB}}).empty());
  EXPECT_TRUE(Access({{a_ + 4096, a_ + 8192}}).empty());
}

TEST_F(MemoryManagerTest, ChunksOnlyReadAreAdvisedReadMostlyUntilALaunchWritesThem) {
  const ByteRange a0{a_, a_ + 2 * kMiB};
  EXPECT_EQ(Access({{a_, a_ + kMiB}}).read_mostly_on, std::vector<ByteRange>{a0}) << "read, never written";
  EXPECT_TRUE(Access({{a_, a_ + kMiB}}).empty()) << "advised once";
  MemoryActions write;
  mm_.PlanAccess({{{a_, a_ + 4096}, AccessMode::kReadWrite}}, ++seq_, &write);
  EXPECT_EQ(write.read_mostly_off, std::vector<ByteRange>{a0}) << "a write takes the advice back first";
  EXPECT_TRUE(write.read_mostly_on.empty());
  for (uint32_t i = 1; i < 4; ++i) EXPECT_TRUE(Access({{a_, a_ + kMiB}}).read_mostly_on.empty()) << i;
  EXPECT_EQ(Access({{a_, a_ + kMiB}}).read_mostly_on, (std::vector<ByteRange>{{a_, a_ + 8 * kMiB}}))
      << "four launches read the allocation since the write: all of it, read yet or not";
  // Written and read in turn (activations): never advised.
  for (int i = 0; i < 10; ++i) {
    MemoryActions w;
    mm_.PlanAccess({{{b_, b_ + kMiB}, AccessMode::kWrite}}, ++seq_, &w);
    MemoryActions r = Access({{b_, b_ + kMiB}});
    EXPECT_TRUE(r.read_mostly_on.empty() && w.read_mostly_on.empty() && w.read_mostly_off.empty());
  }
}

TEST_F(MemoryManagerTest, AdviceGoesByChunkSoWeightsBesideActivationsInOneSegmentAreAdvised) {
  // One caching-allocator segment: weights in its first 6 MiB, read by
  // every launch; an activation in its last 2 MiB, written and read.
  std::vector<ByteRange> advised;
  MemoryActions init;  // the weights are written first
  mm_.PlanAccess({{{a_, a_ + 6 * kMiB}, AccessMode::kWrite}}, ++seq_, &init);
  for (int i = 0; i < 6; ++i) {
    MemoryActions act;
    mm_.PlanAccess({{{a_, a_ + 6 * kMiB}, AccessMode::kRead}, {{a_ + 6 * kMiB, a_ + 7 * kMiB}, AccessMode::kWrite}},
                   ++seq_, &act, MemoryManager::Granularity::kPredicted);
    EXPECT_TRUE(act.read_mostly_off.empty());
    advised.insert(advised.end(), act.read_mostly_on.begin(), act.read_mostly_on.end());
  }
  EXPECT_EQ(advised, (std::vector<ByteRange>{{a_, a_ + 6 * kMiB}})) << "three chunks, merged into one range";
}

TEST_F(MemoryManagerTest, ALaunchThatReadsAChunkThroughOneRegionAndWritesItThroughAnotherNeverAdvisesIt) {
  MemoryActions act;
  mm_.PlanAccess({{{a_, a_ + kMiB}, AccessMode::kRead}, {{a_ + kMiB, a_ + 2 * kMiB}, AccessMode::kWrite}}, ++seq_, &act,
                 MemoryManager::Granularity::kPredicted);
  EXPECT_TRUE(act.read_mostly_on.empty() && act.read_mostly_off.empty());
}

TEST_F(MemoryManagerTest, LoadsNeverSpanTwoAllocationsThatTouch) {
  const uint64_t c = 0x40000000, d = c + 2 * kMiB;  // d starts where c ends
  EXPECT_TRUE(mm_.AddAllocation(c, 2 * kMiB).ok());
  EXPECT_TRUE(mm_.AddAllocation(d, 2 * kMiB).ok());
  MemoryActions act = Access({{c, d + 2 * kMiB}});
  const std::vector<ByteRange> two = {ByteRange{c, d}, ByteRange{d, d + 2 * kMiB}};
  EXPECT_EQ(act.load, two);
}

TEST_F(MemoryManagerTest, ForgoingReadMostlyTakesTheAdviceBackAndNeverGivesItAgain) {
  Access({{a_, a_ + kMiB}});  // a's first chunk is now read-mostly
  MemoryActions forgo;
  mm_.ForgoReadMostly(&forgo);
  const std::vector<ByteRange> a0 = {ByteRange{a_, a_ + 2 * kMiB}};
  EXPECT_EQ(forgo.read_mostly_off, a0);
  EXPECT_TRUE(forgo.evict.empty() && forgo.load.empty());
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(Access({{a_, a_ + kMiB}}).read_mostly_on.empty()) << i;
    EXPECT_TRUE(Access({{b_, b_ + kMiB}}).read_mostly_on.empty()) << i;
  }
  MemoryActions again;
  mm_.ForgoReadMostly(&again);
  EXPECT_TRUE(again.empty());
}

TEST_F(MemoryManagerTest, StaysWithinBudgetEvictingLeastRecentlyUsedWithoutAFuture) {
  Access({{a_, a_ + 8 * kMiB}});
  Access({{b_, b_ + 8 * kMiB}});
  Access({{a_, a_ + 8 * kMiB}});  // a is now the most recently used
  MemoryActions act = Access({{c_, c_ + 8 * kMiB}});
  ASSERT_EQ(act.evict.size(), 1u);
  EXPECT_EQ(act.evict[0], (ByteRange{b_, b_ + 8 * kMiB}));
  EXPECT_EQ(act.load_bytes, 8 * kMiB);
  EXPECT_EQ(mm_.resident_bytes(), 16 * kMiB);
  EXPECT_EQ(act.evict_after, 2u) << "b's last launch was never seen to complete";
}

TEST_F(MemoryManagerTest, EvictsByOptWhenTheFutureIsKnown) {
  Access({{a_, a_ + 8 * kMiB}});
  Access({{b_, b_ + 8 * kMiB}});
  mm_.MarkCompleted(seq_);
  // Next slices use b, then a: when c comes in, a (needed later) goes, not
  // b, although a was used longer ago than b... and LRU would choose a too;
  // make the future say the opposite of recency.
  mm_.SetFuture({{{a_, a_ + 8 * kMiB}}, {{b_, b_ + 8 * kMiB}}});
  MemoryActions act = Access({{c_, c_ + 8 * kMiB}});
  ASSERT_EQ(act.evict.size(), 1u);
  EXPECT_EQ(act.evict[0], (ByteRange{b_, b_ + 8 * kMiB}));
  EXPECT_EQ(act.evict_after, 0u);
}

TEST(MemoryManagerRecurrenceTest, ACyclicStreamKeepsMostOfItselfOnceItRecurs) {
  // Five 2 MiB layers streamed in order, again and again, through room for
  // four: LRU reloads every layer every pass; predicting each layer's return
  // from its reuse interval keeps three of them resident from pass 3 on.
  // In pass 2 the layers still resident were used once, but the first two
  // layers' launches repeat pass 1's exactly and agree on the loop's length
  // (5 launches), which predicts the others' return: only those two load
  // (LRU would load all 5).
  MemoryManager mm(8 * kMiB);
  AddLayers(mm);
  uint64_t seq = 0;
  const std::vector<uint64_t> loads_per_pass = ChunksLoadedPerPass(6, [&](uint64_t, uint64_t base) {
    MemoryActions act;
    mm.PlanAccess(Regions({{base, base + 2 * kMiB}}), ++seq, &act);
    return act.load_bytes;
  });
  EXPECT_EQ(loads_per_pass[0], 5u);
  EXPECT_EQ(loads_per_pass[1], 2u) << "the loop's length is known from the second reuse on";
  for (int pass = 2; pass < 6; ++pass) EXPECT_LE(loads_per_pass[pass], 2u) << "pass " << pass;
}

TEST(MemoryManagerRecurrenceTest, ASecondPassByOtherLaunchesIsNoLoop) {
  // The same five layers written in order (initialisation, or a forward pass
  // writing activations), then read in order by other launches: the second
  // uses are no repeat of the first launches, so no loop length is inferred
  // and the layers used once go least recently used first (a backward pass
  // would want the oldest last): every read misses, as under LRU (OPT would
  // load one fewer; this guards against taking the reads for a loop).
  MemoryManager mm(8 * kMiB);
  AddLayers(mm);
  uint64_t seq = 0;
  const std::vector<uint64_t> loads_per_pass = ChunksLoadedPerPass(2, [&](uint64_t pass, uint64_t base) {
    MemoryActions act;
    mm.PlanAccess({{{base, base + 2 * kMiB}, pass == 0 ? AccessMode::kWrite : AccessMode::kRead}}, ++seq, &act);
    return act.load_bytes;
  });
  EXPECT_EQ(loads_per_pass[1], 5u);
}

TEST(MemoryManagerRecurrenceTest, ALoopingTrainingStepLoadsWhatOptWouldOnceTheLoopIsKnown) {
  // Six layers of weights W, activations A and gradients G (2 MiB each),
  // room for 8 chunks: forward reads W[l] and writes A[l]; backward, in
  // reverse, reads A[l] and W[l] and writes G[l]; the optimizer reads G[l]
  // and updates W[l]. A chunk comes back after distances that differ per
  // layer and per pass, so its own reuse interval mispredicts (29 loads a
  // step, against OPT's 20); once the steps repeat, the loop length (18
  // launches) predicts every use exactly, and from the third step on each
  // step loads what Belady's OPT over the whole run loads in that step.
  constexpr uint64_t kLayers = 6, kSteps = 6;
  MemoryManager mm(8 * 2 * kMiB);
  auto w = LayerBase;
  auto a = [](uint64_t l) { return 0x40000000 + l * 0x1000000; };
  auto g = [](uint64_t l) { return 0x80000000 + l * 0x1000000; };
  for (uint64_t l = 0; l < kLayers; ++l) {
    for (uint64_t base : {w(l), a(l), g(l)}) EXPECT_TRUE(mm.AddAllocation(base, 2 * kMiB).ok());
  }
  auto whole = [](uint64_t base, AccessMode mode) { return PredictedRegion{{base, base + 2 * kMiB}, mode}; };
  // The same run as planner steps over chunk ids (W[l] = l, A[l] = 100 + l,
  // G[l] = 200 + l).
  std::vector<std::vector<PredictedRegion>> launches;
  PlannerInput opt_input;
  opt_input.capacity = 8;
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (uint64_t l = 0; l < kLayers; ++l) {
      launches.push_back({whole(w(l), AccessMode::kRead), whole(a(l), AccessMode::kWrite)});
      opt_input.future.push_back({l, 100 + l});
    }
    for (uint64_t l = kLayers; l-- > 0;) {
      launches.push_back(
          {whole(a(l), AccessMode::kRead), whole(w(l), AccessMode::kRead), whole(g(l), AccessMode::kWrite)});
      opt_input.future.push_back({100 + l, l, 200 + l});
    }
    for (uint64_t l = 0; l < kLayers; ++l) {
      launches.push_back({whole(g(l), AccessMode::kRead), whole(w(l), AccessMode::kReadWrite)});
      opt_input.future.push_back({200 + l, l});
    }
  }
  const Plan opt = PlanOpt(opt_input);
  const size_t per_step = 3 * kLayers;
  uint64_t seq = 0;
  for (uint64_t step = 0; step < kSteps; ++step) {
    uint64_t loaded = 0, opt_loaded = 0;
    for (size_t i = step * per_step; i < (step + 1) * per_step; ++i) {
      MemoryActions act;
      mm.PlanAccess(launches[i], ++seq, &act);
      loaded += act.load_bytes / (2 * kMiB);
      opt_loaded += opt.steps[i].load.size();
    }
    if (step >= 2) {
      EXPECT_EQ(loaded, opt_loaded) << "step " << step;
    }
  }
}

TEST(MemoryManagerRecurrenceTest, ALoopEstimatedTooShortLeavesTheOwnIntervalToPredict) {
  // Each layer's launch is followed by one on the same scratch buffer: those
  // repeat every 2 launches and set a loop of 2, while the layers' launches
  // never repeat exactly (they also read a prefix that grows every pass, as
  // a KV cache does). The layers come back every 10 launches, outside that
  // loop: their own reuse interval must still predict them, or they would
  // go least recently used first and every layer would miss every pass.
  MemoryManager mm(5 * 2 * kMiB);  // the scratch, the prefix and 3 of the 5 layers
  const uint64_t scratch = 0x70000000, prefix = 0x60000000;
  EXPECT_TRUE(mm.AddAllocation(scratch, 2 * kMiB).ok());
  EXPECT_TRUE(mm.AddAllocation(prefix, 2 * kMiB).ok());
  AddLayers(mm);
  uint64_t seq = 0;
  const std::vector<uint64_t> loads_per_pass = ChunksLoadedPerPass(6, [&](uint64_t pass, uint64_t base) {
    MemoryActions act, scratch_act;
    mm.PlanAccess(Regions({{base, base + 2 * kMiB}, {prefix, prefix + (pass + 1) * 4096}}), ++seq, &act);
    mm.PlanAccess({{{scratch, scratch + 2 * kMiB}, AccessMode::kReadWrite}}, ++seq, &scratch_act);
    return act.load_bytes + scratch_act.load_bytes;
  });
  for (size_t pass = 2; pass < loads_per_pass.size(); ++pass) EXPECT_LE(loads_per_pass[pass], 3u) << "pass " << pass;
}

TEST(MemoryManagerRecurrenceTest, ChunksUsedEveryLaunchAreKept) {
  MemoryManager mm(4 * kMiB);
  const uint64_t hot = 0x10000000;
  EXPECT_TRUE(mm.AddAllocation(hot, 2 * kMiB).ok());
  for (uint64_t l = 0; l < 4; ++l) EXPECT_TRUE(mm.AddAllocation(0x20000000 + l * 0x1000000, 2 * kMiB).ok());
  uint64_t seq = 0, hot_reloads = 0;
  for (int pass = 0; pass < 5; ++pass) {
    for (uint64_t l = 0; l < 4; ++l) {
      const uint64_t cold = 0x20000000 + l * 0x1000000;
      MemoryActions act;
      mm.PlanAccess(Regions({{hot, hot + 2 * kMiB}, {cold, cold + 2 * kMiB}}), ++seq, &act);
      for (const ByteRange& r : act.load) hot_reloads += r.begin == hot;
    }
  }
  EXPECT_EQ(hot_reloads, 1u);
}

TEST_F(MemoryManagerTest, NeverEvictsTheLaunchsOwnChunksAndReportsTheExcess) {
  mm_.set_budget(4 * kMiB);
  MemoryActions act = Access({{a_, a_ + 8 * kMiB}});
  EXPECT_EQ(act.load_bytes, 4 * kMiB);
  EXPECT_EQ(act.unserved_bytes, 4 * kMiB);
  EXPECT_TRUE(act.evict.empty());
  EXPECT_EQ(act.load[0].begin, a_);  // access order: the first chunks first
}

TEST_F(MemoryManagerTest, WhatALaunchFaultsInCountsAsHeldAndTheNextPlanShedsTheExcess) {
  mm_.set_budget(4 * kMiB);
  Access({{a_, a_ + 8 * kMiB}});
  EXPECT_EQ(mm_.resident_bytes(), 8 * kMiB) << "the unserved half faults in: the job holds it";
  // The next launch needs 2 MiB already there: the plan still gives back what
  // the faults put over the budget, and never the launch's own chunk.
  const MemoryActions act = Access({{a_, a_ + 2 * kMiB}});
  EXPECT_EQ(act.evict_bytes, 4 * kMiB);
  EXPECT_LE(mm_.resident_bytes(), 4 * kMiB);
  for (const ByteRange& r : act.evict) EXPECT_GE(r.begin, a_ + 2 * kMiB) << "the launch's own chunk stays";
}

TEST_F(MemoryManagerTest, EvictAllNamesEveryAllocationWholeWhateverItKnowsResident) {
  Access({{a_, a_ + 2 * kMiB}});
  MemoryActions act;
  mm_.PlanEvictAll(&act);
  EXPECT_EQ(act.evict_bytes, 2 * kMiB) << "what it knew";
  EXPECT_EQ(act.evict, (std::vector<ByteRange>{{a_, a_ + 8 * kMiB}, {b_, b_ + 8 * kMiB}, {c_, c_ + 8 * kMiB}}))
      << "every allocation, though only one was ever planned";
  EXPECT_EQ(mm_.resident_bytes(), 0u);
  EXPECT_EQ(Access({{a_, a_ + 2 * kMiB}}).load_bytes, 2 * kMiB) << "loaded again when next needed";
}

TEST_F(MemoryManagerTest, IgnoresUnmanagedMemoryAndForgetsFreedAllocations) {
  EXPECT_TRUE(Access({{0x40000000, 0x40000000 + kMiB}}).empty());
  Access({{a_, a_ + 8 * kMiB}});
  EXPECT_TRUE(mm_.RemoveAllocation(a_).ok());
  EXPECT_EQ(mm_.resident_bytes(), 0u);
  EXPECT_TRUE(Access({{a_, a_ + kMiB}}).empty());
  EXPECT_EQ(mm_.managed_bytes(), 16 * kMiB);
}

TEST_F(MemoryManagerTest, UnalignedSmallAllocationsDoNotCollide) {
  MemoryManager mm(64 * kMiB);
  EXPECT_TRUE(mm.AddAllocation(0x1000, 0x1000).ok());
  EXPECT_TRUE(mm.AddAllocation(0x3000, 0x1000).ok());  // same 2 MiB block as the first
  MemoryActions act;
  mm.PlanAccess(Regions({{0x1000, 0x2000}, {0x3000, 0x4000}}), 1, &act);
  ASSERT_EQ(act.load.size(), 2u);
  EXPECT_EQ(act.load[0], (ByteRange{0x1000, 0x2000}));
  EXPECT_EQ(act.load[1], (ByteRange{0x3000, 0x4000}));
  EXPECT_EQ(mm.resident_bytes(), 0x2000u);
}

TEST_F(MemoryManagerTest, PlansEvictionOfWhatIsNeededLast) {
  Access({{a_, a_ + 8 * kMiB}});
  Access({{b_, b_ + 8 * kMiB}});
  mm_.SetFuture({{{b_, b_ + 8 * kMiB}}});
  MemoryActions act;
  mm_.PlanEviction(8 * kMiB, &act);
  ASSERT_EQ(act.evict.size(), 1u);
  EXPECT_EQ(act.evict[0], (ByteRange{a_, a_ + 8 * kMiB}));
  MemoryActions all;
  mm_.PlanEviction(UINT64_MAX, &all);
  EXPECT_EQ(all.evict_bytes, 8 * kMiB);
  EXPECT_EQ(mm_.resident_bytes(), 0u);
}

TEST_F(MemoryManagerTest, WorkingSetIsTheChunksUsedInFirstUseOrder) {
  Access({{b_, b_ + 2 * kMiB}});
  Access({{a_, a_ + 4 * kMiB}});
  Access({{b_, b_ + 2 * kMiB}});
  std::vector<ByteRange> ws = mm_.TakeWorkingSet();
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0], (ByteRange{b_, b_ + 2 * kMiB}));
  EXPECT_EQ(ws[1], (ByteRange{a_, a_ + 4 * kMiB}));
  EXPECT_TRUE(mm_.TakeWorkingSet().empty());
  Access({{b_, b_ + 2 * kMiB}});  // a new working set lists again a chunk the last one held
  EXPECT_EQ(mm_.TakeWorkingSet(), (std::vector<ByteRange>{{b_, b_ + 2 * kMiB}}));
  MemoryActions act;
  mm_.PlanEviction(UINT64_MAX, &act);
  MemoryActions back;
  mm_.PlanLoad(ws, &back);
  EXPECT_EQ(back.load_bytes, 6 * kMiB);
  // Loading is no use: the launches after it make the next working set.
  Access({{a_, a_ + 2 * kMiB}});
  Access({{b_, b_ + 2 * kMiB}});
  EXPECT_EQ(mm_.TakeWorkingSet(), (std::vector<ByteRange>{{a_, a_ + 2 * kMiB}, {b_, b_ + 2 * kMiB}}));
}

TEST_F(MemoryManagerTest, RegionsSharingAChunkLoadItsUnitsOnceAndListItOnce) {
  MemoryActions act = Access({{a_, a_ + 64 * 1024}, {a_ + kMiB, a_ + kMiB + 64 * 1024}, {a_, a_ + 64 * 1024}});
  EXPECT_EQ(act.load_bytes, 128 * 1024u);  // both regions' units, the repeated one once
  EXPECT_EQ(act.load, (std::vector<ByteRange>{{a_, a_ + 64 * 1024}, {a_ + kMiB, a_ + kMiB + 64 * 1024}}));
  EXPECT_TRUE(Access({{a_ + kMiB, a_ + kMiB + 64 * 1024}, {a_, a_ + 64 * 1024}}).load.empty());
  EXPECT_EQ(mm_.TakeWorkingSet(), (std::vector<ByteRange>{{a_, a_ + 2 * kMiB}}));
}

TEST(MemoryManagerUnitsTest, SparsePrefixesLoadOnlyTheUnitsTheyTouch) {
  // Eight 2 MiB KV caches of which each launch reads only the first 4 KiB:
  // 64 KiB each is loaded, so all eight fit a 1 MiB budget without eviction.
  MemoryManager mm(1 * kMiB);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(mm.AddAllocation(0x10000000 + i * 0x1000000, 2 * kMiB).ok());
  uint64_t loaded = 0, evicted = 0;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 8; ++i) {
      const uint64_t base = 0x10000000 + i * 0x1000000;
      MemoryActions act;
      mm.PlanAccess(Regions({{base, base + 4096}}), round * 8 + i + 1, &act);
      loaded += act.load_bytes;
      evicted += act.evict_bytes;
      if (!act.load.empty()) {
        EXPECT_EQ(act.load[0], (ByteRange{base, base + 64 * 1024}));
      }
    }
  }
  EXPECT_EQ(loaded, 8 * 64 * 1024u);
  EXPECT_EQ(evicted, 0u);
  EXPECT_EQ(mm.resident_bytes(), 8 * 64 * 1024u);
}

TEST(MemoryManagerUnitsTest, GrowingAChunkLoadsOnlyTheNewUnitsAndTailsAreExact) {
  MemoryManager mm(64 * kMiB);
  EXPECT_TRUE(mm.AddAllocation(0x1000, 100 * 1024).ok());  // ends inside its second unit
  MemoryActions a, b;
  constexpr auto kPredicted = MemoryManager::Granularity::kPredicted;
  mm.PlanAccess(Regions({{0x1000, 0x1000 + 4096}}), 1, &a, kPredicted);
  EXPECT_EQ(a.load_bytes, 64 * 1024u);
  mm.PlanAccess(Regions({{0x1000, 0x1000 + 100 * 1024}}), 2, &b, kPredicted);
  ASSERT_EQ(b.load.size(), 1u);
  EXPECT_EQ(b.load[0], (ByteRange{0x1000 + 64 * 1024, 0x1000 + 100 * 1024}));
  EXPECT_EQ(mm.resident_bytes(), 100 * 1024u);
}

// With room in the budget, an allocation no plan has touched comes in whole
// at its first launch; later, a chunk a launch lacks anything of comes in
// whole, within its allocation; a chunk whose predicted units are all
// resident moves nothing (the common path); without room for every chunk
// whole, exactly the predicted units; an allocation over
// kMaxWholeAllocation comes in by chunks.
TEST(MemoryManagerUnitsTest, WithRoomLoadsWidenToWholeChunksAndUntouchedAllocations) {
  MemoryManager mm(13 * kMiB);
  const uint64_t a = 0x10000000, b = 0x20000000, c = 0x30000000;
  EXPECT_TRUE(mm.AddAllocation(a, 5 * kMiB).ok());  // two whole chunks and a 1 MiB tail
  MemoryActions first, again, partial, later, tight;
  mm.PlanAccess(Regions({{a + 4096, a + 8192}}), 1, &first);
  EXPECT_EQ(first.load_bytes, 5 * kMiB) << "untouched: the whole allocation, to its end";
  ASSERT_EQ(first.load.size(), 1u);
  EXPECT_EQ(first.load[0], (ByteRange{a, a + 5 * kMiB}));
  mm.PlanAccess(Regions({{a + kMiB, a + kMiB + 64}}), 2, &again);
  EXPECT_TRUE(again.empty()) << "already resident: nothing moves";
  // Touched before, evicted, needed again: by chunks, not whole.
  mm.PlanEviction(UINT64_MAX, &partial);
  mm.PlanAccess(Regions({{a + 2 * kMiB, a + 2 * kMiB + 64}}), 3, &later);
  EXPECT_EQ(later.load_bytes, 2 * kMiB) << "the one chunk, whole";
  // 2 MiB resident of 13: an untouched 8 MiB allocation whole would fit
  // (10), and with it 4 MiB more does not.
  EXPECT_TRUE(mm.AddAllocation(b, 8 * kMiB).ok());
  EXPECT_TRUE(mm.AddAllocation(c, 4 * kMiB).ok());
  MemoryActions both;
  mm.PlanAccess(Regions({{b, b + 64 * 1024}, {c, c + 64 * 1024}}), 4, &both);
  EXPECT_EQ(both.load_bytes, 2 * 2 * kMiB) << "no room for both whole: the two chunks whole";
  mm.PlanAccess(Regions({{b + 6 * kMiB, b + 6 * kMiB + 1}, {c + 2 * kMiB, c + 2 * kMiB + 1}}), 5, &tight);
  EXPECT_EQ(tight.load_bytes, 4 * kMiB) << "room for these two chunks whole (10 of 13)";
  MemoryActions exact;
  mm.PlanAccess(Regions({{b + 2 * kMiB, b + 2 * kMiB + 1}, {b + 4 * kMiB, b + 4 * kMiB + 1}}), 6, &exact);
  EXPECT_EQ(exact.load_bytes, 2 * 64 * 1024u) << "no room for two more chunks whole: the predicted units";
  EXPECT_EQ(exact.evict_bytes, 0u);
  // Past the cap: by chunks even when untouched.
  MemoryManager big(1024 * kMiB);
  EXPECT_TRUE(big.AddAllocation(a, MemoryManager::kMaxWholeAllocation + 2 * kMiB).ok());
  MemoryActions chunk;
  big.PlanAccess(Regions({{a, a + 64}}), 1, &chunk);
  EXPECT_EQ(chunk.load_bytes, 2 * kMiB);
}

TEST_F(MemoryManagerTest, InvalidateUndoesFailedTransfers) {
  MemoryActions act = Access({{a_, a_ + 8 * kMiB}});
  mm_.Invalidate(act);
  EXPECT_EQ(mm_.resident_bytes(), 0u);
  EXPECT_FALSE(Access({{a_, a_ + 2 * kMiB}}).empty()) << "must be loaded again";
}

}  // namespace
}  // namespace msched

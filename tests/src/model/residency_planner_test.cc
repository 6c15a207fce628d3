#include "model/residency_planner.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
using Granularity = ResidencyPlanner::Granularity;

// Three 8 MiB allocations (4 chunks each) and a 16 MiB budget, driven the
// way MemoryManager drives the planner, without it.
class ResidencyPlannerTest : public ::testing::Test {
 protected:
  ResidencyPlannerTest() : planner_(&table_, &predictor_, 16 * kMiB) {
    for (uint64_t base : {a_, b_, c_}) EXPECT_TRUE(table_.Add(base, 8 * kMiB).ok());
  }
  // Launch number `seq` (recorded as a use of what it names) demands
  // `ranges`; plans it. Whether a plan was made.
  bool Launch(std::initializer_list<ByteRange> ranges, uint64_t seq, MemoryActions* out,
              Granularity granularity = Granularity::kPredicted) {
    planner_.BeginDemand();
    bool missing = false;
    for (const ByteRange& r : ranges) {
      table_.ForEachChunk(r, [&](ChunkId id, ChunkState& c, uint32_t units) {
        if (planner_.Need(id, c, units)) {
          c.history.Record(seq);
          c.last_touch = seq;
        }
        missing = missing || (units & ~c.resident) != 0;
      });
    }
    predictor_.NoteLaunch(/*signature=*/seq, seq);  // launches never repeat: no loop
    return planner_.PlanDemand(missing, granularity, out);
  }
  MemoryActions Launch(std::initializer_list<ByteRange> ranges) {
    MemoryActions out;
    Launch(ranges, ++seq_, &out);
    return out;
  }
  ChunkId Id(uint64_t base, size_t i) { return ChunkTable::IdOf(*table_.Find(base), i); }
  static ByteRange Whole(uint64_t base) { return {base, base + 8 * kMiB}; }

  ChunkTable table_;
  NextUsePredictor predictor_;
  ResidencyPlanner planner_;
  const uint64_t a_ = 0x10000000, b_ = 0x20000000, c_ = 0x30000000;
  uint64_t seq_ = 0;
};

TEST_F(ResidencyPlannerTest, NeedNamesEachChunkOnceACallAndGathersItsUnits) {
  ChunkTable::ChunkRef ref;
  ASSERT_TRUE(table_.Lookup(Id(a_, 0), &ref));
  planner_.BeginDemand();
  EXPECT_TRUE(planner_.Need(Id(a_, 0), ref.chunk(), 0b01u));
  EXPECT_FALSE(planner_.Need(Id(a_, 0), ref.chunk(), 0b10u));
  EXPECT_EQ(ref.chunk().need, 0b11u);
  planner_.BeginDemand();
  EXPECT_TRUE(planner_.Need(Id(a_, 0), ref.chunk(), 0b100u)) << "a new call";
  EXPECT_EQ(ref.chunk().need, 0b100u) << "the last call's units are gone";
}

TEST_F(ResidencyPlannerTest, PlansNothingWhenTheDemandIsResidentWithinTheBudget) {
  Launch({Whole(a_)});
  MemoryActions out;
  out.op = 77;
  EXPECT_FALSE(Launch({{a_, a_ + kMiB}}, ++seq_, &out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(out.op, 77u) << "untouched";
}

TEST_F(ResidencyPlannerTest, LoadsWhatTheDemandLacksInAccessOrderAndCountsItResident) {
  const MemoryActions out = Launch({{b_ + 4 * kMiB, b_ + 5 * kMiB}, {a_, a_ + kMiB}});
  const std::vector<ByteRange> expected = {{b_ + 4 * kMiB, b_ + 5 * kMiB}, {a_, a_ + kMiB}};
  EXPECT_EQ(out.load, expected);
  EXPECT_EQ(out.load_bytes, 2 * kMiB);
  EXPECT_EQ(table_.resident_bytes(), 2 * kMiB);
  EXPECT_TRUE(table_.Find(a_)->touched && table_.Find(b_)->touched && !table_.Find(c_)->touched);
}

TEST_F(ResidencyPlannerTest, VictimsWithoutAPredictionGoFirstLeastRecentlyTouchedFirst) {
  Launch({{a_, a_ + 2 * kMiB}});             // 1: a0
  Launch({{b_, b_ + 2 * kMiB}});             // 2: b0, used once: no prediction
  Launch({{c_, c_ + 2 * kMiB}});             // 3: c0, used once: no prediction
  Launch({{a_, a_ + 2 * kMiB}});             // 4: a0 again, 3 later: back at 7
  Launch({{a_ + 2 * kMiB, a_ + 4 * kMiB}});  // 5: a1
  Launch({{a_ + 2 * kMiB, a_ + 4 * kMiB}});  // 6: a1 again, 1 later: back at 7
  // No loop (no launch repeats): each chunk's own interval predicts; a0
  // and a1 tie at 7 and go by chunk id.
  const std::vector<ChunkId> opt = {Id(b_, 0), Id(c_, 0), Id(a_, 0), Id(a_, 1)};
  EXPECT_EQ(planner_.VictimOrder(), opt);
  Launch({{b_, b_ + 2 * kMiB}});  // 7: b0 used twice, 5 apart: back at 12, furthest
  const std::vector<ChunkId> later = {Id(c_, 0), Id(b_, 0), Id(a_, 0), Id(a_, 1)};
  EXPECT_EQ(planner_.VictimOrder(), later);
  planner_.set_eviction_policy(EvictionPolicy::kLru);
  const std::vector<ChunkId> lru = {Id(c_, 0), Id(a_, 0), Id(a_, 1), Id(b_, 0)};
  EXPECT_EQ(planner_.VictimOrder(), lru) << "least recently touched first, predictions ignored";
}

TEST_F(ResidencyPlannerTest, VictimsThatDropFreeGoBeforeThoseThatCostACopy) {
  Launch({{a_, a_ + 2 * kMiB}});             // 1: a0
  Launch({{b_, b_ + 2 * kMiB}});             // 2: b0, used once: no prediction
  Launch({{c_, c_ + 2 * kMiB}});             // 3: c0, used once: no prediction
  Launch({{a_, a_ + 2 * kMiB}});             // 4: a0 again: back at 7
  Launch({{a_ + 2 * kMiB, a_ + 4 * kMiB}});  // 5: a1
  Launch({{a_ + 2 * kMiB, a_ + 4 * kMiB}});  // 6: a1 again: back at 7
  // Read duplicates (advised, every resident unit with its host copy): c0
  // and a1.
  for (ChunkId id : {Id(c_, 0), Id(a_, 1)}) {
    ChunkTable::ChunkRef ref;
    ASSERT_TRUE(table_.Lookup(id, &ref));
    ref.chunk().advised = true;
    ref.chunk().host_copy = ref.chunk().resident;
  }
  const std::vector<ChunkId> unpriced = {Id(b_, 0), Id(c_, 0), Id(a_, 0), Id(a_, 1)};
  EXPECT_EQ(planner_.VictimOrder(), unpriced) << "copies back not priced: by next use alone";
  planner_.set_drop_preference(ResidencyPlanner::kDropPreference);
  const std::vector<ChunkId> priced = {Id(c_, 0), Id(b_, 0), Id(a_, 1), Id(a_, 0)};
  EXPECT_EQ(planner_.VictimOrder(), priced)
      << "without a prediction, a duplicate before older chunks; with one, a duplicate before a chunk needed as soon";
  Launch({{b_, b_ + 2 * kMiB}});             // 7: b0 again, 5 later: back at 12
  Launch({{a_, a_ + 2 * kMiB}});             // 8: a0 again, 4 later: back at 12
  Launch({{a_ + 2 * kMiB, a_ + 4 * kMiB}});  // 9: a1 again, 3 later: back at 12
  // All three come back at 12: the duplicate a1 counts as needed at
  // 9 + 3 * kDropPreference, past the others.
  EXPECT_EQ(planner_.VictimOrder()[1], Id(a_, 1));
  ChunkTable::ChunkRef ref;
  ASSERT_TRUE(table_.Lookup(Id(a_, 1), &ref));
  ref.chunk().host_copy = 0;  // written since: it would cost a copy
  EXPECT_NE(planner_.VictimOrder()[1], Id(a_, 1));
}

TEST_F(ResidencyPlannerTest, EvictingLeavesAHostCopyAndLoadingMovesItUnlessAdvised) {
  MemoryActions out;
  Launch({Whole(a_)});
  ChunkTable::ChunkRef a0, a1;
  ASSERT_TRUE(table_.Lookup(Id(a_, 0), &a0) && table_.Lookup(Id(a_, 1), &a1));
  EXPECT_EQ(a0.chunk().host_copy, 0u) << "first touched on the device: no copy anywhere else";
  planner_.PlanEviction(UINT64_MAX, &out);
  EXPECT_EQ(a0.chunk().host_copy, ChunkTable::AllUnits(*a0.alloc, 0)) << "evicted: the host holds it";
  a1.chunk().advised = true;
  Launch({Whole(a_)});
  EXPECT_EQ(a0.chunk().host_copy, 0u) << "moved in: the driver keeps one copy";
  EXPECT_EQ(a1.chunk().host_copy, ChunkTable::AllUnits(*a1.alloc, 1)) << "advised read-mostly: duplicated";
  EXPECT_TRUE(ResidencyPlanner::Drops(a1.chunk()));
  EXPECT_FALSE(ResidencyPlanner::Drops(a0.chunk()));
}

TEST_F(ResidencyPlannerTest, TheKnownFutureOutranksRecency) {
  Launch({Whole(a_)});
  Launch({Whole(b_)});  // a is the least recently used
  planner_.MarkCompleted(seq_);
  planner_.SetFuture({{Whole(a_)}, {Whole(b_)}});
  const MemoryActions out = Launch({Whole(c_)});
  EXPECT_EQ(out.evict, std::vector<ByteRange>{Whole(b_)}) << "b is needed after a";
  EXPECT_EQ(out.evict_bytes, 8 * kMiB);
  EXPECT_EQ(out.evict_after, 0u) << "b's launches completed";
  EXPECT_EQ(table_.resident_bytes(), 16 * kMiB);
}

TEST_F(ResidencyPlannerTest, EvictionsWaitForTheLastIncompleteLaunchThatUsedAVictim) {
  Launch({Whole(a_)});
  Launch({Whole(b_)});
  planner_.MarkCompleted(1);
  EXPECT_EQ(Launch({Whole(c_)}).evict_after, 0u) << "a's launch (1) completed";
  EXPECT_EQ(Launch({Whole(a_)}).evict_after, 2u) << "b's launch (2) may not have run";
}

TEST_F(ResidencyPlannerTest, ADemandOverTheBudgetGetsWhatFitsAndTheRestFaultsIn) {
  planner_.set_budget(4 * kMiB);
  const MemoryActions out = Launch({Whole(a_)});
  EXPECT_EQ(out.load, (std::vector<ByteRange>{{a_, a_ + 4 * kMiB}})) << "the first chunks, in access order";
  EXPECT_EQ(out.unserved_bytes, 4 * kMiB);
  EXPECT_EQ(table_.resident_bytes(), 8 * kMiB) << "what faults in counts as held";
  // Nothing missing next time, but over the budget: the excess goes, never
  // the demand's own chunk.
  MemoryActions shed;
  ASSERT_TRUE(Launch({{a_, a_ + 2 * kMiB}}, ++seq_, &shed));
  EXPECT_EQ(shed.evict_bytes, 4 * kMiB);
  EXPECT_TRUE(shed.load.empty());
  for (const ByteRange& r : shed.evict) EXPECT_GE(r.begin, a_ + 2 * kMiB);
  EXPECT_EQ(table_.resident_bytes(), 4 * kMiB);
}

TEST_F(ResidencyPlannerTest, WholeChunksWidenWhileTheBudgetHasRoom) {
  MemoryActions first;
  Launch({{a_ + 4096, a_ + 8192}}, ++seq_, &first, Granularity::kWholeChunks);
  EXPECT_EQ(first.load, std::vector<ByteRange>{Whole(a_)}) << "untouched: the whole allocation";
  MemoryActions chunk;
  Launch({{b_, b_ + 4096}}, ++seq_, &chunk, Granularity::kWholeChunks);
  EXPECT_EQ(chunk.load_bytes, 8 * kMiB) << "b untouched and 16 MiB fit: whole too";
  MemoryActions shed;
  planner_.PlanEviction(8 * kMiB, &shed);  // a0 and b0, the last touched, stay
  MemoryActions later;
  Launch({{a_ + 2 * kMiB, a_ + 2 * kMiB + 1}}, ++seq_, &later, Granularity::kWholeChunks);
  EXPECT_EQ(later.load_bytes, 2 * kMiB) << "touched before: the one chunk, whole";
  MemoryActions tight;
  planner_.set_budget(table_.resident_bytes() + kMiB);
  Launch({{c_, c_ + 1}}, ++seq_, &tight, Granularity::kWholeChunks);
  EXPECT_EQ(tight.load_bytes, ChunkTable::kUnit) << "no room for a chunk whole: the unit";
  // Past kMaxWholeAllocation: by chunks even when untouched.
  const uint64_t big = 0x100000000;
  EXPECT_TRUE(table_.Add(big, ResidencyPlanner::kMaxWholeAllocation + 2 * kMiB).ok());
  planner_.set_budget(1024 * kMiB);
  MemoryActions by_chunk;
  Launch({{big, big + 1}}, ++seq_, &by_chunk, Granularity::kWholeChunks);
  EXPECT_EQ(by_chunk.load_bytes, 2 * kMiB);
}

TEST_F(ResidencyPlannerTest, AnUntouchedAllocationComesInWholeOnlyWhenAllOfItFits) {
  planner_.set_budget(4 * kMiB);
  MemoryActions out;
  Launch({{c_ + 4096, c_ + 8192}}, ++seq_, &out, Granularity::kWholeChunks);
  EXPECT_EQ(out.load, (std::vector<ByteRange>{{c_, c_ + 2 * kMiB}})) << "8 MiB whole does not fit 4: its chunk";
}

TEST_F(ResidencyPlannerTest, PlannedEvictionTakesWhatIsNeededLast) {
  Launch({Whole(a_)});
  Launch({Whole(b_)});
  planner_.SetFuture({{Whole(b_)}});
  MemoryActions out;
  planner_.PlanEviction(8 * kMiB, &out);
  EXPECT_EQ(out.evict, std::vector<ByteRange>{Whole(a_)});
  EXPECT_TRUE(out.load.empty());
  MemoryActions rest;
  planner_.PlanEviction(UINT64_MAX, &rest);
  EXPECT_EQ(rest.evict, std::vector<ByteRange>{Whole(b_)});
  EXPECT_EQ(table_.resident_bytes(), 0u);
}

TEST_F(ResidencyPlannerTest, EvictAllNamesEveryAllocationWhole) {
  Launch({{b_, b_ + kMiB}});
  MemoryActions out;
  planner_.PlanEvictAll(&out);
  EXPECT_EQ(out.evict, (std::vector<ByteRange>{Whole(a_), Whole(b_), Whole(c_)}));
  EXPECT_EQ(out.evict_bytes, kMiB) << "what it knew to be there";
  EXPECT_EQ(out.evict_after, 1u);
  EXPECT_EQ(table_.resident_bytes(), 0u);
}

}  // namespace
}  // namespace msched

#include "model/predictor.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace msched {
namespace {

// (ptr interior to A, struct {ptr to B, ptr to A again, ptr to pinned}, int)
struct PointerArgs {
  struct S {
    uint64_t b, a, pinned;
  } s{0x200100, 0x100000, 0x300000};
  uint64_t a_interior = 0x104000;
  int n = 5;
  const ParamLayout layout = {{0, 8}, {8, 24}, {32, 4}};
  void* params[3] = {&a_interior, &s, &n};
  AllocationMap allocs;

  PointerArgs() {
    EXPECT_TRUE(allocs.Insert(0x100000, 0x10000, AllocKind::kManaged).ok());
    EXPECT_TRUE(allocs.Insert(0x200000, 0x100000, AllocKind::kPoolChunk).ok());
    EXPECT_TRUE(allocs.Insert(0x200000, 0x10000, AllocKind::kPooled).ok());  // a block of the pool: managed too
    EXPECT_TRUE(allocs.Insert(0x300000, 0x10000, AllocKind::kPinned).ok());
  }
  ArgView view() const { return ArgView::FromKernelParams(layout, params); }
};

TEST(PredictFromPointersTest, WholeAllocationsCoverEveryManagedAllocationArgumentWordsPointInto) {
  PointerArgs a;
  Prediction p;
  PredictFromPointers(a.view(), a.allocs, nullptr, PointerExtent::kWholeAllocation, &p);
  ASSERT_EQ(p.regions().size(), 2u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x100000, 0x110000}));
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x200000, 0x210000})) << "the block, not its chunk";
}

TEST(PredictFromPointersTest, TheFallbackRunsFromEachPointerToTheEndOfItsAllocation) {
  PointerArgs a;
  Prediction p(/*alignment=*/1);
  PredictFromPointers(a.view(), a.allocs, nullptr, PointerExtent::kToAllocationEnd, &p);
  ASSERT_EQ(p.regions().size(), 3u) << "A's interior pointer, B's, and A's base (not inside the first)";
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x104000, 0x110000})) << "nothing below the pointer";
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x200100, 0x210000}));
  EXPECT_EQ(p.regions()[2].range, (ByteRange{0x100000, 0x110000}));
}

TEST(PredictFromPointersTest, APointerInsideAnEarlierRegionAddsNothing) {
  PointerArgs a;
  std::swap(a.a_interior, a.s.a);  // the base first, then the interior pointer
  Prediction p(/*alignment=*/1);
  PredictFromPointers(a.view(), a.allocs, nullptr, PointerExtent::kToAllocationEnd, &p);
  ASSERT_EQ(p.regions().size(), 2u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x100000, 0x110000}));
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x200100, 0x210000}));
}

TEST(PredictFromPointersTest, WordsOutsideEveryAllocationPredictNothing) {
  PointerArgs a;
  a.a_interior = 0x110000;  // one past A's end
  a.s = {0x50, 0x400000, 0x1ffff};
  Prediction p;
  PredictFromPointers(a.view(), a.allocs, nullptr, PointerExtent::kToAllocationEnd, &p);
  EXPECT_TRUE(p.regions().empty());
  AllocationMap none;
  PredictFromPointers(a.view(), none, nullptr, PointerExtent::kToAllocationEnd, &p);
  EXPECT_TRUE(p.regions().empty());
}

TEST(ClipToAllocationsTest, RegionsEndWithTheirAllocationAndThoseOutsideEveryManagedOneGo) {
  PointerArgs a;
  Prediction p(/*alignment=*/1);
  p.Add({0x50, 0x60}, AccessMode::kRead);                                // kept: before `first`
  p.Add({0x100100, 0x900000}, AccessMode::kRead);                        // runs past A's end into B
  p.Add({0x0ff000, 0x100800}, AccessMode::kRead);                        // starts before A: in no allocation
  p.Add({0x300000, 0x300100}, AccessMode::kRead);                        // pinned: never moved
  p.Add({0x108000, 0x109000}, AccessMode::kWrite);                       // inside A, as it is
  p.Add({0x200000, 0x200000 + (uint64_t{1} << 46)}, AccessMode::kRead);  // a "rest" region in B
  ClipToAllocations(a.allocs, 1, &p, nullptr);
  ASSERT_EQ(p.regions().size(), 4u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x50, 0x60}));
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x100100, 0x110000}));
  EXPECT_EQ(p.regions()[2].range, (ByteRange{0x108000, 0x109000}));
  EXPECT_EQ(p.regions()[3].range, (ByteRange{0x200000, 0x210000}));
}

TEST(LearnedExtentTest, TemplateRegionsWithinTheirAllocationTeachTheFallbackTheirExtent) {
  PointerArgs a;
  ExtentMemo learned;
  Prediction t(/*alignment=*/0x10000);  // the region comes out as [0x100000, 0x110000): learned at its pointer
  t.Add({0x104000, 0x106000}, AccessMode::kRead);                        // A's tensor at its interior pointer
  t.Add({0x200100, 0x200100 + (uint64_t{1} << 46)}, AccessMode::kRead);  // B's "rest": cut, says nothing
  t.AddPiece({0x100000, 0x101000}, AccessMode::kRead);  // a strided piece at A's base: says nothing either
  ClipToAllocations(a.allocs, 0, &t, &learned);
  EXPECT_EQ(learned.Find(0x104000, a.allocs.Find(0x104000)->id), 0x110000u) << "the aligned end, as prefetched";
  EXPECT_EQ(learned.Find(0x200100, a.allocs.Find(0x200100)->id), std::nullopt);

  Prediction p(/*alignment=*/1);
  PredictFromPointers(a.view(), a.allocs, &learned, PointerExtent::kToAllocationEnd, &p);
  ASSERT_EQ(p.regions().size(), 3u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x104000, 0x110000}));
  EXPECT_EQ(p.regions()[2].range, (ByteRange{0x100000, 0x110000})) << "A's base was never learned";

  ExtentMemo small;
  small.Learn(0x104000, a.allocs.Find(0x104000)->id, 0x106000);
  small.Learn(0x200100, a.allocs.Find(0x200100)->id, 0x200200);
  p.Clear();
  PredictFromPointers(a.view(), a.allocs, &small, PointerExtent::kToAllocationEnd, &p);
  ASSERT_EQ(p.regions().size(), 3u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x104000, 0x106000}));
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x200100, 0x200200}));
  p.Clear();
  PredictFromPointers(a.view(), a.allocs, &small, PointerExtent::kWholeAllocation, &p);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x100000, 0x110000})) << "whole allocations ignore the memo";

  ASSERT_TRUE(a.allocs.Erase(0x100000).ok());
  ASSERT_TRUE(a.allocs.Insert(0x100000, 0x10000, AllocKind::kManaged).ok());
  p.Clear();
  PredictFromPointers(a.view(), a.allocs, &small, PointerExtent::kToAllocationEnd, &p);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x104000, 0x110000})) << "a new allocation at the old address";
}

TEST(LearnedExtentTest, OnlyAKernelWithoutATemplateReadsTheMemo) {
  const ExtentMemo memo;
  EXPECT_EQ(LearnedExtentsFor(PredictionSource::kPointers, &memo), &memo);
  EXPECT_EQ(LearnedExtentsFor(PredictionSource::kTemplate, &memo), nullptr) << "its failed regions: to the end";
  EXPECT_EQ(LearnedExtentsFor(PredictionSource::kNone, &memo), nullptr) << "faulting: its pointers' whole reach";
  EXPECT_EQ(LearnedExtentsFor(PredictionSource::kWholeAllocations, &memo), nullptr);
}

// A stream-ordered pool hands out 512-byte-aligned blocks: a region's
// page-aligned begin can lie in the block before its own.
TEST(ClipToAllocationsTest, ARegionBelongsToTheBlockHoldingItsUnalignedStart) {
  AllocationMap allocs;
  ASSERT_TRUE(allocs.Insert(0x400000, 0x100000, AllocKind::kPoolChunk).ok());
  ASSERT_TRUE(allocs.Insert(0x400000, 0x200, AllocKind::kPooled).ok());
  ASSERT_TRUE(allocs.Insert(0x400200, 0x3e00, AllocKind::kPooled).ok());
  Prediction p(/*alignment=*/0x1000);
  p.Add({0x400200, 0x403200}, AccessMode::kRead);
  ExtentMemo learned;
  ClipToAllocations(allocs, 0, &p, &learned);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x400000, 0x404000})) << "not cut to the first block's end";
  EXPECT_EQ(learned.Find(0x400200, allocs.Find(0x400200)->id), 0x404000u);
}

// A list of tensors whose slots past the last in use hold garbage: a failed
// region based there predicts nothing and needs no fallback; one based in
// the job's memory, or with no base at all, does.
TEST(FailuresInJobMemoryTest, OnlyFailedRegionsBasedInManagedMemoryOrUnreadableCount) {
  PointerArgs a;
  Prediction p;
  EXPECT_EQ(FailuresInJobMemory(p, a.allocs), 0u);
  p.CountFailure(0x7ffc29470900);  // a stack address
  p.CountFailure(0);
  p.CountFailure(0x300000);  // pinned: not msched's to prefetch
  EXPECT_EQ(FailuresInJobMemory(p, a.allocs), 0u);
  p.CountFailure(0x104000);  // inside managed A
  p.CountFailure(0x200100);  // a pooled block
  p.CountFailure();          // its base word could not be read
  EXPECT_EQ(p.failed_regions(), 6u);
  EXPECT_EQ(FailuresInJobMemory(p, a.allocs), 3u);
  EXPECT_EQ(FailuresInJobMemory(p, AllocationMap()), 1u) << "with no allocations, only the unreadable one";
}

TEST(PointerRuleTest, FallbacksApplyTheirRuleAndATemplateFallsBackOnlyWhereItFailed) {
  using P = PredictionSource;
  EXPECT_EQ(PointerRuleFor(P::kPointers, UnknownPolicy::kPointers, 0), PointerExtent::kToAllocationEnd);
  EXPECT_EQ(PointerRuleFor(P::kWholeAllocations, UnknownPolicy::kAlloc, 0), PointerExtent::kWholeAllocation);
  EXPECT_EQ(PointerRuleFor(P::kTemplate, UnknownPolicy::kPointers, 0), std::nullopt);
  EXPECT_EQ(PointerRuleFor(P::kTemplate, UnknownPolicy::kPointers, 1), PointerExtent::kToAllocationEnd);
  EXPECT_EQ(PointerRuleFor(P::kTemplate, UnknownPolicy::kFault, 1), std::nullopt);
  EXPECT_EQ(PointerRuleFor(P::kNone, UnknownPolicy::kPointers, 0), std::nullopt);
}

// LaunchPrediction: the one rule chain the launch path, the graph path and
// the profiler's check all follow. A launch of (ptr into A, ptr into B, 0,
// n) whose template reads n bytes at A and, when `with_failure`, a region
// at B whose extent comes out negative (it fails, based in managed memory).
struct TwoBuffers {
  static constexpr uint64_t kA = 0x100000, kB = 0x200000, kSize = 0x10000;
  const ParamLayout layout = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
  uint64_t a = kA + 0x100, b = kB + 0x200, zero = 0, n = 0x300;
  void* params[4] = {&a, &b, &zero, &n};
  AllocationMap allocs;
  ExtentMemo memo;
  std::optional<CompiledTemplate> tmpl;

  explicit TwoBuffers(bool with_failure) {
    EXPECT_TRUE(allocs.Insert(kA, kSize, AllocKind::kManaged).ok());
    EXPECT_TRUE(allocs.Insert(kB, kSize, AllocKind::kManaged).ok());
    std::vector<Region> regions{Linear(0, {3}, 0)};
    if (with_failure) regions.push_back(Linear(1, {2}, -10));
    tmpl.emplace(KernelTemplate{"k", layout, regions, {}, 0});
  }
  static Region Linear(uint16_t base, std::vector<uint16_t> args, int64_t add) {
    Region r;
    r.kind = Region::Kind::kLinear;
    r.base = {base, 0, 8};
    std::vector<Factor> factors;
    for (uint16_t p : args) factors.push_back({Factor::Kind::kArg, {p, 0, 8}});
    r.extent = {1, 1, std::move(factors), add};
    r.mode = AccessMode::kRead;
    return r;
  }
  LaunchToPredict Launch(Mode mode, UnknownPolicy unknown, bool with_template) const {
    return {mode, unknown, with_template ? &*tmpl : nullptr, ArgView::FromKernelParams(layout, params), {}};
  }
};

std::vector<ByteRange> Ranges(const Prediction& p) {
  std::vector<ByteRange> out;
  for (const PredictedRegion& r : p.regions()) out.push_back(r.range);
  return out;
}

TEST(LaunchPredictionTest, ATemplateThatSaysEverythingNeedsNoPointerRule) {
  TwoBuffers t(/*with_failure=*/false);
  Prediction p(/*alignment=*/1);
  LaunchPrediction lp(t.Launch(Mode::kMsched, UnknownPolicy::kFault, true), &p);
  EXPECT_EQ(lp.source(), PredictionSource::kTemplate);
  lp.Judge(t.allocs);
  EXPECT_EQ(lp.failed(), 0u);
  EXPECT_FALSE(lp.uses_pointer_rule());
  EXPECT_TRUE(lp.covers_working_set());
  EXPECT_FALSE(lp.leaves_data_unpredicted());
  EXPECT_TRUE(lp.Complete(t.allocs, &t.memo));
  EXPECT_EQ(Ranges(p), (std::vector<ByteRange>{{t.a, t.a + t.n}}));
  EXPECT_EQ(t.memo.Find(t.a, t.allocs.Find(t.a)->id), t.a + t.n) << "the template's region taught the memo";
}

TEST(LaunchPredictionTest, AFailedRegionInJobMemoryFallsBackToPointersUnderThePointersPolicy) {
  TwoBuffers t(/*with_failure=*/true);
  Prediction p(/*alignment=*/1);
  const LaunchPrediction lp =
      PredictLaunch(t.Launch(Mode::kMsched, UnknownPolicy::kPointers, true), t.allocs, &t.memo, &p);
  EXPECT_EQ(lp.failed(), 1u);
  EXPECT_TRUE(lp.uses_pointer_rule());
  EXPECT_TRUE(lp.covers_working_set());
  EXPECT_TRUE(lp.leaves_data_unpredicted()) << "a template that failed cannot vouch for what is written";
  EXPECT_EQ(Ranges(p), (std::vector<ByteRange>{{t.a, t.a + t.n},
                                               {t.a, TwoBuffers::kA + TwoBuffers::kSize},
                                               {t.b, TwoBuffers::kB + TwoBuffers::kSize}}))
      << "the template's region, then each pointer to its allocation's end";
}

TEST(LaunchPredictionTest, UnderTheFaultPolicyAFailedRegionLeavesTheLaunchPartlyPredicted) {
  TwoBuffers t(/*with_failure=*/true);
  Prediction p(/*alignment=*/1);
  const LaunchPrediction lp =
      PredictLaunch(t.Launch(Mode::kMsched, UnknownPolicy::kFault, true), t.allocs, &t.memo, &p);
  EXPECT_EQ(lp.failed(), 1u);
  EXPECT_FALSE(lp.uses_pointer_rule());
  EXPECT_FALSE(lp.covers_working_set()) << "a graph node like it is left to faults whole";
  EXPECT_EQ(Ranges(p), (std::vector<ByteRange>{{t.a, t.a + t.n}})) << "a launch keeps what the template said";
}

TEST(LaunchPredictionTest, ALaunchLeftToFaultsStillCountsItsPointersWholeReach) {
  TwoBuffers t(/*with_failure=*/false);
  t.memo.Learn(t.a, t.allocs.Find(t.a)->id, t.a + 0x10);  // not read: faults may touch anything there
  Prediction p(/*alignment=*/1);
  LaunchPrediction lp(t.Launch(Mode::kMsched, UnknownPolicy::kFault, false), &p);
  EXPECT_EQ(lp.source(), PredictionSource::kNone);
  EXPECT_TRUE(lp.left_to_faults());
  lp.Judge(t.allocs);
  EXPECT_TRUE(lp.leaves_data_unpredicted());
  EXPECT_FALSE(lp.covers_working_set());
  EXPECT_TRUE(lp.Complete(t.allocs, &t.memo));
  EXPECT_EQ(Ranges(p), (std::vector<ByteRange>{{t.a, TwoBuffers::kA + TwoBuffers::kSize},
                                               {t.b, TwoBuffers::kB + TwoBuffers::kSize}}));
}

TEST(LaunchPredictionTest, UnreadableArgumentsPredictNothing) {
  TwoBuffers t(/*with_failure=*/false);
  LaunchToPredict launch = t.Launch(Mode::kMsched, UnknownPolicy::kPointers, true);
  launch.args = ArgView();
  Prediction p(/*alignment=*/1);
  LaunchPrediction lp(launch, &p);
  EXPECT_EQ(lp.source(), PredictionSource::kNone);
  lp.Judge(t.allocs);
  EXPECT_FALSE(lp.uses_pointer_rule());
  EXPECT_FALSE(lp.Complete(t.allocs, &t.memo)) << "nothing to complete";
  EXPECT_TRUE(p.regions().empty());
}

TEST(LaunchPredictionTest, AllocModeTakesWholeAllocationsOverATemplate) {
  TwoBuffers t(/*with_failure=*/false);
  Prediction p(/*alignment=*/1);
  const LaunchPrediction lp = PredictLaunch(t.Launch(Mode::kAlloc, UnknownPolicy::kFault, true), t.allocs, &t.memo, &p);
  EXPECT_EQ(lp.source(), PredictionSource::kWholeAllocations);
  EXPECT_EQ(Ranges(p), (std::vector<ByteRange>{{TwoBuffers::kA, TwoBuffers::kA + TwoBuffers::kSize},
                                               {TwoBuffers::kB, TwoBuffers::kB + TwoBuffers::kSize}}));
}

}  // namespace
}  // namespace msched

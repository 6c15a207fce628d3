#include "profile/template_fitter.h"

#include <gtest/gtest.h>

#include "trace_builder.h"

namespace msched {
namespace {

using tracetest::Bytes;
using tracetest::FitAll;
using tracetest::Read;
using tracetest::TraceBuilder;
using tracetest::Write;

constexpr uint64_t kA = 0x10000000, kB = 0x20000000, kSize = 64 << 20;

Factor Arg(uint16_t param, uint16_t offset = 0) { return {Factor::Kind::kArg, {param, offset, 8}}; }

TEST(TemplateFitterTest, TheSameExtentInEveryCallIsFixed) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  for (uint64_t n : {10, 20, 30}) b.Launch("k", {kA, n}, {Write(kA, kA + 4096)});
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 1u);
  const Region& r = fit.tmpl.regions[0];
  EXPECT_EQ(r.kind, Region::Kind::kFixed);
  EXPECT_EQ(r.extent, LinearExpr::Constant(4096));
  EXPECT_EQ(r.base, (ArgRef{0, 0, 8}));
  EXPECT_EQ(r.mode, AccessMode::kWrite);
  EXPECT_EQ(fit.tmpl.calls_seen, 3u);
}

TEST(TemplateFitterTest, AnExtentProportionalToAnArgumentIsLinear) {
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (uint64_t n : {1000, 1537, 4001}) b.Launch("k", {kA, 7, n, kB}, {Read(kA, kA + 4 * n), Write(kB, kB + 4 * n)});
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 2u);
  for (const Region& r : fit.tmpl.regions) {
    EXPECT_EQ(r.kind, Region::Kind::kLinear);
    EXPECT_EQ(r.extent, (LinearExpr{4, 1, {Arg(2)}, 0}));
  }
  EXPECT_EQ(fit.tmpl.regions[1].base.param, 3u);
}

TEST(TemplateFitterTest, RunsAtDifferentSizesMergedTellLinearFromFixed) {
  // Each run alone launches at one size, which a fixed rule explains too; the
  // size argument explaining it wins (see OneSizeSeenFollowsASizeArgument...).
  // The second run reuses the first's address, which must not still resolve
  // to the first run's allocation.
  auto run = [](uint64_t n) {
    TraceBuilder b;
    b.Alloc(kA, 4 * n);
    for (int i = 0; i < 2; ++i) b.Launch("k", {kA, n}, {Read(kA, kA + 4 * n)});
    return b.trace();
  };
  EXPECT_EQ(FitAll(run(1000)).tmpl.regions.at(0).extent, (LinearExpr{4, 1, {Arg(1)}, 0}));
  Result<Trace> merged = MergeTraces({run(1000), run(3000)});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->launches.size(), 4u);
  EXPECT_EQ(merged->launches[3].seq, 3u);
  const KernelFit fit = FitAll(*merged);
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 1u);
  EXPECT_EQ(fit.tmpl.regions[0].kind, Region::Kind::kLinear);
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {Arg(1)}, 0}));

  Trace cupti = run(10);
  cupti.source = "cupti";
  Trace sim = run(10);
  sim.source = "simulator";
  EXPECT_FALSE(MergeTraces({sim, cupti}).ok()) << "exact and rounded ranges do not mix";
  EXPECT_FALSE(MergeTraces({}).ok());
}

TEST(TemplateFitterTest, AProductOfTwoArgumentsIsFound) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  for (auto [m, k] : {std::pair<uint64_t, uint64_t>{32, 16}, {48, 40}, {64, 24}, {40, 64}}) {
    b.Launch("mm", {kA, m, k}, {Read(kA, kA + 4 * m * k)});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {Arg(1), Arg(2)}, 0}));
}

TEST(TemplateFitterTest, LaunchDimensionsCanExplainAnExtent) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  for (uint32_t g : {2u, 5u, 9u}) b.Launch("k", {kA}, {Write(kA, kA + 512ull * g)}, g, 128);
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{512, 1, {Factor{Factor::Kind::kGridX, {}}}, 0}));
}

TEST(TemplateFitterTest, RegularlySpacedPiecesAreStrided) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  const std::tuple<uint64_t, uint64_t, uint64_t> calls[] = {{4, 256, 4096}, {7, 320, 6144}, {5, 256, 5120}};
  for (auto [count, piece, stride] : calls) {
    std::vector<TouchedRange> touched;
    for (uint64_t i = 0; i < count; ++i) touched.push_back(Read(kA + i * 4 * stride, kA + i * 4 * stride + 4 * piece));
    b.Launch("strided", {kA, count, piece, stride}, touched);
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  const Region& r = fit.tmpl.regions.at(0);
  EXPECT_EQ(r.kind, Region::Kind::kStrided);
  EXPECT_EQ(r.count, (LinearExpr{1, 1, {Arg(1)}, 0}));
  EXPECT_EQ(r.extent, (LinearExpr{4, 1, {Arg(2)}, 0}));
  EXPECT_EQ(r.stride, (LinearExpr{4, 1, {Arg(3)}, 0}));
}

TEST(TemplateFitterTest, InteriorPointersIntoOnePoolGetTheirOwnRegions) {
  TraceBuilder b;
  b.Alloc(kA, kSize);  // one pool holding both tensors
  for (uint64_t n : {100, 300, 700}) {
    const uint64_t x = kA + 0x1000, y = kA + 0x400000;
    b.Launch("k", {x, y, n}, {Read(x, x + 4 * n), Write(y, y + 8 * n)});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 2u);
  EXPECT_EQ(fit.tmpl.regions[0].base.param, 0u);
  EXPECT_EQ(fit.tmpl.regions[0].extent.coef, 4);
  EXPECT_EQ(fit.tmpl.regions[1].base.param, 1u);
  EXPECT_EQ(fit.tmpl.regions[1].extent.coef, 8);
}

// Small allocations packed next to each other come back from CUPTI as one
// range per kernel (as a vector add's three 256 KiB buffers did on an H100);
// each buffer still gets its own region from its own pointer.
TEST(TemplateFitterTest, OneRangeOverNeighbouringAllocationsIsSplitBetweenThem) {
  TraceBuilder b(65536);
  for (uint64_t n : {65536, 262144}) {
    const uint64_t size = 4 * n, x = kA, y = kA + size, z = kA + 2 * size;
    b.Alloc(x, size).Alloc(y, size).Alloc(z, size);
    b.Launch("add", {x, y, z, n}, {{{x, z + size}, AccessMode::kReadWrite}});
    b.Free(x).Free(y).Free(z);
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 3u);
  for (uint16_t p = 0; p < 3; ++p) {
    EXPECT_EQ(fit.tmpl.regions[p].base, (ArgRef{p, 0, 8}));
    EXPECT_EQ(fit.tmpl.regions[p].extent, (LinearExpr{4, 1, {Arg(3)}, 0}));
  }
}

TEST(TemplateFitterTest, PointersAndSizesInsideAStructAreUsed) {
  struct Desc {
    uint64_t x, y, n;
  };
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (uint64_t n : {64, 200, 1000}) {
    b.LaunchBytes("s", {Bytes(Desc{kA, kB, n})}, {Read(kA, kA + 4 * n), Write(kB, kB + 4 * n)});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 2u);
  EXPECT_EQ(fit.tmpl.regions[1].base, (ArgRef{0, 8, 8}));
  EXPECT_EQ(fit.tmpl.regions[1].extent, (LinearExpr{4, 1, {Arg(0, 16)}, 0}));
}

TEST(TemplateFitterTest, ASparsePrefixOfALargeBufferFollowsItsLengthArgument) {
  TraceBuilder b;
  b.Alloc(kA, kSize);  // a KV cache sized for the longest context
  for (uint64_t ctx : {16, 17, 18, 19, 20}) b.Launch("attend", {kA, ctx, 128}, {Read(kA, kA + 4 * ctx * 128)});
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{512, 1, {Arg(1)}, 0}));
}

TEST(TemplateFitterTest, TheSimplestRuleWinsWhenSeveralExplainTheCalls) {
  // stride = 4*s, and also 2048*c + 8192 since s and c move together here.
  TraceBuilder b;
  b.Alloc(kA, kSize);
  for (uint64_t i = 0; i < 4; ++i) {
    const uint64_t c = 4 + i, s = 4096 + 512 * i;
    std::vector<TouchedRange> touched;
    for (uint64_t p = 0; p < c; ++p) touched.push_back(Read(kA + p * 4 * s, kA + p * 4 * s + 1024));
    b.Launch("k", {kA, c, s}, touched);
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].stride, (LinearExpr{4, 1, {Arg(2)}, 0}));
}

TEST(TemplateFitterTest, AnExtentNoArgumentExplainsIsUnpredictable) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  const uint64_t sizes[] = {4096, 12288, 8192};
  for (size_t i = 0; i < 3; ++i) b.Launch("k", {kA, 5}, {Read(kA, kA + sizes[i])});
  const KernelFit fit = FitAll(b.trace());
  EXPECT_FALSE(fit.predictable);
  EXPECT_NE(fit.reason.find("fits no rule"), std::string::npos) << fit.reason;
}

TEST(TemplateFitterTest, PointerChasingIsUnpredictable) {
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (uint64_t n : {10, 20}) b.Launch("chase", {kA, n}, {Read(kA, kA + 16), Read(kB, kB + 4 * n)});
  const KernelFit fit = FitAll(b.trace());
  EXPECT_FALSE(fit.predictable);
  EXPECT_NE(fit.reason.find("pointer chasing"), std::string::npos) << fit.reason;
}

TEST(TemplateFitterTest, ScatteredPagesAreAGather) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  b.Launch("gather", {kA, 100},
           {Read(kA, kA + 4096), Read(kA + 5 * 4096, kA + 6 * 4096), Read(kA + 7 * 4096, kA + 8 * 4096)});
  b.Launch("gather", {kA, 100},
           {Read(kA + 2 * 4096, kA + 3 * 4096), Read(kA + 9 * 4096, kA + 10 * 4096),
            Read(kA + 30 * 4096, kA + 31 * 4096), Read(kA + 31 * 4096, kA + 32 * 4096)});
  const KernelFit fit = FitAll(b.trace());
  EXPECT_FALSE(fit.predictable);
  EXPECT_NE(fit.reason.find("gather"), std::string::npos) << fit.reason;
}

TEST(TemplateFitterTest, AccessOutsideEveryAllocationIsUnpredictable) {
  TraceBuilder b;
  b.Alloc(kA, 4096);
  b.Launch("k", {kA}, {Read(kB, kB + 64)});
  const KernelFit fit = FitAll(b.trace());
  EXPECT_FALSE(fit.predictable);
  EXPECT_NE(fit.reason.find("outside every allocation"), std::string::npos) << fit.reason;
}

TEST(TemplateFitterTest, FreedAllocationsNoLongerExplainPointers) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  b.Launch("k", {kA}, {Read(kA, kA + 64)});
  b.Free(kA);
  b.Launch("k", {kA}, {Read(kA, kA + 64)});
  const std::vector<Observation> obs = Observe(b.trace());
  ASSERT_EQ(obs.size(), 2u);
  EXPECT_TRUE(obs[0].unexplained.empty());
  EXPECT_FALSE(obs[1].unexplained.empty());
}

TEST(TemplateFitterTest, RangesRoundedOutToCoarsePrecisionStillCoverEveryTouch) {
  // What CUPTI gives: 64 KiB blocks. The fit must err towards larger regions.
  constexpr uint64_t kBlock = 64 << 10;
  TraceBuilder b(kBlock);
  b.Alloc(kA, kSize);
  for (uint64_t n : {100000, 250000, 400000, 777777}) {
    const uint64_t end = (kA + 4 * n + kBlock - 1) / kBlock * kBlock;
    b.Launch("k", {kA, n}, {Read(kA, end)});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  const LinearExpr& e = fit.tmpl.regions[0].extent;
  ASSERT_EQ(e.factors.size(), 1u);
  for (uint64_t n : {123456, 500000, 999999}) {
    const int64_t predicted = e.coef * static_cast<int64_t>(n) / e.div + e.add;
    EXPECT_GE(predicted, static_cast<int64_t>(4 * n)) << n;               // no false negative
    EXPECT_LE(predicted, static_cast<int64_t>(4 * n + 2 * kBlock)) << n;  // at most the rounding
  }
}

TEST(FitExpressionTest, PrefersAConstantThenOneFactorThenProducts) {
  const std::vector<FactorValues> candidates = {{Arg(0), {2, 3, 5}}, {Arg(1), {7, 11, 13}}};
  auto target = [](int64_t v) { return std::optional<Target>(Target{v - 1, v}); };
  EXPECT_EQ(FitExpression({target(64), target(64), target(64)}, candidates), LinearExpr::Constant(64));
  EXPECT_EQ(FitExpression({target(22), target(33), target(55)}, candidates), (LinearExpr{11, 1, {Arg(0)}, 0}));
  EXPECT_EQ(FitExpression({target(14), target(33), target(65)}, candidates), (LinearExpr{1, 1, {Arg(0), Arg(1)}, 0}));
  EXPECT_EQ(FitExpression({target(1), target(100), target(3)}, candidates), std::nullopt);
}

// A GEMM's n x n floats profiled at two sizes, ends rounded out to 64 KiB:
// a line with an offset fits both points too, but extrapolates to a third
// of the data at n = 2048 (seen on an H100). The product without offset wins.
TEST(FitExpressionTest, ASquareWithoutOffsetBeatsALineWithOne) {
  const std::vector<FactorValues> candidates = {{Arg(0), {256, 512}}};
  auto extent = [](int64_t bytes) { return std::optional<Target>(Target{bytes - 1, bytes + 2 * 65535}); };
  EXPECT_EQ(FitExpression({extent(256 * 256 * 4), extent(512 * 512 * 4)}, candidates),
            (LinearExpr{4, 1, {Arg(0), Arg(0)}, 0}));
}

TEST(FitExpressionTest, ALineWithAnOffsetStandsWhenNoProductFits) {
  const std::vector<FactorValues> candidates = {{Arg(0), {2, 3, 5}}};
  auto target = [](int64_t v) { return std::optional<Target>(Target{v - 1, v}); };
  EXPECT_EQ(FitExpression({target(108), target(112), target(120)}, candidates), (LinearExpr{4, 1, {Arg(0)}, 100}));
}

// Profiled at one size, an extent equal to a size argument times an element
// size follows the argument; one no argument explains stays a constant.
TEST(FitExpressionTest, OneSizeSeenFollowsASizeArgumentThatExplainsIt) {
  const std::vector<FactorValues> fixed = {{Arg(1), {3, 3}}, {Arg(0), {1 << 24, 1 << 24}}};
  const std::optional<Target> extent = Target{(64 << 20) - 2 * 65535 - 1, 64 << 20};
  EXPECT_EQ(FitExpression({extent, extent}, {}, fixed), (LinearExpr{4, 1, {Arg(0)}, 0}));
  const std::optional<Target> other = Target{4095, 4096};
  EXPECT_EQ(FitExpression({other, other}, {}, fixed), LinearExpr::Constant(4096));
}

TEST(FitExpressionTest, LaunchesWithoutATargetImposeNothing) {
  const std::vector<FactorValues> candidates = {{Arg(0), {2, 3, 5}}};
  EXPECT_EQ(FitExpression({Target{7, 8}, std::nullopt, Target{19, 20}}, candidates), (LinearExpr{4, 1, {Arg(0)}, 0}));
}

TEST(FitExpressionTest, AFractionalCoefficientUsesADivisor) {
  const std::vector<FactorValues> candidates = {{Arg(0), {64, 128, 1024}}};
  EXPECT_EQ(FitExpression({Target{7, 8}, Target{15, 16}, Target{127, 128}}, candidates),
            (LinearExpr{1, 8, {Arg(0)}, 0}));
}

}  // namespace
}  // namespace msched

#include "profile/rounded_fit.h"

#include <array>
#include <chrono>

#include <gtest/gtest.h>

#include "model/predictor.h"
#include "model/template_eval.h"
#include "trace_builder.h"

namespace msched {
namespace {

using tracetest::Bytes;
using tracetest::FitAll;
using tracetest::Read;
using tracetest::TraceBuilder;
using tracetest::Write;

constexpr uint64_t kPage = 64 << 10, kBlock = 2 << 20;
constexpr uint64_t kA = 0x7f0000000000, kB = 0x7f0100000000, kSize = uint64_t{1} << 30;

uint64_t PageUp(uint64_t v) { return (v + kPage - 1) / kPage * kPage; }

// The bytes a fitted template predicts for `params`.
uint64_t Predicted(const KernelTemplate& t, const std::vector<std::vector<uint8_t>>& params) {
  std::vector<void*> ptrs;
  for (const auto& p : params) ptrs.push_back(const_cast<uint8_t*>(p.data()));
  Prediction out(/*alignment=*/1);
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(t.layout, ptrs.data()), LaunchDims{}, &out);
  return out.TotalBytes();
}

TEST(RoundedFitTest, BytesBelowThePointerInItsBlockAreThePrefetchersAndTheRegionStartsAtThePointer) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize);
  for (uint64_t n : {100000, 300000, 700000}) {
    const uint64_t p = kA + 5 * kBlock + 300 * 1024;  // inside the block, not on a page
    b.Launch("k", {p, n}, {Read(AlignDown(p, kBlock), PageUp(p + 4 * n))});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 1u);
  EXPECT_EQ(fit.tmpl.regions[0].base_offset, 0);
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {Factor{Factor::Kind::kArg, {1, 0, 8}}}, 0}));
}

TEST(RoundedFitTest, BytesInAnEarlierBlockThanEveryPointerArePointerChasing) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize);
  b.Launch("chase", {kA + 3 * kBlock, 16}, {Read(kA, kA + kPage), Read(kA + 3 * kBlock, kA + 3 * kBlock + kPage)});
  const KernelFit fit = FitAll(b.trace());
  EXPECT_FALSE(fit.predictable);
  EXPECT_NE(fit.reason.find("pointer chasing"), std::string::npos) << fit.reason;
}

TEST(RoundedFitTest, OneMigratedRangeIsCutAtEveryPointerIntoIt) {
  // Two tensors back to back in one allocation come back as one range.
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize);
  for (uint64_t n : {1 << 20, 3 << 20, 5 << 20}) {
    const uint64_t x = kA, y = kA + 4 * n;  // y: 4n bytes, x: 4n, then y: 2n
    b.Launch("k", {x, y, n}, {Read(x, PageUp(y + 2 * n))});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 2u);
  const Factor n{Factor::Kind::kArg, {2, 0, 8}};
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {n}, 0}));
  EXPECT_EQ(fit.tmpl.regions[1].extent, (LinearExpr{2, 1, {n}, 0}));
}

// A list of tensors in one struct, as PyTorch's foreach kernels pass them:
// four pointers, then four element counts. The profile has one size, so each
// count held one value; the regions vote for the distance from a pointer to
// its count, and the small tensors, which any small word fits, follow it.
struct TensorList {
  uint64_t address[4];
  uint64_t numel[4];
  uint64_t block_to_chunk[4];
};

TEST(RoundedFitTest, EachTensorOfAListTakesItsOwnCount) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  TensorList list{{kA, kA + 64 * kBlock, kB, kB + 64 * kBlock}, {300, 8 << 20, 1000, 3 << 20}, {7, 9, 3, 1}};
  std::vector<TouchedRange> touched;
  for (int i = 0; i < 4; ++i) touched.push_back(Write(list.address[i], PageUp(list.address[i] + 4 * list.numel[i])));
  for (int call = 0; call < 3; ++call) b.LaunchBytes("foreach", {Bytes(list)}, touched);
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 4u);
  TensorList bigger = list;
  for (uint64_t& n : bigger.numel) n *= 16;
  const uint64_t want = 4 * (bigger.numel[0] + bigger.numel[1] + bigger.numel[2] + bigger.numel[3]);
  EXPECT_EQ(Predicted(fit.tmpl, {Bytes(bigger)}), want) << "each pointer follows its own count at a new size";
}

TEST(RoundedFitTest, AnExtentNoRuleExplainsRunsToTheEndOfItsAllocation) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  const uint64_t sizes[] = {5 * kBlock, 17 * kBlock, 9 * kBlock, 2 * kBlock};
  for (uint64_t s : sizes) b.Launch("k", {kA, kB, 77}, {Read(kA, kA + kPage), Read(kB, kB + s)});
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 2u);
  EXPECT_NE(fit.tmpl.regions[0].kind, Region::Kind::kRest);
  EXPECT_EQ(fit.tmpl.regions[1].kind, Region::Kind::kRest);
  // Cut to its allocation, the rest region is the fallback's.
  AllocationMap allocs;
  ASSERT_TRUE(allocs.Insert(kA, kSize, AllocKind::kManaged).ok());
  ASSERT_TRUE(allocs.Insert(kB, kSize, AllocKind::kManaged).ok());
  uint64_t a = kA, bb = kB + 4096, n = 77;
  void* params[] = {&a, &bb, &n};
  Prediction out(/*alignment=*/1);
  CompiledTemplate(fit.tmpl).Evaluate(ArgView::FromKernelParams(fit.tmpl.layout, params), LaunchDims{}, &out);
  ClipToAllocations(allocs, 0, &out, nullptr);
  ASSERT_EQ(out.regions().size(), 2u);
  EXPECT_EQ(out.regions()[1].range, (ByteRange{kB + 4096, kB + kSize}));
}

// A convolution's filter holds K * C * R * S floats.
struct Conv {
  uint64_t filter;
  uint32_t k, c, r, s;
};

// The fit of launches reading a filter of each of `shapes` (K, C, R, S).
KernelFit FitConvolutions(const std::vector<std::array<uint32_t, 4>>& shapes) {
  TraceBuilder b(kPage);
  b.Alloc(kB, kSize);
  for (const auto& [k, c, r, s] : shapes) {
    const Conv conv{kB, k, c, r, s};
    b.LaunchBytes("conv", {Bytes(conv)}, {Read(kB, PageUp(kB + 4ull * k * c * r * s))});
  }
  return FitAll(b.trace());
}

// No product of three of its arguments explains a filter; four do.
TEST(RoundedFitTest, AConvolutionsFilterIsAProductOfFourSizes) {
  const KernelFit fit = FitConvolutions(
      {{512, 256, 3, 1}, {1024, 512, 1, 3}, {768, 384, 3, 3}, {256, 1024, 5, 3}, {2048, 512, 1, 1}, {640, 640, 3, 5}});
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), 1u);
  EXPECT_EQ(fit.tmpl.regions[0].kind, Region::Kind::kLinear) << "not to the end of its allocation";
  EXPECT_EQ(fit.tmpl.regions[0].extent.factors.size(), 4u);
  const Conv larger{kB, 4096, 2048, 3, 5};
  EXPECT_EQ(Predicted(fit.tmpl, {Bytes(larger)}), 4ull * 4096 * 2048 * 3 * 5);
}

// From three launches a product of four is not tried: one of thousands would
// fit by chance.
TEST(RoundedFitTest, AProductOfFourNeedsFourLaunchesOfDistinctExtents) {
  const KernelFit fit = FitConvolutions({{512, 256, 3, 1}, {1024, 512, 1, 3}, {768, 384, 3, 3}});
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].kind, Region::Kind::kRest);
}

TEST(RoundedFitTest, OneLaunchInEightMayBringANeighboursPagesAlong) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize);
  for (uint64_t i = 0; i < 16; ++i) {
    const uint64_t n = (1 + i) << 20;
    const uint64_t end = i == 5 ? kA + 4 * n + 3 * kBlock : PageUp(kA + 4 * n);  // once, 6 MiB of a neighbour
    b.Launch("k", {kA, n}, {Read(kA, end)});
  }
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {Factor{Factor::Kind::kArg, {1, 0, 8}}}, 0}));
}

TEST(RoundedFitTest, AFreshAllocationsSilentFirstWriteSaysNothing) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize);
  b.Launch("k", {kA, 1 << 20}, {});  // first touch: populated on the GPU, nothing migrated
  for (uint64_t n : {2 << 20, 3 << 20}) b.Launch("k", {kA, n}, {Write(kA, PageUp(kA + 4 * n))});
  const KernelFit fit = FitAll(b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  EXPECT_EQ(fit.tmpl.regions[0].extent, (LinearExpr{4, 1, {Factor{Factor::Kind::kArg, {1, 0, 8}}}, 0}));
}

// Bad input: 4 KiB of arguments, ranges outside every allocation,
// overlapping allocations, and many launches of one kernel, in bounded time.
TEST(RoundedFitTest, WideArgumentsAndManyLaunchesFitInBoundedTime) {
  TraceBuilder b(kPage);
  b.Alloc(kA, kSize).Alloc(kA + kBlock, kBlock);  // overlaps the first: the newer wins
  std::array<uint64_t, 512> wide{};               // 4 KiB, the most a launch passes
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = i % 3 == 0 ? kA + kSize / 2 + i * kPage : 1000 + i;
  for (int i = 0; i < 2000; ++i) {
    wide[1] = 1000 + static_cast<uint64_t>(i);
    b.LaunchBytes("wide", {Bytes(wide)}, {Read(kA + kSize / 2, kA + kSize / 2 + kPage)});
  }
  b.Launch("outside", {kA, 5}, {Read(kB, kB + kPage)});
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Observation> obs = Observe(b.trace());
  std::vector<const Observation*> wide_obs, outside;
  for (const Observation& o : obs) (o.launch->kernel == "wide" ? wide_obs : outside).push_back(&o);
  const KernelFit fit = FitKernel(wide_obs, kPage);
  const KernelFit out = FitKernel(outside, kPage);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(fit.predictable) << fit.reason;
  EXPECT_FALSE(out.predictable);
  EXPECT_NE(out.reason.find("outside every allocation"), std::string::npos) << out.reason;
  EXPECT_LT(seconds, 60.0) << "the search is bounded by the launches it samples, not by the trace";
}

}  // namespace
}  // namespace msched

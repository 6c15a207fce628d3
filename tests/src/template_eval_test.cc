#include "model/template_eval.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

ParamLayout FourPointersAndN() { return {{0, 8}, {8, 8}, {16, 8}, {24, 8}}; }

Region Linear(uint16_t base, int64_t coef, std::vector<Factor> factors, AccessMode mode) {
  Region r;
  r.kind = Region::Kind::kLinear;
  r.base = {base, 0, 8};
  r.extent = {coef, 1, std::move(factors), 0};
  r.mode = mode;
  return r;
}

Factor Arg(uint16_t p, uint8_t width = 8) { return {Factor::Kind::kArg, {p, 0, width}}; }

TEST(TemplateEvalTest, LinearRegionsArePageAligned) {
  const ParamLayout layout = FourPointersAndN();
  KernelTemplate t{"k", layout, {Linear(0, 4, {Arg(3)}, AccessMode::kRead)}, {}, 0};
  uint64_t a = 0x100010, b = 0, c = 0, n = 1025;  // 4100 bytes from an unaligned base
  void* params[] = {&a, &b, &c, &n};
  Prediction p;
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x100000, 0x102000}));
  EXPECT_EQ(p.regions()[0].mode, AccessMode::kRead);
  EXPECT_EQ(p.failed_regions(), 0u);
}

TEST(TemplateEvalTest, ProductOfArgumentsAndLaunchDims) {
  const ParamLayout layout = FourPointersAndN();
  Region r = Linear(1, 2, {Arg(2, 4), Arg(3, 4), Factor{Factor::Kind::kBlockX, {}}}, AccessMode::kWrite);
  r.extent.div = 4;
  r.extent.add = 4096;
  KernelTemplate t{"k", layout, {r}, {}, 0};
  uint64_t a = 0, b = 0x200000, m = 8, n = 16;
  void* params[] = {&a, &b, &m, &n};
  LaunchDims dims;
  dims.block[0] = 32;
  uint64_t v = 0;
  ASSERT_TRUE(EvaluateExpr(r.extent, ArgView::FromKernelParams(layout, params), dims, &v));
  EXPECT_EQ(v, 2u * 8 * 16 * 32 / 4 + 4096);
}

TEST(TemplateEvalTest, OverflowInProductFailsTheRegionOnly) {
  const ParamLayout layout = FourPointersAndN();
  KernelTemplate t{"k", layout,
                   {Linear(0, 1 << 20, {Arg(2), Arg(3)}, AccessMode::kRead),  // overflows
                    Linear(1, 1, {Arg(3)}, AccessMode::kRead)},
                   {}, 0};
  uint64_t a = 0x1000, b = 0x900000, big = uint64_t{1} << 40, n = 8192;
  void* params[] = {&a, &b, &big, &n};
  Prediction p;
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_EQ(p.failed_regions(), 1u);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x900000, 0x902000}));
}

TEST(TemplateEvalTest, HugeSingleFactorAndNegativeResultsFail) {
  const ParamLayout layout = FourPointersAndN();
  LinearExpr e{1, 1, {Arg(3)}, 0};
  uint64_t zero = 0, n = UINT64_MAX;
  void* params[] = {&zero, &zero, &zero, &n};
  uint64_t v = 0;
  EXPECT_FALSE(EvaluateExpr(e, ArgView::FromKernelParams(layout, params), {}, &v));
  LinearExpr neg{1, 1, {Arg(2)}, -10};
  EXPECT_FALSE(EvaluateExpr(neg, ArgView::FromKernelParams(layout, params), {}, &v));
}

TEST(TemplateEvalTest, StridedRegionEmitsPiecesAndMergesCloseOnes) {
  const ParamLayout layout = FourPointersAndN();
  Region r;
  r.kind = Region::Kind::kStrided;
  r.base = {0, 0, 8};
  r.count = LinearExpr{1, 1, {Arg(3)}, 0};
  r.stride = LinearExpr::Constant(64 * 1024);
  r.extent = LinearExpr::Constant(4096);
  KernelTemplate t{"k", layout, {r}, {}, 0};
  uint64_t a = 0x1000000, zero = 0, n = 3;
  void* params[] = {&a, &zero, &zero, &n};
  Prediction p;
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 3u);
  EXPECT_EQ(p.regions()[2].range, (ByteRange{0x1000000 + 2 * 65536, 0x1000000 + 2 * 65536 + 4096}));

  // Pieces 100 bytes apart merge into one envelope after page alignment.
  t.regions[0].stride = LinearExpr::Constant(4196);
  p.Clear();
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range.begin, 0x1000000u);
  EXPECT_EQ(p.enveloped_regions(), 0u);

  // Too many pieces: one envelope, counted.
  t.regions[0].stride = LinearExpr::Constant(65536);
  n = kMaxStridedPieces + 1;
  p.Clear();
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.enveloped_regions(), 1u);
}

TEST(TemplateEvalTest, MissingArgumentFailsRegion) {
  const ParamLayout layout = {{0, 8}};
  KernelTemplate t{"k", layout, {Linear(0, 1, {Arg(5)}, AccessMode::kRead)}, {}, 0};
  uint64_t a = 0x1000;
  void* params[] = {&a};
  Prediction p;
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_TRUE(p.regions().empty());
  EXPECT_EQ(p.failed_regions(), 1u);
}

TEST(TemplateEvalTest, BaseOffsetWrapIsRejected) {
  const ParamLayout layout = {{0, 8}};
  Region r;
  r.kind = Region::Kind::kFixed;
  r.base = {0, 0, 8};
  r.base_offset = -0x2000;
  r.extent = LinearExpr::Constant(4096);
  KernelTemplate t{"k", layout, {r}, {}, 0};
  uint64_t a = 0x1000;
  void* params[] = {&a};
  Prediction p;
  EvaluateTemplate(t, ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_EQ(p.failed_regions(), 1u);
}

}  // namespace
}  // namespace msched

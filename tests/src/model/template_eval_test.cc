#include "model/template_eval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

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
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
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
  Prediction p(/*alignment=*/1);
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), dims, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range.size(), 2u * 8 * 16 * 32 / 4 + 4096);
}

TEST(TemplateEvalTest, OverflowInProductFailsTheRegionOnly) {
  const ParamLayout layout = FourPointersAndN();
  KernelTemplate t{"k",
                   layout,
                   {Linear(0, 1 << 20, {Arg(2), Arg(3)}, AccessMode::kRead),  // overflows
                    Linear(1, 1, {Arg(3)}, AccessMode::kRead)},
                   {},
                   0};
  uint64_t a = 0x1000, b = 0x900000, big = uint64_t{1} << 40, n = 8192;
  void* params[] = {&a, &b, &big, &n};
  Prediction p;
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_EQ(p.failed_regions(), 1u);
  EXPECT_EQ(p.failed_bases(), std::vector<uint64_t>{0x1000});  // where the failed region would have begun
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x900000, 0x902000}));
}

TEST(TemplateEvalTest, HugeSingleFactorAndNegativeResultsFail) {
  const ParamLayout layout = FourPointersAndN();
  Region huge = Linear(0, 1, {Arg(3)}, AccessMode::kRead);
  Region negative = Linear(1, 1, {Arg(2)}, AccessMode::kRead);
  negative.extent.add = -10;
  KernelTemplate t{"k", layout, {huge, negative}, {}, 0};
  uint64_t base = 0x1000, zero = 0, n = UINT64_MAX;
  void* params[] = {&base, &base, &zero, &n};
  Prediction p;
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_TRUE(p.regions().empty());
  EXPECT_EQ(p.failed_regions(), 2u);
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
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 3u);
  EXPECT_EQ(p.regions()[2].range, (ByteRange{0x1000000 + 2 * 65536, 0x1000000 + 2 * 65536 + 4096}));
  EXPECT_TRUE(p.regions()[0].piece) << "a piece does not say where the data at its pointer ends";

  // Pieces 100 bytes apart merge into one envelope after page alignment.
  t.regions[0].stride = LinearExpr::Constant(4196);
  p.Clear();
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.regions()[0].range.begin, 0x1000000u);
  EXPECT_FALSE(p.regions()[0].piece) << "the envelope covers the data from its pointer on";
  EXPECT_EQ(p.enveloped_regions(), 0u);

  // Too many pieces: one envelope, counted.
  t.regions[0].stride = LinearExpr::Constant(65536);
  n = kMaxStridedPieces + 1;
  p.Clear();
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  ASSERT_EQ(p.regions().size(), 1u);
  EXPECT_EQ(p.enveloped_regions(), 1u);
}

TEST(TemplateEvalTest, MissingArgumentFailsRegion) {
  const ParamLayout layout = {{0, 8}};
  KernelTemplate t{"k", layout, {Linear(0, 1, {Arg(5)}, AccessMode::kRead)}, {}, 0};
  uint64_t a = 0x1000;
  void* params[] = {&a};
  Prediction p;
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_TRUE(p.regions().empty());
  EXPECT_EQ(p.failed_regions(), 1u);
}

// A struct of three pointer slots, then a block-to-slot byte per block (as
// PyTorch's TensorListMetadata): a launch of two blocks on slots 0 and 1
// leaves slot 2's stale pointer unused, and its region is skipped, without
// counting as a failure.
TEST(TemplateEvalTest, AListSlotPastTheLastBlocksIsSkipped) {
  struct Meta {
    uint64_t slot[3];
    uint8_t slot_of_block[4];
  } meta{{0x100000, 0x200000, 0x300000}, {0, 1, 7, 7}};  // 32 bytes: 4 of padding after the map
  const ParamLayout layout = {{0, sizeof(Meta)}};
  KernelTemplate t{"list", layout, {}, {}, 0};
  for (uint16_t slot = 0; slot < 3; ++slot) {
    Region r;
    r.kind = Region::Kind::kFixed;
    r.base = {0, static_cast<uint16_t>(8 * slot), 8};
    r.extent = LinearExpr::Constant(4096);
    r.list = ListSlot{slot, {0, 24, 8}};
    t.regions.push_back(r);
  }
  const CompiledTemplate compiled(t);
  void* params[] = {&meta};
  auto bases = [&](uint32_t blocks) {
    LaunchDims dims;
    dims.grid[0] = blocks;
    Prediction p;
    compiled.Evaluate(ArgView::FromKernelParams(layout, params), dims, &p);
    EXPECT_EQ(p.failed_regions(), 0u);
    std::vector<uint64_t> out;
    for (const PredictedRegion& r : p.regions()) out.push_back(r.range.begin);
    return out;
  };
  EXPECT_EQ(bases(2), (std::vector<uint64_t>{0x100000, 0x200000})) << "the last block works on slot 1";
  EXPECT_EQ(bases(1), (std::vector<uint64_t>{0x100000}));
  EXPECT_EQ(bases(3), (std::vector<uint64_t>{0x100000, 0x200000, 0x300000})) << "a byte past the slots: all apply";
  EXPECT_EQ(bases(9), (std::vector<uint64_t>{0x100000, 0x200000, 0x300000})) << "past the struct: all apply";
  EXPECT_EQ(bases(0), (std::vector<uint64_t>{0x100000, 0x200000, 0x300000}));
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
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(layout, params), {}, &p);
  EXPECT_EQ(p.failed_regions(), 1u);
}

// The evaluation rules of include/msched/templates.h and model/template_eval.h
// written out plainly, over ArgView::Read and 128-bit arithmetic: the oracle
// the compiled form is checked against (issue 30), kept independent of its
// resolved words and overflow builtins.
std::optional<uint64_t> ReferenceExpr(const LinearExpr& e, const ArgView& args, const LaunchDims& dims) {
  constexpr __int128 kLimit = __int128{1} << 62;  // intermediate magnitudes past this fail
  // Factor::Kind's grid.x to block.z, in order.
  const uint32_t dim_values[] = {dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0], dims.block[1], dims.block[2]};
  __int128 acc = e.coef;
  for (size_t i = 0; e.coef != 0 && i < e.factors.size(); ++i) {
    const Factor& f = e.factors[i];
    const std::optional<uint64_t> v =
        f.kind == Factor::Kind::kArg ? args.Read(f.arg) : dim_values[static_cast<int>(f.kind) - 1];
    if (!v || *v > kLimit) return std::nullopt;
    acc *= *v;
    if (acc > kLimit || acc < -kLimit) return std::nullopt;
  }
  if (e.div <= 0) return std::nullopt;
  acc = acc / e.div + e.add;
  if (acc < 0 || acc > static_cast<__int128>(kMaxRegionBytes)) return std::nullopt;
  return static_cast<uint64_t>(acc);
}

// Whether a list slot's region applies: the byte of its array at the last
// block (grid.x - 1), when that lies in its parameter, is at least its slot.
bool ReferenceSlotInUse(const Region& r, const ArgView& args, const LaunchDims& dims) {
  if (!r.list || dims.grid[0] == 0) return true;
  const ArgRef& a = r.list->slot_of_block;
  const uint8_t* bytes = args.ParamBytes(a.param);
  if (bytes == nullptr || uint64_t{a.offset} + dims.grid[0] - 1 >= (*args.layout())[a.param].size) return true;
  return r.list->slot <= bytes[a.offset + dims.grid[0] - 1];
}

void ReferenceTemplate(const KernelTemplate& t, const ArgView& args, const LaunchDims& dims, Prediction* out) {
  constexpr __int128 kTop = UINT64_MAX;
  for (const Region& r : t.regions) {
    if (!ReferenceSlotInUse(r, args, dims)) continue;
    const std::optional<uint64_t> ptr = args.Read(r.base);
    if (ptr && r.kind == Region::Kind::kRest) {
      out->Add({*ptr, *ptr + std::min(kMaxRegionBytes, UINT64_MAX - *ptr)}, r.mode);
      continue;
    }
    const std::optional<uint64_t> extent = ReferenceExpr(r.extent, args, dims);
    const __int128 base = ptr ? static_cast<__int128>(*ptr) + r.base_offset : -1;
    if (!ptr) {
      out->CountFailure();
      continue;
    }
    if (!extent || base < 0 || base > kTop) {
      out->CountFailure(*ptr);
      continue;
    }
    const uint64_t b = static_cast<uint64_t>(base);
    if (r.kind != Region::Kind::kStrided) {
      if (base + *extent > kTop) {
        out->CountFailure(*ptr);
      } else {
        out->Add({b, b + *extent}, r.mode);
      }
      continue;
    }
    const std::optional<uint64_t> count = ReferenceExpr(r.count, args, dims);
    const std::optional<uint64_t> stride = ReferenceExpr(r.stride, args, dims);
    if (!count || !stride) {
      out->CountFailure(*ptr);
      continue;
    }
    if (*count == 0 || *extent == 0) continue;
    const __int128 last_end = static_cast<__int128>(*count - 1) * *stride + *extent;
    if (last_end > static_cast<__int128>(kMaxRegionBytes) || base + last_end > kTop) {
      out->CountFailure(*ptr);
      continue;
    }
    const bool apart = *stride > *extent && *stride - *extent >= kPageSize;  // gaps of a page or more
    if (apart && *count <= kMaxStridedPieces) {
      for (uint64_t i = 0; i < *count; ++i) out->Add({b + i * *stride, b + i * *stride + *extent}, r.mode);
    } else {
      if (apart) out->CountEnvelope();
      out->Add({b, b + static_cast<uint64_t>(last_end)}, r.mode);
    }
  }
}

// Values that provoke every rule: sizes, device addresses, powers of two and
// their neighbours (the 2^62 and 2^46 limits, 32-bit edges), values that wrap
// when added to, and noise.
uint64_t RandomValue(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: return rng() % 4097;
    case 1: return 0x7f0000000000ull + rng() % (uint64_t{1} << 36);
    case 2: return (uint64_t{1} << (rng() % 64)) + rng() % 3 - 1;
    case 3: return UINT64_MAX - rng() % 4096;
    case 4: return rng() % (uint64_t{1} << 32);
    default: return rng();
  }
}

// Random argument bytes: each 8-byte word one value or two 32-bit ones.
void FillRandom(std::vector<uint8_t>* bytes, std::mt19937_64& rng) {
  for (size_t at = 0; at < bytes->size(); at += 8) {
    uint64_t word = RandomValue(rng);
    if (rng() % 2 == 0) word = (RandomValue(rng) << 32) | (RandomValue(rng) & 0xffffffffu);
    std::memcpy(bytes->data() + at, &word, std::min<size_t>(8, bytes->size() - at));
  }
}

// A template exercising every rule: words past their parameter or the
// layout and of unreadable widths, launch dimensions, zero, negative and
// huge coefficients, divisors and constants, base offsets that wrap, every
// region kind.
KernelTemplate RandomTemplate(std::mt19937_64& rng) {
  auto pick = [&rng](std::initializer_list<int64_t> values) { return *(values.begin() + rng() % values.size()); };
  KernelTemplate t;
  t.name = "random";
  uint32_t at = 0;
  for (uint64_t i = 0, n = 1 + rng() % 6; i < n; ++i) {
    const uint32_t size = static_cast<uint32_t>(pick({1, 2, 4, 8, 8, 12, 16, 24, 40}));
    t.layout.push_back({at, size});
    at += (size + 7) / 8 * 8;
  }
  auto word = [&] {
    return ArgRef{static_cast<uint16_t>(rng() % (t.layout.size() + 1)), static_cast<uint16_t>(4 * (rng() % 11)),
                  static_cast<uint8_t>(pick({8, 8, 4, 4, 2}))};
  };
  auto expr = [&] {
    LinearExpr e;
    e.coef = pick({0, 1, 1, 4, 4096, -3, int64_t{1} << 40, static_cast<int64_t>(rng())});
    e.div = pick({1, 1, 1, 2, 7, 4096, 0, -1});
    e.add = pick({0, 0, 4096, -4096, INT64_MAX, INT64_MIN, static_cast<int64_t>(rng() % 100000)});
    for (uint64_t i = 0, n = rng() % (kMaxFactors + 1); i < n; ++i) {
      const auto kind = static_cast<Factor::Kind>(rng() % 2 ? 0 : rng() % 7);
      e.factors.push_back({kind, kind == Factor::Kind::kArg ? word() : ArgRef{}});
    }
    return e;
  };
  for (uint64_t i = 0, n = 1 + rng() % 6; i < n; ++i) {
    Region r;
    r.kind = static_cast<Region::Kind>(rng() % 4);
    r.base = word();
    r.base_offset = pick({0, 0, 64, -64, -(int64_t{1} << 40), INT64_MAX, INT64_MIN});
    r.extent = expr();
    if (r.kind == Region::Kind::kStrided) {
      r.count = expr();
      r.stride = rng() % 2 ? LinearExpr::Constant(pick({100, 4096, 65536, 1 << 20})) : expr();
    }
    r.mode = static_cast<AccessMode>(1 + rng() % 3);
    if (rng() % 3 == 0) r.list = ListSlot{static_cast<uint16_t>(rng() % 8), word()};
    t.regions.push_back(std::move(r));
  }
  return t;
}

// Empty when the compiled form predicts what the reference does for `trials`
// random argument buffers of `t` (as packed buffers, as kernelParams arrays,
// one sometimes null); else what differs, first.
std::string CompareOnRandomArguments(const KernelTemplate& t, int trials, std::mt19937_64& rng) {
  const CompiledTemplate compiled(t);
  size_t bytes = 0;
  for (const ParamInfo& p : t.layout) bytes = std::max<size_t>(bytes, uint64_t{p.offset} + p.size);
  std::vector<uint8_t> buffer(bytes);
  std::vector<void*> params(t.layout.size());
  Prediction want(/*alignment=*/1), got(/*alignment=*/1);
  for (int trial = 0; trial < trials; ++trial) {
    FillRandom(&buffer, rng);
    for (size_t i = 0; i < params.size(); ++i) params[i] = buffer.data() + t.layout[i].offset;
    if (trial % 3 == 2 && !params.empty()) params[rng() % params.size()] = nullptr;
    const ArgView args = trial == 0       ? ArgView()
                         : trial % 3 == 0 ? ArgView::FromBuffer(t.layout, buffer.data(), buffer.size())
                                          : ArgView::FromKernelParams(t.layout, params.data());
    LaunchDims dims;
    for (uint32_t& d : dims.grid) d = static_cast<uint32_t>(RandomValue(rng));
    if (trial % 2 == 1) dims.grid[0] = static_cast<uint32_t>(rng() % 48);  // within a list's array
    for (uint32_t& d : dims.block) d = static_cast<uint32_t>(RandomValue(rng));
    want.Clear();
    got.Clear();
    ReferenceTemplate(t, args, dims, &want);
    compiled.Evaluate(args, dims, &got);
    bool same = want.failed_regions() == got.failed_regions() && want.failed_bases() == got.failed_bases() &&
                want.enveloped_regions() == got.enveloped_regions() && want.regions().size() == got.regions().size();
    for (size_t i = 0; same && i < want.regions().size(); ++i) {
      same = want.regions()[i].range == got.regions()[i].range && want.regions()[i].mode == got.regions()[i].mode;
    }
    if (!same) {
      return "kernel '" + t.name + "', trial " + std::to_string(trial) + ": " + std::to_string(got.regions().size()) +
             " ranges and " + std::to_string(got.failed_regions()) + " failed, against " +
             std::to_string(want.regions().size()) + " and " + std::to_string(want.failed_regions());
    }
  }
  return "";
}

TEST(CompiledTemplateTest, PredictsAsTheRulesSayForShippedAndTestTemplates) {
  std::mt19937_64 rng(30);
  size_t templates = 0;
  for (const char* path : {MSCHED_SHIPPED_TEMPLATES, MSCHED_TEST_TEMPLATES}) {
    const TemplateLoadResult loaded = LoadTemplatesFile(path);
    ASSERT_TRUE(loaded.problems.empty()) << loaded.problems[0].ToString();
    for (const KernelTemplate& t : loaded.templates.kernels) {
      ASSERT_EQ(CompareOnRandomArguments(t, 1000, rng), "");
      ++templates;
    }
  }
  EXPECT_GT(templates, 150u);
}

TEST(CompiledTemplateTest, PredictsAsTheRulesSayForRandomTemplates) {
  std::mt19937_64 rng(3030);
  for (int i = 0; i < 3000; ++i) {
    const KernelTemplate t = RandomTemplate(rng);
    ASSERT_EQ(CompareOnRandomArguments(t, 200, rng), "") << "template " << i << ": " << SerializeTemplates({{t}, {}});
  }
}

}  // namespace
}  // namespace msched

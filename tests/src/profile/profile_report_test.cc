#include "profile/profile_report.h"

#include <gtest/gtest.h>

#include "trace_builder.h"

namespace msched {
namespace {

using tracetest::Read;
using tracetest::TraceBuilder;
using tracetest::Write;

constexpr uint64_t kA = 0x10000000, kB = 0x20000000, kSize = 64 << 20;

RangeSet Set(std::initializer_list<ByteRange> ranges) {
  RangeSet s;
  for (const ByteRange& r : ranges) s.Add(r);
  return s;
}

TEST(CompareTest, CountsMissedAndExtraBytesAndPages) {
  // Touched 0x1000..0x3000; predicted 0x2000..0x5000 (bytes) -> 4 KiB missed, 8 KiB extra.
  const Accuracy a = Compare(Set({{0x2000, 0x5000}}), Set({{0x1000, 0x3000}}));
  EXPECT_EQ(a.touched_bytes, 0x2000u);
  EXPECT_EQ(a.predicted_bytes, 0x3000u);
  EXPECT_EQ(a.fn_bytes, 0x1000u);
  EXPECT_EQ(a.fp_bytes, 0x2000u);
  EXPECT_DOUBLE_EQ(a.FnBytesPct(), 50.0);
  EXPECT_NEAR(a.FpBytesPct(), 66.67, 0.01);
}

TEST(CompareTest, PagesCountWhatMigrationWouldMove) {
  // One byte touched, one byte predicted elsewhere on the same page: bytes
  // disagree completely, pages agree.
  const Accuracy a = Compare(Set({{0x1010, 0x1011}}), Set({{0x1000, 0x1001}}));
  EXPECT_EQ(a.fn_bytes, 1u);
  EXPECT_EQ(a.fp_bytes, 1u);
  EXPECT_EQ(a.fn_pages, 0u);
  EXPECT_EQ(a.fp_pages, 0u);
  EXPECT_EQ(a.touched_pages, 4096u);
}

// A trace with one predictable kernel (8 calls), one unpredictable, one seen once.
Trace MixedTrace() {
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (uint64_t i = 0; i < 8; ++i) {
    const uint64_t n = 1000 + 777 * i;
    b.Launch("vadd", {kA, kB, n}, {Read(kA, kA + 4 * n), Write(kB, kB + 4 * n)});
    b.Launch("chase", {kA, 16}, {Read(kA, kA + 16), Read(kB + 4096, kB + 8192)});
  }
  b.Launch("once", {kA}, {Write(kA, kA + 100)});
  return b.trace();
}

TEST(AnalyzeTest, HeldOutCallsArePredictedExactlyWhileWholeAllocationsOverreach) {
  const Trace t = MixedTrace();
  const ProfileReport r = Analyze(t);
  ASSERT_EQ(r.kernels.size(), 3u);
  const KernelReport& vadd = r.kernels[0];
  EXPECT_EQ(vadd.name, "vadd");
  EXPECT_EQ(vadd.kind, "T2");
  EXPECT_EQ(vadd.calls, 8u);
  EXPECT_EQ(vadd.heldout_calls, 4u);
  EXPECT_EQ(vadd.tmpl.fn_bytes, 0u);
  EXPECT_EQ(vadd.tmpl.fp_bytes, 0u);
  EXPECT_GT(vadd.tmpl.touched_bytes, 0u);
  EXPECT_EQ(vadd.naive.fn_bytes, 0u);
  EXPECT_GT(vadd.naive.FpPagesPct(), 99.0);  // two 64 MiB allocations for a few KiB
  EXPECT_EQ(r.tmpl_total.fn_bytes, 0u);
}

TEST(AnalyzeTest, UnpredictableAndSeenOnceKernelsAreNamedWithReasons) {
  const ProfileReport r = Analyze(MixedTrace());
  EXPECT_EQ(r.kernels[1].name, "chase");
  EXPECT_EQ(r.kernels[1].kind, "unpredictable");
  EXPECT_NE(r.kernels[1].reason.find("pointer chasing"), std::string::npos);
  ASSERT_EQ(r.templates.unpredictable.size(), 1u);
  EXPECT_EQ(r.templates.unpredictable[0].name, "chase");
  EXPECT_EQ(r.kernels[2].kind, "T1");
  EXPECT_NE(r.kernels[2].reason.find("seen once"), std::string::npos);
  EXPECT_EQ(r.kernels[2].heldout_calls, 0u);
  ASSERT_EQ(r.templates.kernels.size(), 2u);  // vadd and once
  EXPECT_EQ(r.templates.kernels[0].calls_seen, 8u);
}

TEST(AnalyzeTest, TheSameNameWithTwoLayoutsKeepsTheOneSeenMore) {
  TraceBuilder b;
  b.Alloc(kA, kSize);
  b.Launch("k", {kA}, {Write(kA, kA + 64)});
  for (int i = 0; i < 3; ++i) b.Launch("k", {kA, 5}, {Write(kA, kA + 128)});
  const ProfileReport r = Analyze(b.trace());
  ASSERT_EQ(r.kernels.size(), 2u);
  ASSERT_EQ(r.templates.kernels.size(), 1u);
  EXPECT_EQ(r.templates.kernels[0].layout.size(), 2u);
}

TEST(FormatReportTest, ListsEveryKernelTheTotalsAndTheReasons) {
  const Trace t = MixedTrace();
  const std::string text = FormatReport(Analyze(t), t, "app.jsonl");
  EXPECT_NE(text.find("| vadd | T2 | 8 | 4 | 0.00 | 0.00 | 0.00 | 0.00 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| chase | unpredictable | 8 | 0 |"), std::string::npos) << text;
  EXPECT_NE(text.find("**all predictable kernels**"), std::string::npos);
  EXPECT_NE(text.find("- chase (unpredictable, left to MSCHED_UNKNOWN):"), std::string::npos) << text;
  EXPECT_NE(text.find("- once: seen once"), std::string::npos) << text;
}

// A kernel whose calls all had the same sizes leaves its regions' rules
// unpinned: the report marks it and says to profile a second size; one
// whose sizes varied is not marked.
TEST(FormatReportTest, AKernelSeenAtOneSizeIsMarkedWithWhatToDo) {
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (uint64_t i = 0; i < 4; ++i) {
    b.Launch("weights", {kA, 64}, {Read(kA, kA + 256)});
    b.Launch("vadd", {kA, kB, 1000 + 100 * i}, {Read(kA, kA + 4000 + 400 * i)});
  }
  const Trace t = b.trace();
  const ProfileReport r = Analyze(t);
  EXPECT_EQ(r.one_size_kernels, 1u);
  const std::string text = FormatReport(r, t, "app.jsonl");
  // One size seen: the argument 64 explains the extent as well as a constant.
  EXPECT_NE(text.find("| weights | T2 (one size) | 4 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| vadd | T2 | 4 |"), std::string::npos) << text;
  EXPECT_NE(text.find("One size: 1 kernel (marked \"one size\")"), std::string::npos) << text;
  EXPECT_NE(text.find("msched-profile analyze A.trace B.trace"), std::string::npos) << text;
  EXPECT_NE(text.find("it says nothing of other sizes"), std::string::npos) << text;
}

TEST(FormatReportTest, ACoarseTraceSaysWhatItsPrecisionMeans) {
  TraceBuilder b(65536);
  b.Alloc(kA, kSize);
  b.Launch("k", {kA}, {Write(kA, kA + 65536)});
  const std::string text = FormatReport(Analyze(b.trace()), b.trace(), "t");
  EXPECT_NE(text.find("rounded out to 65536 bytes"), std::string::npos) << text;
}

// matvec(w, rows, cols) reads 4*rows*cols bytes at w. Profiled with rows
// always 64, 4*rows*cols and 256*cols fit equally; only a run at full size
// tells them apart.
Trace MatvecTrace(const std::vector<std::pair<uint64_t, uint64_t>>& shapes, const std::string& other) {
  TraceBuilder b;
  b.Alloc(kA, kSize).Alloc(kB, kSize);
  for (const auto& [rows, cols] : shapes) b.Launch("matvec", {kA, rows, cols}, {Read(kA, kA + 4 * rows * cols)});
  b.Launch(other, {kB}, {Write(kB, kB + 4096)});
  return b.trace();
}

TEST(CheckTemplatesTest, TemplatesFittedOnDegenerateSizesShowTheirMissesAtFullSize) {
  const Trace full = MatvecTrace({{4096, 512}, {4096, 1024}}, "only_at_full_size");
  const TemplateFile degenerate =
      Analyze(MatvecTrace({{64, 256}, {64, 384}, {64, 512}, {64, 640}}, "small_only")).templates;
  const TemplateCheck bad = CheckTemplates(degenerate, full);
  ASSERT_EQ(bad.kernels.size(), 2u);
  EXPECT_EQ(bad.kernels[0].name, "matvec");
  EXPECT_EQ(bad.kernels[0].calls, 2u);
  EXPECT_NEAR(bad.kernels[0].tmpl.FnBytesPct(), 100.0 * (1 - 64.0 / 4096), 0.01);
  // A kernel without a template is scored as the hook predicts it: from each
  // pointer to the end of its allocation (no template predicted a region at
  // its pointer), which misses nothing here.
  EXPECT_EQ(bad.kernels[1].kind, "fallback");
  EXPECT_EQ(bad.kernels[1].tmpl.fn_bytes, 0u);
  EXPECT_GT(bad.kernels[1].tmpl.fp_bytes, 0u);
  EXPECT_EQ(bad.launches, full.launches.size());
  EXPECT_EQ(bad.template_launches, bad.kernels[0].calls);
  const TemplateFile varied =
      Analyze(MatvecTrace({{64, 256}, {96, 256}, {64, 512}, {80, 384}}, "small_only")).templates;
  const TemplateCheck good = CheckTemplates(varied, full);
  EXPECT_EQ(good.kernels[0].tmpl.fn_bytes, 0u);
  EXPECT_EQ(good.kernels[0].tmpl.fp_bytes, 0u);
  const std::string text = FormatCheck(bad, full, "small.templates.json", "full.jsonl");
  EXPECT_NE(text.find("| matvec | T2 | 2 | 0 | 83.33 | 0.00 | 98.44 |"), std::string::npos)
      << text;  // failed, blocks, bytes
  EXPECT_NE(text.find("2 of 3 launches predicted by a template"), std::string::npos) << text;
}

// A GEMM that cuBLAS picks only at full size has no template; the tensors
// it reads were written by a kernel that has one.
TEST(CheckTemplatesTest, AKernelWithoutATemplateReachesAsFarAsATemplatePredictedAtItsPointer) {
  auto trace = [](std::initializer_list<uint64_t> sizes, bool with_gemm) {
    TraceBuilder b;
    b.Alloc(kB, kSize);
    for (uint64_t n : sizes) {
      b.Launch("fill", {kB, n}, {Write(kB, kB + 4 * n)});
      if (with_gemm) b.Launch("gemm_full_size_only", {kB}, {Read(kB, kB + 4 * n)});
    }
    return b.trace();
  };
  const TemplateFile templates = Analyze(trace({1000, 3000, 5000}, false)).templates;
  const TemplateCheck c = CheckTemplates(templates, trace({70000, 90000}, true));
  ASSERT_EQ(c.kernels.size(), 2u);
  EXPECT_EQ(c.kernels[1].kind, "fallback");
  EXPECT_EQ(c.kernels[1].tmpl.fn_bytes, 0u);
  EXPECT_EQ(c.kernels[1].tmpl.fp_bytes, 0u) << "not to the end of the 64 MiB allocation";
}

// PyTorch's foreach kernels take their tensors as a struct of 110 pointer
// slots and 110 counts; past the last slot in use both hold stack garbage.
// A region there that fails to evaluate is no failure; one whose pointer
// lies in an allocation is, and its launch falls back.
TEST(CheckTemplatesTest, AFailedRegionCountsOnlyWhenItsPointerIsInTheJobsMemory) {
  KernelTemplate t;
  t.name = "list";
  t.layout = {{0, 16}, {16, 16}};  // two pointer slots, then two counts
  for (uint16_t slot = 0; slot < 2; ++slot) {
    Region r;
    r.base = {0, static_cast<uint16_t>(8 * slot), 8};
    r.kind = Region::Kind::kLinear;
    r.extent = {4, 1, {Factor{Factor::Kind::kArg, {1, static_cast<uint16_t>(8 * slot), 8}}}, 0};
    t.regions.push_back(r);
  }
  TemplateFile templates;
  templates.kernels.push_back(t);
  auto trace = [&](uint64_t second_slot) {
    const uint64_t slots[2] = {kA, second_slot}, counts[2] = {1024, UINT64_MAX};
    TraceBuilder b;
    b.Alloc(kA, kSize);
    b.LaunchBytes("list", {tracetest::Bytes(slots), tracetest::Bytes(counts)}, {Write(kA, kA + 4096)});
    return b.trace();
  };
  const Trace garbage = trace(0x7ffc29470900);
  const TemplateCheck c = CheckTemplates(templates, garbage);
  ASSERT_EQ(c.kernels.size(), 1u);
  EXPECT_EQ(c.kernels[0].failed_calls, 0u);
  EXPECT_EQ(c.template_launches, 1u);
  EXPECT_EQ(c.total.fp_bytes, 0u) << "not to the end of the allocation";
  const TemplateCheck stale = CheckTemplates(templates, trace(kA + 8192));
  EXPECT_EQ(stale.kernels[0].failed_calls, 1u);
  EXPECT_EQ(stale.template_launches, 0u);
  EXPECT_GT(stale.total.fp_bytes, 0u) << "the fallback's, to the end of the allocation";
  const std::string text = FormatCheck(stale, garbage, "t.json", "t.trace");
  EXPECT_NE(text.find("| list | T2 | 1 | 1 |"), std::string::npos) << text;
  EXPECT_NE(CheckJson(stale).find("\"failed_calls\": 1"), std::string::npos);
}

}  // namespace
}  // namespace msched

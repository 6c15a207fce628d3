// What the fitter and the run-time prediction achieve on real programs: the
// CUPTI traces recorded on an H200 (PyTorch training, a transformers Llama,
// torchvision ResNet-50), the copies in bench/traces (see its README).
// Each case fits templates on some launches and scores msched's run-time
// prediction (the template, else the pointer fallback) on others, in 2 MiB
// blocks: fn_blocks, touched but not predicted; fp_blocks, predicted but not
// touched. The targets: fn at most 1% of touched blocks, fp at most 10% of
// predicted blocks, at least 90% of launches predicted by a template. The
// one case that does not reach them holds to the figure it reaches, so that
// a change that makes it worse fails; its comment says what is left.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "base/subprocess.h"
#include "profile/profile_report.h"
#include "profile/trace.h"

namespace msched {
namespace {

namespace fs = std::filesystem;

// Decompresses each trace once into a temporary directory.
class SharedTraces {
 public:
  static SharedTraces& Get() {
    static SharedTraces* traces = new SharedTraces();  // leaked: outlives every test
    return *traces;
  }
  // The trace, or null (with *why) when it cannot be read.
  const Trace* Find(const std::string& name, std::string* why) {
    auto it = traces_.find(name);
    if (it != traces_.end()) return &it->second;
    const fs::path xz = fs::path(MSCHED_REAL_TRACES) / (name + ".trace.xz");
    if (!fs::exists(xz)) {
      *why = xz.string() + " is missing";
      return nullptr;
    }
    const fs::path out = dir_ / (name + ".trace");
    SpawnOptions options;
    options.stdout_path = out.string();
    Result<Subprocess> xzcat = Subprocess::Spawn({"xz", "-dc", xz.string()}, options);
    if (!xzcat.ok() || xzcat->Wait() != 0) {
      *why = "xz -dc " + xz.string() + " failed (scripts/setup.sh installs xz-utils)";
      return nullptr;
    }
    TraceReadResult r = ReadTrace(out.string());
    if (!r.status.ok() || !r.problems.empty()) {
      *why = out.string() + ": " + r.status.ToString() + (r.problems.empty() ? "" : " " + r.problems[0]);
      return nullptr;
    }
    return &traces_.emplace(name, std::move(r.trace)).first->second;
  }

 private:
  SharedTraces() {
    char pattern[] = "/tmp/msched-traces-XXXXXX";
    dir_ = mkdtemp(pattern) ? pattern : "/tmp";
  }
  ~SharedTraces() = delete;
  fs::path dir_;
  std::map<std::string, Trace> traces_;
};

// Every launch of `t` whose index among its kernel's launches has parity
// `parity` (0: even, 1: odd); allocation events stay as they are.
Trace KernelCalls(const Trace& t, int parity) {
  Trace out = t;
  out.launches.clear();
  std::map<std::pair<std::string, ParamLayout>, size_t> seen;
  for (const TraceLaunch& l : t.launches) {
    if (seen[{l.kernel, l.layout}]++ % 2 == static_cast<size_t>(parity)) out.launches.push_back(l);
  }
  return out;
}

struct Score {
  double fn_blocks_pct, fp_blocks_pct, template_pct;
};

Score ScoreOn(const TemplateFile& templates, const Trace& check) {
  const TemplateCheck c = CheckTemplates(templates, check);
  const Score s{c.total.FnBlocksPct(), c.total.FpBlocksPct(),
                c.launches ? 100.0 * static_cast<double>(c.template_launches) / static_cast<double>(c.launches) : 0};
  std::printf("  fn_blocks %.2f%% of %llu, fp_blocks %.2f%% of %llu, %.1f%% of %llu launches by a template\n",
              s.fn_blocks_pct, static_cast<unsigned long long>(c.total.touched_blocks), s.fp_blocks_pct,
              static_cast<unsigned long long>(c.total.predicted_blocks), s.template_pct,
              static_cast<unsigned long long>(c.launches));
  return s;
}

// The bounds a case must keep: the targets unless stated otherwise.
struct Bounds {
  double fn_blocks_pct = 1.0;
  double fp_blocks_pct = 10.0;
  double template_pct = 90.0;
};

void Expect(const Score& s, const Bounds& b) {
  EXPECT_LE(s.fn_blocks_pct, b.fn_blocks_pct);
  EXPECT_LE(s.fp_blocks_pct, b.fp_blocks_pct);
  EXPECT_GE(s.template_pct, b.template_pct);
}

#define LOAD_OR_SKIP(var, name)                                  \
  std::string why_##var;                                         \
  const Trace* var = SharedTraces::Get().Find(name, &why_##var); \
  if (var == nullptr) GTEST_SKIP() << why_##var

const char* kTrainer256 = "train-w256-s3";
const char* kTrainer512 = "train-w512-s3";
const char* kLlamaSmall = "llama-8x1024-t3";
const char* kLlamaLarge = "llama-16x2048-t2";
const char* kResnet = "resnet50-b8-s2";

// Fitted on the trace itself, checked on every launch of it.
void InSample(const char* name, const Bounds& bounds) {
  LOAD_OR_SKIP(trace, name);
  std::printf("%s, in sample:\n", name);
  Expect(ScoreOn(Analyze(*trace).templates, *trace), bounds);
}

// Fitted on each kernel's even-numbered calls, checked on its odd ones.
void EvenOdd(const char* name, const Bounds& bounds) {
  LOAD_OR_SKIP(trace, name);
  std::printf("%s, even calls on odd:\n", name);
  Expect(ScoreOn(Analyze(KernelCalls(*trace, 0)).templates, KernelCalls(*trace, 1)), bounds);
}

// Fitted on one size, checked on another.
void AcrossSizes(const char* fit_name, const char* check_name, const Bounds& bounds) {
  LOAD_OR_SKIP(fit, fit_name);
  LOAD_OR_SKIP(check, check_name);
  std::printf("%s on %s:\n", fit_name, check_name);
  Expect(ScoreOn(Analyze(*fit).templates, *check), bounds);
}

TEST(RealTracesTest, EveryProgramInSample) {
  for (const char* name : {kLlamaSmall, kLlamaLarge, kResnet, kTrainer256, kTrainer512}) InSample(name, {});
}

TEST(RealTracesTest, EvenCallsPredictOddCalls) {
  for (const char* name : {kLlamaSmall, kLlamaLarge, kResnet, kTrainer256, kTrainer512}) EvenOdd(name, {});
}

TEST(RealTracesTest, LlamaSizesPredictEachOther) {
  AcrossSizes(kLlamaSmall, kLlamaLarge, {});
  AcrossSizes(kLlamaLarge, kLlamaSmall, {});
}

// cuBLAS picks other GEMM kernels at width 256 (sm80_xmma_gemm
// ..._tn_n_32x32x8) than at 512, which a width-512 profile never sees: the
// fallback predicts them from the extents templates predicted at their
// pointers (model/extent_memo.h; to the ends of their allocations, 12.7% fp
// blocks, without). Left, from 256 to 512: at width 256 each GEMM kernel
// runs one shape (sgemm_largek only at m=10, k=256), so no profile of it can
// say which of the struct's sizes its B matrix follows at width 512 (m=512,
// k=16384).
TEST(RealTracesTest, TrainerSizesPredictEachOther) {
  AcrossSizes(kTrainer256, kTrainer512, {.fn_blocks_pct = 6.0});
  AcrossSizes(kTrainer512, kTrainer256, {});
}

// Both sizes of a program fitted together (what msched-profile analyze
// does with several traces) predict each of them.
TEST(RealTracesTest, BothSizesFittedTogetherPredictEach) {
  for (const auto& [small, large] : {std::pair{kLlamaSmall, kLlamaLarge}, std::pair{kTrainer256, kTrainer512}}) {
    LOAD_OR_SKIP(a, small);
    LOAD_OR_SKIP(b, large);
    Result<Trace> merged = MergeTraces({*a, *b});
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    const TemplateFile templates = Analyze(*merged).templates;
    for (const auto& [name, trace] : {std::pair{small, a}, std::pair{large, b}}) {
      std::printf("%s and %s together, on %s:\n", small, large, name);
      Expect(ScoreOn(templates, *trace), {});
    }
  }
}

// The templates every job loads (templates/, fitted from all five traces)
// predict each program, every launch by its template: none falls back, not
// even the optimizer's foreach kernels, whose unused tensor slots hold
// garbage.
TEST(RealTracesTest, ShippedTemplatesPredictEveryProgram) {
  const TemplateLoadResult shipped = LoadTemplatesFile(MSCHED_SHIPPED_TEMPLATES);
  ASSERT_TRUE(shipped.problems.empty()) << shipped.problems[0].ToString();
  ASSERT_FALSE(shipped.templates.kernels.empty());
  for (const char* name : {kLlamaSmall, kLlamaLarge, kResnet, kTrainer256, kTrainer512}) {
    LOAD_OR_SKIP(trace, name);
    std::printf("shipped templates on %s:\n", name);
    Expect(ScoreOn(shipped.templates, *trace), {.template_pct = 100.0});
  }
}

// The optimizer's foreach kernels take their tensors in a struct whose
// slots past the launch's last tensor still point at tensors; the shipped
// templates skip those slots (ListSlot), which were 2-3% of the blocks they
// predicted on the trainer's traces.
TEST(RealTracesTest, ShippedTemplatesSkipTheStaleSlotsOfTheOptimizersLists) {
  const TemplateLoadResult shipped = LoadTemplatesFile(MSCHED_SHIPPED_TEMPLATES);
  ASSERT_TRUE(shipped.problems.empty()) << shipped.problems[0].ToString();
  for (const char* name : {kTrainer256, kTrainer512}) {
    LOAD_OR_SKIP(trace, name);
    std::printf("shipped templates on %s:\n", name);
    Expect(ScoreOn(shipped.templates, *trace), {.fp_blocks_pct = 1.0, .template_pct = 100.0});
  }
}

}  // namespace
}  // namespace msched

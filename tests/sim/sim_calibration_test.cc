// Calibration of the simulated device's demand paging against the MSched
// paper's measurements, with no per-scenario constant: the same jobs run
// together on one device with all memory managed and no prefetch (demand
// paging), and one at a time in plain device memory (each alone in HBM); the
// collapse is the first makespan over the second.
//  - micro-benchmark (section 7.1): two vector-add and two matrix-multiply
//    processes at 150% of HBM; the paper measures a 16.2x collapse past 100%;
//  - concurrent LLM decode (sections 1 and 3): three Llama3-8B-like
//    instances, 8.5 GB of weights each on a 16 GB card; the paper's worst
//    case is 78x.
// Each must be within 1.5x of the paper's figure; the figures are printed
// and recorded in docs/simulator.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "msim_run_jobs.h"

namespace {

using msim_test::Job;

constexpr uint64_t kHbm = 16ull << 30;  // rtx5080-pcie5

double Collapse(const std::vector<Job>& jobs, const std::string& name) {
  const std::vector<uint64_t> um = msim_test::RunJobs(jobs, true, name + "um");
  const std::vector<uint64_t> alone = msim_test::RunJobs(jobs, false, name + "alone");
  const double last_alone = static_cast<double>(*std::max_element(alone.begin(), alone.end()));
  return last_alone > 0 ? static_cast<double>(*std::max_element(um.begin(), um.end())) / last_alone : 0;
}

TEST(SimCalibrationTest, MicroBenchmarkCollapsesUnderDemandPagingAsMeasured) {
  const std::string foot = "FOOT=" + std::to_string(static_cast<uint64_t>(1.5 * kHbm / 4) & ~0xffffull);
  const std::vector<Job> jobs = {{"micro_vadd.json", {foot, "TASKS=40"}},
                                 {"micro_vadd.json", {foot, "TASKS=40"}},
                                 {"micro_matmul.json", {foot, "TASKS=40", "DIM=2048"}},
                                 {"micro_matmul.json", {foot, "TASKS=40", "DIM=2048"}}};
  const double collapse = Collapse(jobs, "micro");
  std::printf("calibration: micro-benchmark at 150%% of HBM, demand paging / one at a time = %.1fx (paper: 16.2x)\n",
              collapse);
  RecordProperty("micro_collapse_x10", static_cast<int>(collapse * 10));
  EXPECT_GE(collapse, 16.2 / 1.5);
  EXPECT_LE(collapse, 16.2 * 1.5);
}

TEST(SimCalibrationTest, ConcurrentLlmDecodeCollapsesUnderDemandPagingAsMeasured) {
  const std::string foot = "FOOT=" + std::to_string(static_cast<uint64_t>(0.53125 * kHbm) & ~0xffffull);
  const Job llama{"llm_decode.json", {foot, "LAYERS=32", "KVDIM=128", "STEPS=8", "COLS=4096", "MAXCTX=1024"}};
  const double collapse = Collapse({llama, llama, llama}, "llm");
  std::printf("calibration: three LLM decoders at 159%% of HBM, demand paging / one at a time = %.1fx (paper: 78x)\n",
              collapse);
  RecordProperty("llm_collapse_x10", static_cast<int>(collapse * 10));
  EXPECT_GE(collapse, 78 / 1.5);
  EXPECT_LE(collapse, 78 * 1.5);
}

}  // namespace

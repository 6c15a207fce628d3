// Calibration of the simulated device against the MSched paper (section
// 7.1): under demand paging, the micro-benchmark (two vector-add and two
// matrix-multiply processes, equal memory each) must fall off a throughput
// cliff once its footprint passes HBM. The paper measures 16.2x on an
// RTX 5080; this asserts a cliff of that order (5x to 50x) and prints the
// figure, recorded in docs/simulator.md. The model is not tuned to it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"

namespace {

constexpr uint64_t kHbm = 16ull << 30;  // rtx5080-pcie5

struct ProcessRun {
  std::string workload;
  std::vector<std::string> extra;
};

// Runs the four processes at `fraction` of HBM on one shared device; returns
// each process's measured tasks per virtual second.
std::vector<double> Throughputs(double fraction) {
  const uint64_t foot = static_cast<uint64_t>(fraction * kHbm / 4);
  const std::string device = "calib" + std::to_string(getpid()) + "_" + std::to_string(static_cast<int>(fraction * 100));
  const std::vector<ProcessRun> runs = {
      {"micro_vadd.json", {"--set", "TASKS=60"}},
      {"micro_vadd.json", {"--set", "TASKS=60"}},
      {"micro_matmul.json", {"--set", "DIM=4096", "--set", "TASKS=5"}},
      {"micro_matmul.json", {"--set", "DIM=4096", "--set", "TASKS=5"}},
  };
  std::vector<msched::Subprocess> procs;
  std::vector<std::string> outputs;
  for (size_t i = 0; i < runs.size(); ++i) {
    outputs.push_back(testing::TempDir() + device + "_" + std::to_string(i) + ".json");
    std::vector<std::string> argv = {MSIM_RUN, std::string(WORKLOADS_DIR) + "/" + runs[i].workload, "--managed",
                                     "--no-checksum", "--set", "INIT=0", "--set", "FOOT=" + std::to_string(foot),
                                     "--json", outputs.back()};
    argv.insert(argv.end(), runs[i].extra.begin(), runs[i].extra.end());
    msched::SpawnOptions opts;
    opts.env = {{"MSIM_DEVICE", device}, {"MSIM_HOST_KERNELS", "off"}, {"MSIM_PROFILE", "rtx5080-pcie5"},
                {"MSIM_START_BARRIER", "4"}};
    opts.unset_env = {"MSIM_HBM_BYTES", "LD_PRELOAD"};
    auto p = msched::Subprocess::Spawn(argv, opts);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) procs.push_back(std::move(*p));
  }
  std::vector<double> out;
  for (size_t i = 0; i < procs.size(); ++i) {
    EXPECT_EQ(procs[i].Wait(), 0);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(outputs[i]), nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "no result from " << outputs[i];
      continue;
    }
    const double tasks = runs[i].workload == "micro_vadd.json" ? 60 : 5;
    const double seconds = (j["virtual_time_ns"].get<double>() - j["marks"]["measured"].get<double>()) / 1e9;
    out.push_back(tasks / seconds);
  }
  unlink(("/dev/shm/msim-" + device).c_str());
  return out;
}

TEST(SimCalibrationTest, DemandPagingFallsOffACliffJustPastHbm) {
  const std::vector<double> in_hbm = Throughputs(0.9);
  const std::vector<double> over = Throughputs(1.1);
  ASSERT_EQ(in_hbm.size(), 4u);
  ASSERT_EQ(over.size(), 4u);
  double sum = 0;
  for (size_t i = 0; i < 4; ++i) sum += in_hbm[i] / over[i];
  const double cliff = sum / 4;
  std::printf("calibration: throughput at 90%% / 110%% of HBM = %.1fx (paper: 16.2x)\n", cliff);
  RecordProperty("cliff_x10", static_cast<int>(cliff * 10));
  EXPECT_GE(cliff, 5.0);
  EXPECT_LE(cliff, 50.0);
}

}  // namespace

// Runs workloads (msim-run processes) on one fresh simulated device, together
// (a start barrier, all memory managed: demand paging) or one after another
// in plain device memory, and reports each process's virtual end time. Used
// by the calibration and determinism tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"

namespace msim_test {

struct Job {
  std::string workload;           // file under bench/workloads
  std::vector<std::string> vars;  // NAME=VALUE
};

// The device time each job ended at, in job order. Together: all start at
// once on a shared device with managed memory. Otherwise one at a time, the
// device clock carrying on from job to job. Each process is ranked by its
// index (MSIM_RANK).
inline std::vector<uint64_t> RunJobs(const std::vector<Job>& jobs, bool together, const std::string& tag) {
  const std::string device = "runjobs" + std::to_string(getpid()) + tag;
  std::vector<uint64_t> ends(jobs.size(), 0);
  auto run = [&](const std::vector<size_t>& batch) {
    std::vector<std::pair<size_t, msched::Subprocess>> procs;
    for (size_t i : batch) {
      const std::string out = testing::TempDir() + device + "_" + std::to_string(i) + ".json";
      std::vector<std::string> argv = {MSIM_RUN, std::string(WORKLOADS_DIR) + "/" + jobs[i].workload,
                                       "--no-checksum", "--set", "INIT=0", "--set", "WARMUP=0", "--json", out};
      if (together) argv.push_back("--managed");
      for (const std::string& v : jobs[i].vars) argv.insert(argv.end(), {"--set", v});
      msched::SpawnOptions opts;
      opts.env = {{"MSIM_DEVICE", device}, {"MSIM_HOST_KERNELS", "off"}, {"MSIM_PROFILE", "rtx5080-pcie5"},
                  {"MSIM_RANK", std::to_string(i)}};
      opts.unset_env = {"MSIM_HBM_BYTES", "LD_PRELOAD"};
      if (batch.size() > 1) opts.env["MSIM_START_BARRIER"] = std::to_string(batch.size());
      else opts.unset_env.push_back("MSIM_START_BARRIER");
      opts.stdout_path = "/dev/null";
      auto p = msched::Subprocess::Spawn(argv, opts);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      if (p.ok()) procs.emplace_back(i, std::move(*p));
    }
    for (auto& [i, proc] : procs) {
      EXPECT_EQ(proc.Wait(), 0);
      const std::string out = testing::TempDir() + device + "_" + std::to_string(i) + ".json";
      nlohmann::json j = nlohmann::json::parse(std::ifstream(out), nullptr, false);
      if (j.is_discarded()) {
        ADD_FAILURE() << "no result from " << out;
        continue;
      }
      ends[i] = j["virtual_time_ns"].get<uint64_t>();
    }
  };
  std::vector<size_t> all;
  for (size_t i = 0; i < jobs.size(); ++i) all.push_back(i);
  if (together) {
    run(all);
  } else {
    for (size_t i : all) run({i});
  }
  unlink(("/dev/shm/msim-" + device).c_str());
  return ends;
}

}  // namespace msim_test

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
// index (MSIM_RANK). `hbm_bytes` > 0 sizes the device (else the profile's).
// Timing only unless `compute`: then inputs are written and results
// computed on the host, as in the benchmark's quick form, which takes real
// time of its own between calls.
inline std::vector<uint64_t> RunJobs(const std::vector<Job>& jobs, bool together, const std::string& tag,
                                     uint64_t hbm_bytes = 0, bool compute = false) {
  const std::string device = "runjobs" + std::to_string(getpid()) + tag;
  std::vector<uint64_t> ends(jobs.size(), 0);
  auto run = [&](const std::vector<size_t>& batch) {
    std::vector<std::pair<size_t, msched::Subprocess>> procs;
    for (size_t i : batch) {
      const std::string out = testing::TempDir() + device + "_" + std::to_string(i) + ".json";
      std::vector<std::string> argv = {
          MSIM_RUN, std::string(WORKLOADS_DIR) + "/" + jobs[i].workload, "--set", "WARMUP=0", "--json", out};
      if (!compute) argv.insert(argv.end(), {"--no-checksum", "--set", "INIT=0"});
      if (together) argv.push_back("--managed");
      for (const std::string& v : jobs[i].vars) argv.insert(argv.end(), {"--set", v});
      msched::SpawnOptions opts;
      opts.env = {{"MSIM_DEVICE", device},
                  {"MSIM_HOST_KERNELS", compute ? "on" : "off"},
                  {"MSIM_PROFILE", "rtx5080-pcie5"},
                  {"MSIM_RANK", std::to_string(i)}};
      opts.unset_env = {"LD_PRELOAD"};
      if (hbm_bytes > 0)
        opts.env["MSIM_HBM_BYTES"] = std::to_string(hbm_bytes);
      else
        opts.unset_env.push_back("MSIM_HBM_BYTES");
      if (batch.size() > 1)
        opts.env["MSIM_START_BARRIER"] = std::to_string(batch.size());
      else
        opts.unset_env.push_back("MSIM_START_BARRIER");
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

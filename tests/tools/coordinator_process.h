// CoordinatorProcessTest: mschedd as a process and vector-add jobs as
// msim-run processes with libmsched preloaded, sharing one simulated GPU of
// 64 MiB; the coordinator's status read through the msched command line.
// Shared by the coordinator's process tests and those of the memory a job
// holds (memory_ownership_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "run_program.h"

namespace msched::testsupport {

using nlohmann::json;
constexpr uint64_t kMiB = 1 << 20;
namespace ts = msched::testsupport;

inline std::string Templates() { return std::string(WORKLOADS_DIR) + "/kernels"; }

class CoordinatorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "coordp_" + std::to_string(getpid()) + "_" + std::to_string(serial_++);
    ::mkdir(dir_.c_str(), 0700);
    device_ = "coordp" + std::to_string(getpid()) + "_" + std::to_string(serial_);
  }
  void TearDown() override {
    for (auto& j : jobs_) j.Kill(SIGKILL), j.Wait();
    if (daemon_) daemon_->Kill(SIGTERM), daemon_->Wait();
    ::unlink(("/dev/shm/msim-" + device_).c_str());
  }
  std::string socket() const { return dir_ + "/s.sock"; }

  void StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        MSCHEDD,           "--socket", socket(), "--gpu-memory",       std::to_string(kHbm),
        "--oversubscribe", "4",        "--log",  dir_ + "/mschedd.log"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // Beside the jobs' simulated GPU, as docs/coordinator.md says to start
    // it there: its clock is the device's.
    msched::SpawnOptions o;
    o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR}, {"MSIM_DEVICE", device_}, {"MSIM_HBM_BYTES", std::to_string(kHbm)}};
    auto d = msched::Subprocess::Spawn(argv, o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));
    // Until it answers: the socket file alone may be a killed predecessor's,
    // which the new coordinator replaces only once it has started.
    for (int i = 0; i < 250 && !Status().is_object(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Starts a vector-add job (workload_) of `foot` bytes and `tasks` tasks;
  // returns its index.
  size_t StartJob(uint64_t foot, int tasks, std::map<std::string, std::string> env = {}) {
    return StartProgram({workload_, "--set", "FOOT=" + std::to_string(foot), "--set", "TASKS=" + std::to_string(tasks)},
                        std::move(env));
  }
  // Starts msim-run with `args` as a job of this GPU's coordinator; returns
  // its index.
  size_t StartProgram(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    const size_t i = jobs_.size();
    msched::SpawnOptions o;
    o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},  {"LD_PRELOAD", LIBMSCHED},
             {"MSIM_DEVICE", device_},          {"MSIM_HBM_BYTES", std::to_string(kHbm)},
             {"MSCHED_SOCKET", socket()},       {"MSCHED_COORD", "required"},
             {"MSCHED_TEMPLATES", Templates()}, {"MSCHED_JOB_NAME", "job" + std::to_string(i)},
             {"MSCHED_LOG_LEVEL", "warn"}};
    for (auto& [k, v] : env) o.env[k] = v;
    o.stdout_path = Out(i);
    o.stderr_path = dir_ + "/job" + std::to_string(i) + ".err";
    std::vector<std::string> argv = {MSIM_RUN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = msched::Subprocess::Spawn(argv, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    jobs_.push_back(std::move(*p));
    return i;
  }
  std::string Out(size_t i) const { return dir_ + "/job" + std::to_string(i) + ".out"; }
  std::string Err(size_t i) const { return ts::Slurp(dir_ + "/job" + std::to_string(i) + ".err"); }

  // The checksum a job of this shape prints when it runs alone, uncoordinated.
  std::string AloneChecksum(uint64_t foot, int tasks) {
    const ts::ProgramRun r = ts::RunProgram(
        {MSIM_RUN, workload_, "--set", "FOOT=" + std::to_string(foot), "--set", "TASKS=" + std::to_string(tasks)},
        {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
         {"MSIM_DEVICE", device_ + "alone"},
         {"MSIM_HBM_BYTES", std::to_string(kHbm)},
         {"LD_PRELOAD", ""}});
    ::unlink(("/dev/shm/msim-" + device_ + "alone").c_str());
    return ts::Checksums(r.out);
  }

  json Status() {
    const ts::ProgramRun r = ts::RunProgram({MSCHED_CLI, "--socket", socket(), "status", "--json"}, {});
    return json::parse(r.out, nullptr, false);
  }
  ts::ProgramRun Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {MSCHED_CLI, "--socket", socket()});
    return ts::RunProgram(args, {});
  }
  json Job(const std::string& name) {
    const json s = Status();
    if (s.is_object()) {
      for (const json& j : s["jobs"]) {
        if (j["name"] == name) return j;
      }
    }
    return json();
  }
  // Waits until `pred` holds (polling the coordinator), up to `seconds`.
  template <typename Pred>
  bool Eventually(Pred pred, int seconds = 30) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  static constexpr uint64_t kHbm = 64 * kMiB;
  static int serial_;
  std::string dir_, device_;
  std::string workload_ = std::string(WORKLOADS_DIR) + "/micro_vadd.json";  // the jobs' program
  std::optional<msched::Subprocess> daemon_;
  std::vector<msched::Subprocess> jobs_;
};
inline int CoordinatorProcessTest::serial_ = 0;

}  // namespace msched::testsupport

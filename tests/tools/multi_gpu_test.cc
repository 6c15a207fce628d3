// Several GPUs on one node, as users run jobs on them: one coordinator per
// GPU (mschedd --gpu N at gpu<N>.sock), jobs placed with `msched run --gpu N`
// or CUDA_VISIBLE_DEVICES, and a job of two processes, one per GPU (as
// torchrun or vLLM's tensor parallelism runs them). The simulated node has
// two 64 MiB GPUs (MSIM_GPUS=2), each a device of its own; each GPU's jobs
// oversubscribe it. Checked: every job joins the coordinator of its own GPU
// and no other, finishes, and computes what it computes alone; and what a
// job reads from cuMemGetInfo (as a server sizing its cache does) is its
// own GPU's share.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "run_program.h"

namespace {

namespace ts = msched::testsupport;
using nlohmann::json;

constexpr uint64_t kHbm = 64ull << 20;
constexpr uint64_t kFoot = 40ull << 20;  // two per GPU oversubscribe it
constexpr int kTasks = 6;

// Spawn options with `env` set, a variable set to "" removed (as RunProgram does).
msched::SpawnOptions WithEnv(const std::map<std::string, std::string>& env) {
  msched::SpawnOptions o;
  for (const auto& [k, v] : env) {
    if (v.empty()) {
      o.unset_env.push_back(k);
    } else {
      o.env[k] = v;
    }
  }
  return o;
}

class MultiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "mgpu_" + std::to_string(getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    ::mkdir(dir_.c_str(), 0700);
    device_ = "mgpu" + std::to_string(getpid());
  }
  void TearDown() override {
    for (auto& d : daemons_) d.Kill(SIGTERM), d.Wait();
    for (int pid : started_pids_) ::kill(pid, SIGTERM);
    for (const char* gpu : {".gpu0", ".gpu1", "alone"}) ::unlink(("/dev/shm/msim-" + device_ + gpu).c_str());
  }

  // The environment every program here shares: the node, and where its
  // coordinators' sockets are.
  std::map<std::string, std::string> Env() const {
    return {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
            {"MSIM_DEVICE", device_},
            {"MSIM_GPUS", "2"},
            {"MSIM_HBM_BYTES", std::to_string(kHbm)},
            {"MSCHED_SOCKET_DIR", dir_},
            {"MSCHED_SOCKET", ""},
            {"MSCHED_LIB", LIBMSCHED},
            {"MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels"},
            {"MSCHED_COORD", "required"},
            {"MSCHED_LOG_LEVEL", "info"},
            {"CUDA_VISIBLE_DEVICES", ""},
            {"LD_PRELOAD", ""}};
  }

  void StartCoordinator(int gpu, uint64_t hbm = kHbm) {
    msched::SpawnOptions o = WithEnv(Env());
    auto d = msched::Subprocess::Spawn({MSCHEDD, "--gpu", std::to_string(gpu), "--gpu-memory", std::to_string(hbm),
                                        "--oversubscribe", "4", "--log", dir_ + "/gpu" + std::to_string(gpu) + ".log"},
                                       o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemons_.push_back(std::move(*d));
    for (int i = 0; i < 250 && !Status(gpu).is_object(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(Status(gpu).is_object()) << "GPU " << gpu << "'s coordinator did not answer";
  }

  // `msched [ARGS] run ... -- msim-run <vector add>`, started in the background.
  msched::Subprocess StartJob(const std::string& name, std::vector<std::string> run_options,
                              std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {MSCHED_CLI, "run", "--name", name};
    argv.insert(argv.end(), run_options.begin(), run_options.end());
    argv.insert(argv.end(), {"--", MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set",
                             "FOOT=" + std::to_string(kFoot), "--set", "TASKS=" + std::to_string(kTasks)});
    std::map<std::string, std::string> all = Env();
    for (auto& [k, v] : env) all[k] = v;
    msched::SpawnOptions o = WithEnv(all);
    const std::string base = dir_ + "/" + name + std::to_string(serial_++);
    o.stdout_path = base + ".out";
    o.stderr_path = base + ".err";
    outputs_.push_back(base);
    auto p = msched::Subprocess::Spawn(argv, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(*p);
  }

  json Status(int gpu) {
    const ts::ProgramRun r = ts::RunProgram({MSCHED_CLI, "status", "--gpu", std::to_string(gpu), "--json"}, Env());
    return json::parse(r.out, nullptr, false);
  }

  // The names of the jobs GPU `gpu`'s coordinator has seen.
  std::multiset<std::string> JobNames(int gpu) {
    std::multiset<std::string> names;
    const json s = Status(gpu);
    if (s.is_object()) {
      for (const json& j : s["jobs"]) names.insert(j["name"].get<std::string>());
    }
    return names;
  }

  std::string AloneChecksum() {
    const ts::ProgramRun r =
        ts::RunProgram({MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set",
                        "FOOT=" + std::to_string(kFoot), "--set", "TASKS=" + std::to_string(kTasks)},
                       {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                        {"MSIM_DEVICE", device_ + "alone"},
                        {"MSIM_HBM_BYTES", std::to_string(kHbm)},
                        {"MSIM_GPUS", ""},
                        {"CUDA_VISIBLE_DEVICES", ""},
                        {"LD_PRELOAD", ""}});
    EXPECT_EQ(r.status, 0) << r.err;
    return ts::Checksums(r.out);
  }

  void ExpectFinishedLikeAlone(std::vector<msched::Subprocess>& jobs) {
    const std::string alone = AloneChecksum();
    ASSERT_FALSE(alone.empty());
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(jobs[i].Wait(), 0) << ts::Slurp(outputs_[i] + ".err");
      EXPECT_EQ(ts::Checksums(ts::Slurp(outputs_[i] + ".out")), alone) << outputs_[i];
    }
  }

  std::string dir_, device_;
  std::vector<msched::Subprocess> daemons_;
  std::vector<int> started_pids_;  // coordinators msched run started
  std::vector<std::string> outputs_;
  int serial_ = 0;
};

TEST_F(MultiGpuTest, EachGpusJobsMeetAtItsOwnCoordinatorAndATwoGpuJobJoinsBoth) {
  StartCoordinator(0);
  StartCoordinator(1);
  std::vector<msched::Subprocess> jobs;
  jobs.push_back(StartJob("ddp", {"--gpu", "0"}));  // rank 0
  jobs.push_back(StartJob("ddp", {"--gpu", "1"}));  // rank 1
  jobs.push_back(StartJob("solo0", {"--gpu", "0"}));
  jobs.push_back(StartJob("solo1", {"--gpu", "1"}));
  ExpectFinishedLikeAlone(jobs);
  EXPECT_EQ(JobNames(0), (std::multiset<std::string>{"ddp", "solo0"}));
  EXPECT_EQ(JobNames(1), (std::multiset<std::string>{"ddp", "solo1"}));
  for (int gpu : {0, 1}) {
    const json s = Status(gpu);
    ASSERT_TRUE(s.is_object());
    EXPECT_EQ(s["coordinator"]["socket"], dir_ + "/gpu" + std::to_string(gpu) + ".sock");
    // Whether the two took turns depends on how their starts interleave.
    std::printf("GPU %d: %zu jobs, %llu switches\n", gpu, s["jobs"].size(),
                static_cast<unsigned long long>(s["coordinator"]["switches"].get<uint64_t>()));
    for (const json& j : s["jobs"]) EXPECT_EQ(j["run_state"], "finished") << j.dump();
  }
}

// Without --gpu the job goes where CUDA_VISIBLE_DEVICES puts it: msched run
// starts that GPU's coordinator, and the job finds it from its device.
TEST_F(MultiGpuTest, CudaVisibleDevicesPicksTheCoordinator) {
  std::vector<msched::Subprocess> jobs;
  jobs.push_back(StartJob("visible1", {}, {{"CUDA_VISIBLE_DEVICES", "1"}}));
  ExpectFinishedLikeAlone(jobs);
  const json s = Status(1);
  ASSERT_TRUE(s.is_object()) << "msched run started GPU 1's coordinator";
  started_pids_.push_back(s["coordinator"]["pid"].get<int>());
  EXPECT_EQ(JobNames(1), (std::multiset<std::string>{"visible1"}));
  EXPECT_FALSE(Status(0).is_object()) << "nothing asked for GPU 0's";
  EXPECT_NE(ts::Slurp(outputs_[0] + ".err").find("on the machine's GPU 1"), std::string::npos)
      << ts::Slurp(outputs_[0] + ".err");
}

// On this node of two GPUs, CUDA_VISIBLE_DEVICES=0,...,11 must not make
// msched run start twelve coordinators, ten of them for GPUs that do not
// exist, left running idle. The driver's list ends at the first index with
// no GPU: only GPUs 0 and 1 get one.
TEST_F(MultiGpuTest, MschedRunStartsCoordinatorsOnlyForGpusThatExist) {
  std::map<std::string, std::string> env = Env();
  env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3,4,5,6,7,8,9,10,11";
  const ts::ProgramRun r = ts::RunProgram({MSCHED_CLI, "run", "--name", "many", "--", "/bin/true"}, env);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<int> answered;
  for (int gpu = 0; gpu < 12; ++gpu) {
    const json s = Status(gpu);
    if (!s.is_object()) continue;
    answered.push_back(gpu);
    started_pids_.push_back(s["coordinator"]["pid"].get<int>());
  }
  EXPECT_EQ(answered, (std::vector<int>{0, 1}));
  const ts::ProgramRun beyond = ts::RunProgram({MSCHED_CLI, "run", "--gpu", "5", "--", "/bin/true"}, Env());
  EXPECT_EQ(beyond.status, 0) << beyond.err;
  EXPECT_FALSE(Status(5).is_object()) << "--gpu 5 on a node of two";
  if (Status(5).is_object()) started_pids_.push_back(Status(5)["coordinator"]["pid"].get<int>());
}

// A program that allocates before it has a context gets the driver's
// error, and joins its GPU's coordinator at its first allocation with one.
TEST_F(MultiGpuTest, AnAllocationBeforeAnyContextDoesNotDecideTheCoordinator) {
  StartCoordinator(1);
  const ts::ProgramRun r =
      ts::RunProgram({MSCHED_CLI, "run", "--gpu", "1", "--name", "late", "--", PROBE_APP, "late_context"}, Env());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("no context: 201\n"), std::string::npos) << "CUDA_ERROR_INVALID_CONTEXT: " << r.out;
  EXPECT_NE(r.out.find("checksum"), std::string::npos) << r.out;
  EXPECT_EQ(JobNames(1), (std::multiset<std::string>{"late"}));
}

// The probe maps 4 MiB of VMM memory, allocates 8 MiB and prints what
// cuMemGetInfo says: under GPU 1's coordinator, which hands out 32 MiB,
// the job's total is its grant; on GPU 0, uncoordinated, the device's.
TEST_F(MultiGpuTest, MemGetInfoShowsTheShareOfTheJobsOwnGpu) {
  StartCoordinator(1, 32ull << 20);
  auto meminfo = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {MSCHED_CLI, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", PROBE_APP, "vmm"});
    const ts::ProgramRun r = ts::RunProgram(argv, Env());
    EXPECT_EQ(r.status, 0) << r.err;
    unsigned long long free = 0, total = 0;
    const size_t at = r.out.find("meminfo ");
    if (at == std::string::npos ||
        std::sscanf(r.out.c_str() + at, "meminfo free %llu total %llu", &free, &total) != 2) {
      ADD_FAILURE() << "no meminfo line in: " << r.out;
    }
    return std::make_pair(free, total);
  };
  const auto [free1, total1] = meminfo({"--gpu", "1"});
  EXPECT_LE(total1, 32ull << 20) << "GPU 1's coordinator grants at most its 32 MiB";
  EXPECT_GT(total1, 16ull << 20);
  EXPECT_EQ(free1, total1 - (12ull << 20)) << "4 MiB pinned and 8 MiB allocated";
  const auto [free0, total0] = meminfo({"--gpu", "0", "--coord", "off"});
  EXPECT_EQ(total0, kHbm) << "no coordinator: the device's memory";
  EXPECT_EQ(free0, kHbm - (12ull << 20));
}

}  // namespace

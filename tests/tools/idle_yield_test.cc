// An idle job yields: a job that holds its turn on the GPU while
// another waits, and launches nothing for mschedd's --idle-yield, gives the
// turn up, so that the waiting job runs in the gap. Two jobs whose working
// sets do not fit together on a 64 MiB simulated GPU share it under mschedd:
// a loader that computes briefly and then loads data on the host (no
// launch), and a trainer that computes without a pause. Under the default
// idle yield (50 ms) and under --idle-yield off, each twice, the virtual
// times must repeat exactly, the checksums be those of each job alone, and
// the idle yield must make the trainer and the whole run end clearly
// sooner, with the loader no later. Then the shorter idle yield of a
// service, a loader idle before the trainer came, the same when no timer
// sees the idleness and the loader's next launch must, and the options'
// parsing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
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
const std::string kWorkload = std::string(TEST_WORKLOADS_DIR) + "/host_phases.json";

struct JobRun {
  int status = -1;
  std::string checksums;
  uint64_t first_launch_ns = 0;  // msim-run jobs
  uint64_t finished_ns = 0;      // msim-run jobs
  uint64_t idle_yields = 0;      // as the coordinator counted them
  uint64_t coord_wait_ns = 0;    // blocked at its gate, as the job counted it
  uint64_t id = 0;               // the coordinator's: in the order the jobs registered
};

struct Outcome {
  JobRun loader, trainer;
  uint64_t makespan_ns() const { return std::max(loader.finished_ns, trainer.finished_ns); }
  bool loader_registered_first() const { return loader.id != 0 && loader.id < trainer.id; }
};

// The loader's and the trainer's vars, and the trainer's arrival: 0.1 ms in,
// once the loader holds the GPU, so that the two register in that order.
const std::vector<std::string> kLoaderVars = {"--set", "TASKS=4", "--set", "HOST_US=300000"};
const std::vector<std::string> kTrainerVars = {"--set", "TASKS=1500", "--arrive-ns", "100000"};

std::vector<std::string> Workload(const std::vector<std::string>& vars) {
  std::vector<std::string> argv = {MSIM_RUN, kWorkload};
  argv.insert(argv.end(), vars.begin(), vars.end());
  return argv;
}

class IdleYieldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = ::testing::TempDir() + "idle_yield_" + std::to_string(getpid());
    ::mkdir(base_.c_str(), 0700);
  }

  // One run of a loader and a trainer (msim-run workloads get --json) under
  // a coordinator with `idle_yield` and fixed slices of `slice`.
  Outcome RunBoth(const std::string& idle_yield, const std::vector<std::string>& loader = Workload(kLoaderVars),
                  const std::vector<std::string>& trainer = Workload(kTrainerVars),
                  const std::string& slice = "100ms") {
    const std::string dir = base_ + "/" + std::to_string(serial_++);
    ::mkdir(dir.c_str(), 0700);
    const std::string socket = dir + "/s.sock",
                      device = "idleyield" + std::to_string(getpid()) + "_" + std::to_string(serial_);
    Outcome run;
    std::vector<std::string> daemon_argv = {
        MSCHEDD, "--socket",     socket,     "--gpu-memory", std::to_string(kHbm), "--oversubscribe", "4", "--slice",
        slice,   "--idle-yield", idle_yield, "--log",        dir + "/mschedd.log"};
    if (!serving_idle_yield_.empty())
      daemon_argv.insert(daemon_argv.end(), {"--serving-idle-yield", serving_idle_yield_});
    auto daemon = msched::Subprocess::Spawn(daemon_argv);
    EXPECT_TRUE(daemon.ok()) << daemon.status().ToString();
    if (!daemon.ok()) return run;
    for (int i = 0; i < 250 && !Status(socket).is_object(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<msched::Subprocess> jobs;
    const char* names[] = {"loader", "trainer"};
    for (int i = 0; i < 2; ++i) {
      msched::SpawnOptions o;
      o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
               {"LD_PRELOAD", LIBMSCHED},
               {"MSIM_DEVICE", device},
               {"MSIM_HBM_BYTES", std::to_string(kHbm)},
               {"MSIM_START_BARRIER", "2"},
               {"MSIM_RANK", std::to_string(i)},
               {"MSCHED_SOCKET", socket},
               {"MSCHED_COORD", "required"},
               {"MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels"},
               {"MSCHED_MEM", "40MiB"},  // 80 MiB on 64: they take turns from the start
               {"MSCHED_JOB_NAME", names[i]},
               {"MSCHED_STATS", dir + "/" + names[i] + ".stats.json"},
               {"MSCHED_LOG_LEVEL", "warn"}};
      o.stdout_path = dir + "/" + names[i] + ".out";
      o.stderr_path = dir + "/" + names[i] + ".err";
      std::vector<std::string> argv = i == 0 ? loader : trainer;
      if (argv[0] == MSIM_RUN) argv.insert(argv.end(), {"--json", dir + "/" + names[i] + ".json"});
      auto p = msched::Subprocess::Spawn(argv, o);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      if (p.ok()) jobs.push_back(std::move(*p));
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      JobRun& r = i == 0 ? run.loader : run.trainer;
      r.status = jobs[i].Wait();
      const json out = json::parse(ts::Slurp(dir + "/" + names[i] + ".json"), nullptr, false);
      r.first_launch_ns = ts::JsonU64(out, {"first_launch_ns"});
      r.finished_ns = ts::JsonU64(out, {"virtual_time_ns"});
      r.checksums = ts::Checksums(ts::Slurp(dir + "/" + names[i] + ".out"));
      const json stats = json::parse(ts::Slurp(dir + "/" + names[i] + ".stats.json"), nullptr, false);
      r.coord_wait_ns = ts::JsonU64(stats, {"coordinator", "wait_ns"});
      EXPECT_EQ(r.status, 0) << names[i] << ": " << ts::Slurp(dir + "/" + names[i] + ".err");
    }
    const json status = Status(socket);
    if (status.is_object()) {
      for (const json& j : status["jobs"]) {
        JobRun& r = j["name"] == "loader" ? run.loader : run.trainer;
        r.idle_yields = j.value("idle_yields", uint64_t{0});
        r.id = j.value("id", uint64_t{0});
      }
    }
    daemon->Kill(SIGTERM);
    daemon->Wait();
    ::unlink(("/dev/shm/msim-" + device).c_str());
    return run;
  }

  static json Status(const std::string& socket) {
    const ts::ProgramRun r = ts::RunProgram({MSCHED_CLI, "--socket", socket, "status", "--json"}, {});
    return json::parse(r.out, nullptr, false);
  }

  // The checksum a job of these vars prints alone, on the simulator, without msched.
  std::string Alone(const std::vector<std::string>& vars) {
    std::vector<std::string> argv = {MSIM_RUN, kWorkload};
    for (size_t i = 0; i < vars.size(); i += 2) {
      if (vars[i] == "--set") argv.insert(argv.end(), {vars[i], vars[i + 1]});
    }
    const ts::ProgramRun r = ts::RunProgram(argv, {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                                   {"MSIM_HBM_BYTES", std::to_string(kHbm)},
                                                   {"MSIM_DEVICE", ""},
                                                   {"LD_PRELOAD", ""}});
    EXPECT_EQ(r.status, 0) << r.err;
    return ts::Checksums(r.out);
  }

  std::string base_;
  int serial_ = 0;
  std::string serving_idle_yield_;  // mschedd --serving-idle-yield (empty: the default)
};

void Print(const char* what, const Outcome& r) {
  std::printf("%-18s loader %9.3f ms (%llu yields)  trainer %9.3f ms (first launch %8.3f ms)  makespan %9.3f ms\n",
              what, r.loader.finished_ns / 1e6, static_cast<unsigned long long>(r.loader.idle_yields),
              r.trainer.finished_ns / 1e6, r.trainer.first_launch_ns / 1e6, r.makespan_ns() / 1e6);
}

void ExpectSameTimes(const Outcome& a, const Outcome& b, const char* what) {
  EXPECT_EQ(a.loader.finished_ns, b.loader.finished_ns) << what;
  EXPECT_EQ(a.trainer.finished_ns, b.trainer.finished_ns) << what;
  EXPECT_EQ(a.loader.first_launch_ns, b.loader.first_launch_ns) << what;
  EXPECT_EQ(a.trainer.first_launch_ns, b.trainer.first_launch_ns) << what;
  EXPECT_EQ(a.loader.idle_yields, b.loader.idle_yields) << what;
}

TEST_F(IdleYieldTest, TheWaitingJobRunsInTheIdleJobsHostPhases) {
  const Outcome yield = RunBoth("50ms"), yield_again = RunBoth("50ms");
  const Outcome off = RunBoth("off"), off_again = RunBoth("off");
  Print("--idle-yield 50ms", yield);
  Print("--idle-yield 50ms", yield_again);
  Print("--idle-yield off", off);
  Print("--idle-yield off", off_again);

  const std::string loader_alone = Alone(kLoaderVars), trainer_alone = Alone(kTrainerVars);
  ASSERT_FALSE(loader_alone.empty());
  for (const Outcome* r : {&yield, &yield_again, &off, &off_again}) {
    EXPECT_EQ(r->loader.checksums, loader_alone);
    EXPECT_EQ(r->trainer.checksums, trainer_alone);
  }
  ExpectSameTimes(yield, yield_again, "with the idle yield, two runs give the same virtual times");
  ExpectSameTimes(off, off_again, "without it too");

  // The loader gives its turn up in each host phase while the trainer
  // waits: from the first, 50 ms after its first burst, rather than at the
  // end of its slice (its next launch, 300 ms later).
  EXPECT_GE(yield.loader.idle_yields, 3u);
  EXPECT_EQ(off.loader.idle_yields, 0u);
  EXPECT_LT(yield.trainer.first_launch_ns, 60'000'000u);
  EXPECT_GT(off.trainer.first_launch_ns, 300'000'000u);
  // So the trainer ends far sooner, the loader no later (it waits no longer
  // for its turn when it comes back), and the run as a whole sooner.
  EXPECT_LT(yield.trainer.finished_ns, off.trainer.finished_ns * 3 / 4);
  EXPECT_LE(yield.loader.finished_ns, off.loader.finished_ns * 101 / 100);
  EXPECT_LT(yield.makespan_ns(), off.makespan_ns() * 3 / 4);
}

// After two host phases longer than the idle yield the loader counts as a
// service, and its later turns carry the serving idle yield (2 ms by
// default): at each of its last two host phases the trainer gets the GPU
// 48 ms sooner than when the serving idle yield is the idle yield's 50 ms.
TEST_F(IdleYieldTest, AServiceGivesItsTurnUpAfterTheServingIdleYield) {
  const Outcome serving = RunBoth("50ms");
  serving_idle_yield_ = "50ms";
  const Outcome same = RunBoth("50ms");
  Print("serving 2ms", serving);
  Print("serving 50ms", same);
  EXPECT_EQ(serving.loader.checksums, Alone(kLoaderVars));
  EXPECT_EQ(serving.trainer.checksums, Alone(kTrainerVars));
  EXPECT_EQ(serving.loader.idle_yields, same.loader.idle_yields);
  EXPECT_GE(serving.loader.idle_yields, 4u);
  EXPECT_LE(serving.trainer.finished_ns + 60'000'000, same.trainer.finished_ns);
  EXPECT_LE(serving.loader.finished_ns, same.loader.finished_ns * 101 / 100);
}

// A job that went idle while nobody waited (no slice end: no count) gives
// its turn up once another comes to wait, within about two idle yields:
// the simulator's alarm looks again every idle yield, as the real GPU's
// timer does, and counts from when it first sees the slice end. Otherwise
// the newcomer would wait for the idle job's next launch, 300 ms in.
TEST_F(IdleYieldTest, AJobIdleBeforeAnotherCameGivesItsTurnUpOnceItWaits) {
  const std::vector<std::string> loader = {"--set", "TASKS=2", "--set", "HOST_US=300000"};
  const std::vector<std::string> trainer = {"--set", "TASKS=300", "--arrive-ns", "120000000"};
  const Outcome r = RunBoth("50ms", Workload(loader), Workload(trainer), "1s");
  Print("arrives at 120 ms", r);
  EXPECT_EQ(r.loader.checksums, Alone(loader));
  EXPECT_EQ(r.trainer.checksums, Alone(trainer));
  EXPECT_GE(r.loader.idle_yields, 1u);
  EXPECT_GE(r.trainer.first_launch_ns, 120'000'000u);
  EXPECT_LT(r.trainer.first_launch_ns, 230'000'000u) << "two idle yields after it came, not the loader's next launch";
}

// Should no timer see a job's idleness (here the simulator's idle alarm is
// switched off for the host phase, as a late timer thread on a real GPU
// would miss it), its next launch does: it gives the turn up then, dated
// when it went idle, and waits for its next turn. The waiting job's turn
// starts as of then: it waits about the idle yield, not until the idle
// job's next launch.
TEST_F(IdleYieldTest, ALaunchAfterAnIdlenessNoTimerSawGivesTheTurnUpAsOfItsStart) {
  const std::vector<std::string> probe = {PROBE_APP, "idle", "300000"};
  const std::vector<std::string> trainer = Workload({"--set", "TASKS=300", "--arrive-ns", "100000"});
  // probe_app registers at its first allocation, after its own setup: on a
  // loaded host the trainer, due 0.1 ms in, can register before it and take
  // the GPU first, which is another run than this test's. Such a run is
  // repeated (the order is the host's doing, not msched's).
  auto run = [&](const std::string& idle_yield) {
    Outcome r = RunBoth(idle_yield, probe, trainer, "1s");
    for (int retry = 0; retry < 3 && !r.loader_registered_first(); ++retry) {
      std::printf("idle yield %s: the trainer registered first; run again\n", idle_yield.c_str());
      r = RunBoth(idle_yield, probe, trainer, "1s");
    }
    EXPECT_TRUE(r.loader_registered_first()) << "the trainer registered first in four runs";
    return r;
  };
  const Outcome yield = run("50ms"), off = run("off");
  std::printf("trainer waited %.3f ms with the idle yield, %.3f ms without\n", yield.trainer.coord_wait_ns / 1e6,
              off.trainer.coord_wait_ns / 1e6);
  for (const Outcome* r : {&yield, &off}) {
    EXPECT_EQ(r->loader.status, 0);
    EXPECT_FALSE(r->loader.checksums.empty());
    EXPECT_EQ(r->trainer.checksums, Alone({"--set", "TASKS=300"}));
  }
  const ts::ProgramRun alone = ts::RunProgram(probe, {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                                      {"MSIM_HBM_BYTES", std::to_string(kHbm)},
                                                      {"MSIM_DEVICE", ""},
                                                      {"LD_PRELOAD", ""}});
  EXPECT_EQ(yield.loader.checksums, ts::Checksums(alone.out)) << alone.err;
  EXPECT_EQ(off.loader.checksums, ts::Checksums(alone.out));
  EXPECT_EQ(yield.loader.idle_yields, 1u) << "at its second launch";
  EXPECT_EQ(off.loader.idle_yields, 0u);
  EXPECT_GT(yield.trainer.coord_wait_ns, 50'000'000u);
  EXPECT_LT(yield.trainer.coord_wait_ns, 60'000'000u)
      << "from 0.1 ms until the loader went idle, 50 ms after its first launch";
  EXPECT_GT(off.trainer.coord_wait_ns, 300'000'000u) << "until the loader ended, after its second launch";
}

// The option is read like mschedd's other durations, with 0 and off for
// never; a bad value is a usage error naming the accepted forms.
TEST_F(IdleYieldTest, TheOptionTakesADurationOrOff) {
  for (const auto& [value, ns] : std::vector<std::pair<std::string, uint64_t>>{
           {"20ms", 20'000'000}, {"1.5s", 1'500'000'000}, {"0", 0}, {"off", 0}}) {
    const std::string socket = base_ + "/opt.sock";
    auto daemon =
        msched::Subprocess::Spawn({MSCHEDD, "--socket", socket, "--idle-yield", value, "--log", base_ + "/opt.log"});
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    json status;
    for (int i = 0; i < 250 && !status.is_object(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      status = Status(socket);
    }
    daemon->Kill(SIGTERM);
    daemon->Wait();
    ASSERT_TRUE(status.is_object()) << value;
    EXPECT_EQ(status["coordinator"]["idle_yield_ns"], ns) << value;
    EXPECT_EQ(status["coordinator"]["serving_idle_yield_ns"], std::min<uint64_t>(ns, 2'000'000))
        << "the default, never more than the idle yield";
  }
  // Under a millisecond is refused: 1ns once made jobs with host phases
  // spin once per virtual nanosecond of them, and never finish.
  for (const std::string value : {"soon", "1ns", "999us"}) {
    const ts::ProgramRun bad = ts::RunProgram({MSCHEDD, "--socket", base_ + "/bad.sock", "--idle-yield", value}, {});
    EXPECT_EQ(bad.status, 2) << value;
    EXPECT_NE(bad.err.find("--idle-yield '" + value +
                           "' is not valid: expected a duration of at least 1ms such as 50ms, or 0 or off"),
              std::string::npos)
        << bad.err;
  }
  for (const std::string value : {"0", "1ns"}) {
    const ts::ProgramRun bad =
        ts::RunProgram({MSCHEDD, "--socket", base_ + "/bad.sock", "--serving-idle-yield", value}, {});
    EXPECT_EQ(bad.status, 2) << value;
    EXPECT_NE(bad.err.find("--serving-idle-yield '" + value +
                           "' is not valid: expected a duration of at least 1ms such as 2ms"),
              std::string::npos)
        << bad.err;
  }
  const ts::ProgramRun help = ts::RunProgram({MSCHEDD, "--help"}, {});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("[--idle-yield DURATION|off] [--serving-idle-yield DURATION]"), std::string::npos)
      << help.out;
}

}  // namespace

// The coordinator across processes on one shared simulated GPU: jobs are
// msim-run processes with libmsched preloaded, mschedd runs as a process
// (or in-process through the benchmark runner), and the tests check
// outcomes that do not depend on timing: every job finishes, checksums
// match running alone, nobody runs out of memory under admission, jobs
// survive the death or hang of others and of the coordinator. The virtual
// times they print are for reading; the benchmarks make the timing claims.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "coord/unix_socket.h"
#include "coordinator_process.h"
#include "msched/protocol.h"
#include "msched/trace_layout.h"
#include "run_program.h"
#include "suite/runner.h"

namespace {

namespace ts = msched::testsupport;
namespace b = msched::bench;
namespace tr = msched::trace;
using nlohmann::json;

using ts::CoordinatorProcessTest;
using ts::kMiB;
using ts::Templates;

b::BenchPaths Paths() {
  b::BenchPaths p;
  p.msim_run = MSIM_RUN;
  p.libmsched = LIBMSCHED;
  p.sim_lib_dir = SIM_LIB_DIR;
  p.workloads_dir = WORKLOADS_DIR;
  return p;
}

b::JobSpec Vadd(const std::string& label, uint64_t foot, int tasks) {
  b::JobSpec j;
  j.label = label;
  j.workload = "micro_vadd.json";
  j.footprint = foot;
  j.vars = {{"FOOT", static_cast<int64_t>(foot)}, {"TASKS", tasks}};
  j.work_units = static_cast<uint64_t>(tasks) + 1;
  return j;
}

b::JobSpec Matmul(const std::string& label, uint64_t foot, int tasks) {
  b::JobSpec j;
  j.label = label;
  j.workload = "micro_matmul.json";
  j.footprint = foot;
  j.vars = {{"FOOT", static_cast<int64_t>(foot)}, {"DIM", 32}, {"TASKS", tasks}};
  j.work_units = static_cast<uint64_t>(tasks) + 1;
  return j;
}

b::RunOutcome RunUnder(const std::vector<b::JobSpec>& jobs, b::Policy policy, uint64_t hbm,
                       double oversubscribe = 4.0) {
  b::RunOptions o;
  o.policy = policy;
  o.hbm_bytes = hbm;
  o.oversubscribe = oversubscribe;
  o.templates = Templates();
  o.timeout_ms = 240000;
  return b::RunJobs(jobs, o, Paths());
}

void ExpectAllFinished(const b::RunOutcome& r, const std::vector<b::JobSpec>& jobs) {
  EXPECT_TRUE(r.error.empty()) << r.error;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(r.jobs[i].status, 0) << b::PolicyName(r.policy) << " " << jobs[i].label << ": " << r.jobs[i].error;
  }
}

TEST(CoordinatorTest, FourJobsOversubscribingTheGpuAllFinishWithCorrectChecksums) {
  constexpr uint64_t kHbm = 64 * kMiB;
  std::printf("%-6s %14s %14s %14s %10s\n", "HBM %", "sequential ms", "um ms", "msched ms", "switches");
  for (int percent : {150, 200, 300}) {
    const uint64_t each = kHbm * percent / 100 / 4 / kMiB * kMiB;
    const std::vector<b::JobSpec> jobs = {Vadd("vadd-1", each, 6), Vadd("vadd-2", each, 6), Matmul("mm-1", each, 1),
                                          Matmul("mm-2", each, 1)};
    const b::RunOutcome seq = RunUnder(jobs, b::Policy::kExclusive, kHbm);
    const b::RunOutcome um = RunUnder(jobs, b::Policy::kUm, kHbm);
    const b::RunOutcome ms = RunUnder(jobs, b::Policy::kMsched, kHbm);
    ExpectAllFinished(seq, jobs);
    ExpectAllFinished(um, jobs);
    ExpectAllFinished(ms, jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_FALSE(seq.jobs[i].checksums.empty());
      EXPECT_EQ(ms.jobs[i].checksums, seq.jobs[i].checksums) << percent << "% " << jobs[i].label;
      EXPECT_EQ(um.jobs[i].checksums, seq.jobs[i].checksums) << percent << "% " << jobs[i].label;
    }
    std::printf("%-6d %14.1f %14.1f %14.1f %10llu\n", percent, seq.makespan_ns / 1e6, um.makespan_ns / 1e6,
                ms.makespan_ns / 1e6, static_cast<unsigned long long>(ms.switches));
  }
}

// Jobs that start together show their memory allocation by allocation, so
// the coordinator's first grants are sized for less than they come to hold.
// A job that has allocated beyond what the coordinator has seen launches only
// once the coordinator has answered (proto::Usage::ask), so no kernel runs on
// a grant that then shrinks under it: with every kernel predicted, nothing
// faults. At the full scale of the benchmark (16 GiB, timing only), where the
// first kernels of the first grants faulted 0.8 million times.
TEST(CoordinatorTest, JobsStartingTogetherLaunchOnlyOnGrantsThatKnowTheirSize) {
  constexpr uint64_t kGpu = 16ull << 30;
  const uint64_t each = kGpu * 150 / 100 / 4;
  std::vector<b::JobSpec> jobs = {Vadd("vadd-1", each, 8), Vadd("vadd-2", each, 8), Matmul("mm-1", each, 8),
                                  Matmul("mm-2", each, 8)};
  for (b::JobSpec& j : jobs) {  // as the benchmark's full form: inputs not written, large kernels
    j.vars["INIT"] = 0;
    j.vars["WARMUP"] = 0;
    if (j.workload == "micro_matmul.json") j.vars["DIM"] = 2048;
  }
  b::RunOptions o;
  o.policy = b::Policy::kMsched;
  o.hbm_bytes = kGpu;
  o.host_kernels = false;
  o.oversubscribe = 2.0;
  o.templates = Templates();
  const b::RunOutcome ms = b::RunJobs(jobs, o, Paths());
  ExpectAllFinished(ms, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(ms.jobs[i].faults, 0u) << jobs[i].label;
}

// The waits it prints depend on how the processes' starts interleave; msched
// bench admission measures them.
TEST(CoordinatorTest, AdmissionAvoidsOutOfMemory) {
  constexpr uint64_t kHbm = 64 * kMiB;
  std::vector<b::JobSpec> jobs = {Vadd("large-1", 40 * kMiB, 8), Vadd("large-2", 40 * kMiB, 8)};
  for (int i = 1; i <= 4; ++i) jobs.push_back(Vadd("small-" + std::to_string(i), 6 * kMiB, 2));
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].declare_memory = true;
    jobs[i].job_class = i < 2 ? msched::JobClass::kLong : msched::JobClass::kShort;
    jobs[i].user = i < 2 ? "alice" : "bob";
  }
  const b::RunOutcome exclusive = RunUnder(jobs, b::Policy::kExclusive, kHbm);
  const b::RunOutcome nocheck = RunUnder(jobs, b::Policy::kNoCheck, kHbm);
  const b::RunOutcome ms = RunUnder(jobs, b::Policy::kMsched, kHbm, /*oversubscribe=*/1.0);
  ExpectAllFinished(exclusive, jobs);
  ExpectAllFinished(ms, jobs);
  auto ooms = [](const b::RunOutcome& r) {
    int n = 0;
    for (const b::JobOutcome& j : r.jobs) n += j.ooms;
    return n;
  };
  auto small_wait = [&](const b::RunOutcome& r) {
    double sum = 0;
    for (size_t i = 2; i < jobs.size(); ++i) sum += r.jobs[i].started_ns;
    return sum / (jobs.size() - 2) / 1e6;
  };
  std::printf("%-10s %5s %16s\n", "policy", "OOMs", "small wait ms");
  for (const b::RunOutcome* r : {&nocheck, &exclusive, &ms}) {
    std::printf("%-10s %5d %16.2f\n", b::PolicyName(r->policy), ooms(*r), small_wait(*r));
  }
  EXPECT_GT(ooms(nocheck), 0) << "two large jobs do not fit side by side";
  EXPECT_EQ(ooms(ms), 0);
  EXPECT_EQ(ooms(exclusive), 0);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(ms.jobs[i].checksums, exclusive.jobs[i].checksums) << i;
}

// ---- A coordinator process and jobs started by hand -----------------------

TEST_F(CoordinatorProcessTest, KillingAJobMidRunReleasesItsMemoryAndTheOthersFinish) {
  StartDaemon({"--slice", "5ms"});
  const uint64_t foot = 36 * kMiB;  // three of them on 64 MiB: turns, a swap every 5 ms
  for (int i = 0; i < 3; ++i) StartJob(foot, 400);
  ASSERT_TRUE(Eventually([&] { return Status().is_object() && Status()["coordinator"]["switches"] >= 3; }))
      << ts::Slurp(dir_ + "/mschedd.log");
  jobs_[1].Kill(SIGKILL);  // while turns are being swapped
  jobs_[1].Wait();
  EXPECT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(jobs_[2].Wait(), 0) << Err(2);
  const std::string alone = AloneChecksum(foot, 400);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(2))), alone);
  EXPECT_NE(ts::Slurp(dir_ + "/mschedd.log").find("is gone"), std::string::npos);
  EXPECT_EQ(Job("job1")["state"], "finished");
  EXPECT_EQ(Job("job1")["resident_bytes"], 0);
}

TEST_F(CoordinatorProcessTest, AHungJobIsPassedOverAndCarriesOnWhenItWakes) {
  StartDaemon({"--answer-timeout", "1s", "--max-slice", "100ms", "--slice", "20ms"});
  const uint64_t foot = 40 * kMiB;  // two on 64 MiB: turns of 20 ms of device time
  StartJob(foot, 1500);
  StartJob(foot, 1500);
  // Job 0 stops answering while it waits for its turn: when its turn comes
  // it neither runs nor reports the end of its slice.
  ASSERT_TRUE(Eventually([&] { return Job("job1")["on_gpu"] == true && Job("job0")["on_gpu"] == false; }));
  ::kill(jobs_[0].pid(), SIGSTOP);
  EXPECT_EQ(jobs_[1].Wait(), 0) << Err(1);
  EXPECT_NE(ts::Slurp(dir_ + "/mschedd.log").find("has not answered"), std::string::npos)
      << ts::Slurp(dir_ + "/mschedd.log");
  ::kill(jobs_[0].pid(), SIGCONT);
  EXPECT_EQ(jobs_[0].Wait(), 0) << Err(0);
  const std::string alone = AloneChecksum(foot, 1500);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), alone);
}

TEST_F(CoordinatorProcessTest, JobsOutliveTheCoordinatorAndJoinANewOne) {
  StartDaemon();
  const uint64_t foot = 40 * kMiB;
  StartJob(foot, 1200);
  StartJob(foot, 1200);
  ASSERT_TRUE(Eventually([&] { return Status().is_object() && Status()["jobs"].size() == 2; }));
  daemon_->Kill(SIGKILL);  // no chance to clean up its socket or shared memory
  daemon_->Wait();
  daemon_.reset();
  StartDaemon();  // finds the stale socket and shared memory, and replaces them
  EXPECT_TRUE(Eventually([&] { return Status().is_object() && Status()["jobs"].size() == 2; }))
      << "the jobs reconnect: " << ts::Slurp(dir_ + "/mschedd.log");
  EXPECT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(jobs_[1].Wait(), 0) << Err(1);
  const std::string alone = AloneChecksum(foot, 1200);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), alone);
  EXPECT_NE(Err(0).find("lost the coordinator"), std::string::npos) << Err(0);
}

TEST_F(CoordinatorProcessTest, PauseEvictsAJobAndResumeBringsItBackIntact) {
  StartDaemon();
  const uint64_t foot = 40 * kMiB;
  StartJob(foot, 1500, {{"MSCHED_PROGRESS", "on"}});
  StartJob(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["state"] == "running"; }));
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("paused"), std::string::npos);
  ASSERT_TRUE(Eventually([&] { return Job("job0")["state"] == "paused" && Job("job0")["resident_bytes"] == 0; }));
  // Meanwhile the other job has the GPU to itself: no more turns.
  EXPECT_TRUE(Eventually([&] { return Job("job1")["on_gpu"] == true && Status()["coordinator"]["groups"] == 1; }));
  EXPECT_NE(Cli({"pause", "job0"}).status, 0) << "already paused";
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(jobs_[1].Wait(), 0) << Err(1);
  // MSCHED_PROGRESS: the job said each step on its stderr.
  for (const char* line : {"(job0) joined the coordinator and is admitted\n",
                           "(job0) is paused: its memory is on the host until msched resume\n",
                           "(job0) is resumed after ", "(job0) is done\n"}) {
    EXPECT_NE(Err(0).find(line), std::string::npos) << line << "\n" << Err(0);
  }
  EXPECT_EQ(Err(1).find("msched: job"), std::string::npos) << "silent without MSCHED_PROGRESS";
  // The coordinator's log says who paused it, when each job finished, and
  // (at most once a second) the switches between the two.
  const std::string log = ts::Slurp(dir_ + "/mschedd.log");
  EXPECT_NE(log.find("paused by pid "), std::string::npos) << log;
  EXPECT_NE(log.find(" of the GPU since the last such line; it is now with job "), std::string::npos) << log;
  EXPECT_NE(log.find("(job0) finished, "), std::string::npos) << log;
  EXPECT_NE(log.find("(job1) finished, "), std::string::npos) << log;
  const std::string alone = AloneChecksum(foot, 1500);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), alone);
}

// A pause under way when the coordinator dies is lost with it: `msched
// pause` says so and fails, where it once said "job N is paused" of a job
// that ran on.
TEST_F(CoordinatorProcessTest, APauseLostWithItsCoordinatorIsNotCalledDone) {
  StartDaemon();
  StartJob(40 * kMiB, 100000);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["state"] == "running"; }));
  ASSERT_EQ(::kill(jobs_[0].pid(), SIGSTOP), 0);  // it cannot answer its stop
  msched::SpawnOptions o;
  o.stdout_path = dir_ + "/pause.out";
  o.stderr_path = dir_ + "/pause.err";
  auto pause = msched::Subprocess::Spawn({MSCHED_CLI, "--socket", socket(), "pause", "job0", "--timeout", "60s"}, o);
  ASSERT_TRUE(pause.ok()) << pause.status().ToString();
  ASSERT_TRUE(Eventually([&] { return Job("job0")["state"] == "paused"; })) << "the pause is under way";
  daemon_->Kill(SIGKILL);
  daemon_->Wait();
  daemon_.reset();
  const int status = pause->Wait();
  ::kill(jobs_[0].pid(), SIGCONT);
  const std::string out = ts::Slurp(dir_ + "/pause.out"), err = ts::Slurp(dir_ + "/pause.err");
  EXPECT_NE(status, 0) << out << err;
  EXPECT_EQ(out.find("paused"), std::string::npos) << out;
  EXPECT_NE(err.find("stopped answering while job"), std::string::npos) << err;
  EXPECT_NE(err.find("the pause is lost with it"), std::string::npos) << err;
}

TEST_F(CoordinatorProcessTest, RequiredWithoutACoordinatorFailsClearlyAndAutoRunsAlone) {
  size_t i = StartJob(8 * kMiB, 2, {{"MSCHED_COORD_WAIT", "300ms"}});
  EXPECT_NE(jobs_[i].Wait(), 0);
  EXPECT_NE(Err(i).find("MSCHED_COORD=required, but no coordinator at"), std::string::npos) << Err(i);
  i = StartJob(8 * kMiB, 2, {{"MSCHED_COORD", "auto"}});
  EXPECT_EQ(jobs_[i].Wait(), 0) << Err(i);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), AloneChecksum(8 * kMiB, 2));
}

// A job under MSCHED_COORD=auto that starts before its coordinator runs
// alone, joins the coordinator when it starts (it once ran unmanaged to its
// end), and finishes with the checksums of a run alone.
TEST_F(CoordinatorProcessTest, AJobStartedBeforeItsCoordinatorJoinsItWhenItStarts) {
  const uint64_t foot = 40 * kMiB;
  const size_t i = StartJob(foot, 1500, {{"MSCHED_COORD", "auto"}});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  StartDaemon();
  EXPECT_TRUE(Eventually([&] { return Job("job0").is_object(); }, 10)) << Err(i);
  EXPECT_EQ(jobs_[i].Wait(), 0) << Err(i);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), AloneChecksum(foot, 1500));
  EXPECT_NE(Err(i).find("this job, running alone until now, joins it"), std::string::npos) << Err(i);
}

// Waits for `p` at most `seconds`, then kills it; its status and how long it took.
std::pair<int, double> WaitAtMost(msched::Subprocess& p, int seconds) {
  std::atomic<bool> done{false};
  std::thread killer([&] {
    for (int i = 0; i < seconds * 20 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done.load()) p.Kill(SIGKILL);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const int status = p.Wait();
  done.store(true);
  killer.join();
  return {status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// Started beside the simulated GPU (its MSIM_DEVICE in its environment),
// mschedd reads the GPU's size and clock from the device: a client's hello
// claiming a 4 KiB GPU and a clock of 2^62 ns changes neither, and a job
// that comes after it runs to the end with its checksums (it once waited
// forever for a turn dated 2^62 ns).
TEST_F(CoordinatorProcessTest, TheGpusSizeAndClockComeFromTheSimulatedDeviceNotAJob) {
  msched::SpawnOptions o;
  o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR}, {"MSIM_DEVICE", device_}, {"MSIM_HBM_BYTES", std::to_string(kHbm)}};
  auto d = msched::Subprocess::Spawn(
      {MSCHEDD, "--socket", socket(), "--oversubscribe", "4", "--log", dir_ + "/mschedd.log"}, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  daemon_.emplace(std::move(*d));
  ASSERT_TRUE(Eventually([&] { return Status().is_object(); }));
  EXPECT_EQ(Status()["coordinator"]["hbm_bytes"], kHbm) << "before any job: " << ts::Slurp(dir_ + "/mschedd.log");
  msched::Result<int> liar = msched::ConnectUnix(socket());
  ASSERT_TRUE(liar.ok());
  msched::proto::Hello h;
  h.name = "liar";
  h.declared_mem = 1 << 20;
  h.device_total = 4096;
  h.now_ns = uint64_t{1} << 62;
  ASSERT_TRUE(msched::SendMessage(*liar, h).ok());
  ASSERT_TRUE(msched::ReceiveMessage(*liar, 5000).ok());
  const size_t i = StartJob(8 * kMiB, 20);
  const auto [status, seconds] = WaitAtMost(jobs_[i], 60);
  EXPECT_EQ(status, 0) << "after " << seconds << " s: " << Err(i);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), AloneChecksum(8 * kMiB, 20));
  const json s = Status();
  EXPECT_EQ(s["coordinator"]["hbm_bytes"], kHbm);
  EXPECT_LT(s["coordinator"]["device_time_ns"].get<uint64_t>(), uint64_t{1} << 40) << s.dump();
  ::close(*liar);
}

TEST_F(CoordinatorProcessTest, AStoppedCoordinatorNeverHangsANewJob) {
  StartDaemon();
  ASSERT_EQ(::kill(daemon_->pid(), SIGSTOP), 0);
  const size_t alone = StartJob(8 * kMiB, 2, {{"MSCHED_COORD", "auto"}});
  const size_t strict = StartJob(8 * kMiB, 2, {{"MSCHED_COORD", "required"}, {"MSCHED_COORD_WAIT", "3s"}});
  const auto [alone_status, alone_s] = WaitAtMost(jobs_[alone], 60);
  const auto [strict_status, strict_s] = WaitAtMost(jobs_[strict], 60);
  ::kill(daemon_->pid(), SIGCONT);
  EXPECT_EQ(alone_status, 0) << Err(alone);
  EXPECT_LT(alone_s, 30) << "auto gives up on a silent coordinator after 5 s";
  EXPECT_NE(Err(alone).find("did not answer within 5000 ms; running alone"), std::string::npos) << Err(alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(alone))), AloneChecksum(8 * kMiB, 2));
  EXPECT_NE(strict_status, 0);
  EXPECT_LT(strict_s, 30);
  EXPECT_NE(
      Err(strict).find("MSCHED_COORD=required, but the coordinator at " + socket() + " did not answer within 3000 ms"),
      std::string::npos)
      << Err(strict);
}

TEST_F(CoordinatorProcessTest, JobNamesThatAreNotPrintableUtf8AreMendedOnceAndNeverHurtTheCoordinator) {
  StartDaemon();
  const size_t latin1 = StartJob(8 * kMiB, 2, {{"MSCHED_JOB_NAME", "caf\xe9"}});
  const size_t control = StartJob(8 * kMiB, 2, {{"MSCHED_JOB_NAME", "bad\x01name"}});
  EXPECT_EQ(jobs_[latin1].Wait(), 0) << Err(latin1);
  EXPECT_EQ(jobs_[control].Wait(), 0) << Err(control);
  for (size_t i : {latin1, control}) {
    EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), AloneChecksum(8 * kMiB, 2));
    const std::string err = Err(i);
    EXPECT_NE(err.find("were replaced by '?'"), std::string::npos) << err;
    EXPECT_EQ(err.find("running alone"), std::string::npos) << "MSCHED_COORD=required: it ran coordinated";
  }
  const json s = Status();
  ASSERT_TRUE(s.is_object()) << "the coordinator still answers";
  EXPECT_TRUE(Job("caf?").is_object()) << s.dump();
  EXPECT_TRUE(Job("bad?name").is_object()) << s.dump();
}

// A name over 63 bytes is a valid setting, so the job shows under it, not
// as its program. It is cut to 63 bytes, never inside a character: 40 'é'
// (80 bytes) show as 31 (62 bytes).
TEST_F(CoordinatorProcessTest, LongJobNamesAreCutOnACharacterBoundary) {
  StartDaemon();
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";  // é
  const size_t ascii = StartJob(8 * kMiB, 2, {{"MSCHED_JOB_NAME", std::string(64, 'x')}});
  const size_t wide = StartJob(8 * kMiB, 2, {{"MSCHED_JOB_NAME", accents}});
  for (size_t i : {ascii, wide}) {
    EXPECT_EQ(jobs_[i].Wait(), 0) << Err(i);
    EXPECT_EQ(Err(i).find("is not valid"), std::string::npos) << Err(i);
  }
  EXPECT_TRUE(Job(std::string(63, 'x')).is_object()) << Status().dump();
  EXPECT_TRUE(Job(accents.substr(0, 62)).is_object()) << Status().dump();
}

// A job declared larger than the GPU serves time-sliced runs alone, as an
// undeclared one does; only one larger than the host memory that would hold
// its evicted data is refused, with the reason.
TEST_F(CoordinatorProcessTest, AJobDeclaredLargerThanTheGpuRunsAloneAndOneLargerThanTheHostIsRefused) {
  StartDaemon({"--host-memory", "512MiB"});
  size_t i = StartJob(8 * kMiB, 2, {{"MSCHED_MEM", "300MiB"}});  // over 4 x 64 MiB
  EXPECT_EQ(jobs_[i].Wait(), 0) << Err(i);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), AloneChecksum(8 * kMiB, 2));
  i = StartJob(8 * kMiB, 2, {{"MSCHED_MEM", "1GiB"}});
  EXPECT_NE(jobs_[i].Wait(), 0);
  EXPECT_NE(Err(i).find("the coordinator refused this job: needs 1.0 GiB, more than the host memory"),
            std::string::npos)
      << Err(i);
}

TEST_F(CoordinatorProcessTest, MschedRunStartsACoordinatorWhenNoneRuns) {
  const ts::ProgramRun r = ts::RunProgram(
      {MSCHED_CLI, "--socket", socket(), "run", "--mem", "8MiB", "--class", "short", "--name", "viaRun", "--templates",
       Templates(), "--", MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set", "FOOT=8388608"},
      {{"LD_LIBRARY_PATH", SIM_LIB_DIR}, {"MSIM_DEVICE", device_}, {"MSIM_HBM_BYTES", std::to_string(kHbm)}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("checksum C"), std::string::npos);
  EXPECT_NE(r.err.find("msched: no coordinator ran at " + socket() + ": started one for this job"), std::string::npos)
      << r.err;
  const json j = Job("viaRun");
  ASSERT_TRUE(j.is_object()) << "the coordinator msched run started still answers";
  EXPECT_EQ(j["class"], "short");
  EXPECT_EQ(j["declared_bytes"], 8 * kMiB);
  const ts::ProgramRun bad = ts::RunProgram({MSCHED_CLI, "run", "--mem", "lots", "--", "true"}, {});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("MSCHED_MEM='lots' is not valid"), std::string::npos) << bad.err;
  // Stop the coordinator msched run left behind.
  const std::string pid = std::to_string(Status()["coordinator"]["pid"].get<int>());
  ::kill(std::stoi(pid), SIGTERM);
}

// Log rotation: after the log is moved away, SIGHUP has mschedd write its
// next lines to a new file at the --log path, and it carries on serving.
TEST_F(CoordinatorProcessTest, SighupReopensTheLogForRotation) {
  StartDaemon();
  const std::string log = dir_ + "/mschedd.log";
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  ASSERT_EQ(::kill(daemon_->pid(), SIGHUP), 0);
  const size_t i = StartJob(8 * kMiB, 2, {{"MSCHED_JOB_NAME", "after-rotation"}});
  EXPECT_EQ(jobs_[i].Wait(), 0) << Err(i);
  EXPECT_TRUE(Eventually([&] { return ts::Slurp(log).find("(after-rotation, pid ") != std::string::npos; }, 10))
      << "new file: " << ts::Slurp(log) << "\nold file: " << ts::Slurp(log + ".1");
  EXPECT_EQ(ts::Slurp(log + ".1").find("after-rotation"), std::string::npos);
  EXPECT_TRUE(Status().is_object()) << "still serving";
}

// mschedd --log on a full disk must not lose every line silently. The first
// failed write is reported on stderr, and the log goes on there.
TEST(CoordinatorTest, ALogThatCannotBeWrittenMovesToStderr) {
  const std::string sock = ::testing::TempDir() + "coordlog_" + std::to_string(getpid()) + ".sock";
  const ts::ProgramRun r =
      ts::RunProgram({MSCHEDD, "--socket", sock, "--log", "/dev/full", "--idle-exit", "200ms"}, {});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string note = "mschedd: cannot write the log /dev/full (No space left on device); logging to stderr";
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note), r.err.rfind(note)) << "said once";
  EXPECT_NE(r.err.find("mschedd: coordinator listening at " + sock), std::string::npos) << "the lost line: " << r.err;
  EXPECT_NE(r.err.find("mschedd: stopped"), std::string::npos) << "later lines: " << r.err;
}

// ---- The kill -9 campaign --------------------------------------------------
// Jobs keep arriving on an oversubscribed GPU with 5 ms slices while, at
// random moments, a job is killed (mid-run, or right after it starts, in its
// first allocations), the coordinator is killed and restarted (often in the
// middle of a switch), or stopped for a while. Every job that was not
// killed must finish, on time, with the checksum it has when run alone; the
// coordinator must come back consistent. MSCHED_KILL_CAMPAIGN_SECONDS sets
// the length (default 20 s: the test command's short run);
// scripts/kill-campaign.sh runs it at length. MSCHED_KILL_CAMPAIGN_SEED
// repeats a campaign.
TEST_F(CoordinatorProcessTest, KillCampaign) {
  const char* len = std::getenv("MSCHED_KILL_CAMPAIGN_SECONDS");
  const char* seed_env = std::getenv("MSCHED_KILL_CAMPAIGN_SEED");
  const int seconds = len && *len ? std::atoi(len) : 20;
  const uint64_t seed = seed_env && *seed_env
                            ? std::strtoull(seed_env, nullptr, 10)
                            : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(seed);
  std::printf("kill campaign: %d s, seed %llu (MSCHED_KILL_CAMPAIGN_SEED repeats it)\n", seconds,
              static_cast<unsigned long long>(seed));
  const std::vector<std::pair<uint64_t, int>> shapes = {{8 * kMiB, 40}, {24 * kMiB, 120}, {36 * kMiB, 200}};
  std::map<std::pair<uint64_t, int>, std::string> alone;
  for (const auto& shape : shapes) alone[shape] = AloneChecksum(shape.first, shape.second);

  struct Live {
    size_t index;
    std::pair<uint64_t, int> shape;
    std::chrono::steady_clock::time_point started;
  };
  std::vector<Live> live;
  int started = 0, finished = 0, killed = 0, daemon_kills = 0, daemon_stops = 0, failures = 0;
  auto reap = [&](bool final) {
    for (auto it = live.begin(); it != live.end();) {
      int status = 0;
      const bool late = std::chrono::steady_clock::now() - it->started > std::chrono::seconds(120);
      if (final && !jobs_[it->index].Poll(&status)) {
        status = WaitAtMost(jobs_[it->index], 120).first;
      } else if (!jobs_[it->index].Poll(&status)) {
        if (!late) {
          ++it;
          continue;
        }
        jobs_[it->index].Kill(SIGKILL);
        status = jobs_[it->index].Wait();
        ADD_FAILURE() << "job " << it->index << " hung for 120 s: " << Err(it->index);
      }
      const std::string got = ts::Checksums(ts::Slurp(Out(it->index)));
      if (status != 0 || got != alone[it->shape]) {
        ++failures;
        ADD_FAILURE() << "job " << it->index << " status " << status << ", checksums '" << got << "' vs '"
                      << alone[it->shape] << "': " << Err(it->index);
      }
      ++finished;
      it = live.erase(it);
    }
  };
  StartDaemon({"--slice", "5ms"});
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    reap(false);
    while (live.size() < 4) {
      const auto shape = shapes[rng() % shapes.size()];
      live.push_back(
          {StartJob(shape.first, shape.second, {{"MSCHED_COORD", "auto"}}), shape, std::chrono::steady_clock::now()});
      ++started;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 400));
    switch (rng() % 6) {
      case 0: {  // a running job
        const size_t victim = rng() % live.size();
        jobs_[live[victim].index].Kill(SIGKILL);
        jobs_[live[victim].index].Wait();
        live.erase(live.begin() + static_cast<long>(victim));
        ++killed;
        break;
      }
      case 1: {  // a job in its first allocations
        const auto shape = shapes[rng() % shapes.size()];
        const size_t i = StartJob(shape.first, shape.second, {{"MSCHED_COORD", "auto"}});
        ++started;
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
        jobs_[i].Kill(SIGKILL);
        jobs_[i].Wait();
        ++killed;
        break;
      }
      case 2: {  // the coordinator, then a new one
        daemon_->Kill(SIGKILL);
        daemon_->Wait();
        daemon_.reset();
        ++daemon_kills;
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
        StartDaemon({"--slice", "5ms"});
        break;
      }
      case 3: {  // a stalled coordinator
        daemon_->Kill(SIGSTOP);
        std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 1500));
        daemon_->Kill(SIGCONT);
        ++daemon_stops;
        break;
      }
      default: break;
    }
  }
  reap(true);
  const json s = Status();
  ASSERT_TRUE(s.is_object()) << "the coordinator answers at the end";
  for (const json& j : s["jobs"]) EXPECT_EQ(j["state"], "finished") << j.dump();
  std::printf(
      "kill campaign: %d jobs started, %d finished with correct checksums, %d killed, %d coordinator kills, "
      "%d coordinator stops, %d failures\n",
      started, finished - failures, killed, daemon_kills, daemon_stops, failures);
  EXPECT_GT(finished, 0);
}

// Issue #19: the timeline of a coordinated run. Two jobs that cannot fit in
// HBM together run time-sliced under the in-process coordinator with the
// trace on; the merged file must be a JSON array of events in the shapes
// Perfetto and chrome://tracing expect, the jobs' running slices must
// alternate, and a swap must lie between every two slices of different jobs.
struct Slice {
  double from, to;  // microseconds
  int64_t pid;
};

TEST(CoordinatorTest, TimelineOfTwoTimeSlicedJobsShowsAlternatingSlicesWithASwapBetween) {
  const std::string path = ::testing::TempDir() + "/msched-timeline-" + std::to_string(::getpid()) + ".json";
  b::RunOptions o;
  o.policy = b::Policy::kMsched;
  o.hbm_bytes = 64 * kMiB;
  o.fixed_slice_ns = 1'000'000;
  o.templates = Templates();
  o.timeout_ms = 240000;
  o.trace_path = path;
  const std::vector<b::JobSpec> jobs = {Vadd("vadd-a", 40 * kMiB, 60), Vadd("vadd-b", 40 * kMiB, 60)};
  const b::RunOutcome run = b::RunJobs(jobs, o, Paths());
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_TRUE(run.trace_error.empty()) << run.trace_error;
  for (const b::JobOutcome& j : run.jobs) ASSERT_EQ(j.status, 0) << j.error;

  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json events = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(events.is_array()) << "not a JSON array: " << path;

  std::vector<Slice> slices;
  std::vector<std::pair<double, double>> swaps;
  std::set<int64_t> job_side;  // pids with events the jobs wrote themselves
  for (const json& e : events) {
    for (const char* key : {"ph", "ts", "pid", "tid", "name"}) {
      ASSERT_TRUE(e.contains(key)) << key << " in " << e.dump();
    }
    ASSERT_TRUE(e["ph"].is_string() && e["ph"].get<std::string>().size() == 1) << e.dump();
    ASSERT_TRUE(e["ts"].is_number() && e["ts"].get<double>() >= 0) << e.dump();
    ASSERT_TRUE(e["pid"].is_number_integer() && e["tid"].is_number_integer()) << e.dump();
    const std::string ph = e["ph"];
    ASSERT_NE(std::string("XiCM").find(ph), std::string::npos) << e.dump();
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0) << e.dump();
    }
    if (ph == "M") {
      ASSERT_TRUE(e.contains("args") && e["args"].contains("name")) << e.dump();
    }
    const double ts = e["ts"].get<double>();
    if (ph == "X" && e["tid"] == tr::kJobStateTid && e["pid"] != tr::kGpuPid && e["name"] == tr::kRunning) {
      slices.push_back({ts, ts + e["dur"].get<double>(), e["pid"].get<int64_t>()});
    }
    if (ph == "X" && e["pid"] == tr::kGpuPid && e.value("cat", "") == tr::kSwapCategory) {
      ASSERT_GT(e["args"].value("bytes", uint64_t{0}), 0u) << e.dump();
      swaps.push_back({ts, ts + e["dur"].get<double>()});
    }
    // The link's track draws a swap-out that would overlap the one before
    // it after that one; the job's own instant says when it was queued.
    if (ph == "i" && e.value("cat", "") == tr::kSwapCategory && e["name"] == "swap-out queued") {
      swaps.push_back({ts, ts});
    }
    const bool by_job = ph == "C" || (ph != "M" && (e["tid"] == tr::kJobLaunchesTid || e["tid"] == tr::kJobMemoryTid));
    if (by_job && e["pid"] != tr::kGpuPid) job_side.insert(e["pid"].get<int64_t>());
  }
  EXPECT_EQ(job_side.size(), 2u) << "each job's own events are merged in";

  // Until the jobs have allocated what they will, they fit together and run
  // at once; from then on they take turns (a job may get its turn back
  // while the other is not ready), and every handover from one job to the
  // other has a swap between the two slices (begun, or queued behind the
  // one before it).
  std::sort(slices.begin(), slices.end(), [](const Slice& x, const Slice& y) { return x.from < y.from; });
  std::set<int64_t> pids;
  size_t handovers = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    pids.insert(slices[i].pid);
    if (i == 0) continue;
    const Slice& prev = slices[i - 1];
    const Slice& next = slices[i];
    if (next.from < prev.to - 1e-3 || next.pid == prev.pid) continue;  // concurrent while both fit, or its turn again
    ++handovers;
    const bool swapped = std::any_of(swaps.begin(), swaps.end(), [&](const std::pair<double, double>& s) {
      return s.first >= prev.to - 1e-3 && s.first <= next.from + 1e-3;
    });
    EXPECT_TRUE(swapped) << "no swap between the slice ending at " << prev.to << " us and the one starting at "
                         << next.from << " us";
  }
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_GE(handovers, 4u) << "the jobs' slices alternate (A, B, A, B...)";
  std::printf("%zu slices, %zu handovers, %zu swaps, %llu switches\n", slices.size(), handovers, swaps.size(),
              static_cast<unsigned long long>(run.switches));
  if (!HasFailure()) std::remove(path.c_str());  // kept for a look when the test fails
}

}  // namespace

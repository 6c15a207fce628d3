// Every byte a job holds on the device is msched's, predicted or not: jobs
// without templates (their kernels predicted from their pointers, or left to
// fault with MSCHED_UNKNOWN=fault) give all of it back when paused or
// stopped, and take back what they used when they return. Checked on the
// simulated GPU's own counts (MSIM_STATS): what a neighbour had to evict,
// and how often each job faulted, against the same job alone.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator_process.h"

namespace {

namespace ts = msched::testsupport;
using nlohmann::json;
using ts::kMiB;

// The simulated driver's counters for one process (MSIM_STATS).
json SimStats(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in, nullptr, false);
}
uint64_t EvictedByTheDriver(const json& s) { return s["bytes"]["d2h"]["eviction"].get<uint64_t>(); }

class MemoryOwnershipTest : public ts::CoordinatorProcessTest, public ::testing::WithParamInterface<const char*> {
 protected:
  // A vector-add job without templates, its kernels handled as MSCHED_UNKNOWN says.
  size_t StartUntemplated(uint64_t foot, int tasks) {
    const size_t i = jobs_.size();
    return StartJob(foot, tasks,
                    {{"MSCHED_TEMPLATES", dir_ + "/none"}, {"MSCHED_UNKNOWN", GetParam()}, {"MSIM_STATS", Stats(i)}});
  }
  std::string Stats(size_t i) const { return dir_ + "/job" + std::to_string(i) + ".sim.json"; }

  // The same job run alone under msched, without a coordinator: its faults
  // are those its first touches cost.
  uint64_t FaultsAlone(uint64_t foot, int tasks) {
    const std::string stats = dir_ + "/alone.sim.json";
    const ts::ProgramRun r = ts::RunProgram({MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set",
                                             "FOOT=" + std::to_string(foot), "--set", "TASKS=" + std::to_string(tasks)},
                                            {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                             {"LD_PRELOAD", LIBMSCHED},
                                             {"MSIM_DEVICE", device_ + "alone"},
                                             {"MSIM_HBM_BYTES", std::to_string(kHbm)},
                                             {"MSCHED_COORD", "off"},
                                             {"MSCHED_TEMPLATES", dir_ + "/none"},
                                             {"MSCHED_UNKNOWN", GetParam()},
                                             {"MSIM_STATS", stats}});
    ::unlink(("/dev/shm/msim-" + device_ + "alone").c_str());
    EXPECT_EQ(r.status, 0) << r.err;
    return SimStats(stats)["faults"].get<uint64_t>();
  }
};

// A 40 MiB job is paused on a 64 MiB GPU: `msched pause` returns once its
// memory is on the host, and a plain job of the same size started then
// evicts nothing of it. Resumed, the paused job finishes with the checksum
// of its run alone.
TEST_P(MemoryOwnershipTest, APausedJobHoldsNothingAndResumesIntact) {
  StartDaemon();
  const uint64_t foot = 40 * kMiB;
  StartUntemplated(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }));
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("its memory is on the host"), std::string::npos) << r.out;
  EXPECT_EQ(Job("job0")["resident_bytes"], 0) << "as the simulated driver counts it";
  const size_t plain = StartUntemplated(foot, 20);
  ASSERT_EQ(jobs_[plain].Wait(), 0) << Err(plain);
  EXPECT_EQ(EvictedByTheDriver(SimStats(Stats(plain))), 0u) << "nothing of the paused job was left to evict";
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resumed"), std::string::npos) << r.out;
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
}

// Two 40 MiB jobs take turns on a 64 MiB GPU in short slices: each stop
// gives its memory back in one pass and each turn starts by loading what
// the job used, so neither faults more than its first touches cost.
TEST_P(MemoryOwnershipTest, TwoJobsTakingTurnsFaultOnlyOnFirstTouch) {
  StartDaemon({"--slice", "5ms", "--max-slice", "20ms"});
  const uint64_t foot = 40 * kMiB;
  const int tasks = 400;
  StartUntemplated(foot, tasks);
  StartUntemplated(foot, tasks);
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  ASSERT_EQ(jobs_[1].Wait(), 0) << Err(1);
  const json status = Status();
  ASSERT_TRUE(status.is_object());
  EXPECT_GE(status["coordinator"]["switches"].get<uint64_t>(), 4u) << "they took turns";
  const uint64_t first_touch = FaultsAlone(foot, tasks);
  const std::string alone = AloneChecksum(foot, tasks);
  for (size_t i = 0; i < 2; ++i) {
    const json s = SimStats(Stats(i));
    EXPECT_LE(s["faults"].get<uint64_t>(), first_touch) << "job " << i;
    EXPECT_EQ(EvictedByTheDriver(s), 0u) << "job " << i << ": msched moved everything";
    EXPECT_EQ(ts::Checksums(ts::Slurp(Out(i))), alone) << "job " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Unknown, MemoryOwnershipTest, ::testing::Values("pointers", "fault"));

// Jobs that map their memory themselves through the VMM API, as vLLM's and
// SGLang's allocators do (workloads/vmm_vadd.json).
class VmmMemoryTest : public ts::CoordinatorProcessTest {
 protected:
  VmmMemoryTest() { workload_ = std::string(TEST_WORKLOADS_DIR) + "/vmm_vadd.json"; }

  // A process that is not msched's reads the free device memory and then
  // allocates `bytes` with cuMemAlloc (workloads/plain_alloc.json): its
  // msim-run result, with its exit status.
  json PlainAlloc(uint64_t bytes) {
    const std::string out = dir_ + "/plain.json";
    ::unlink(out.c_str());
    const ts::ProgramRun r = ts::RunProgram({MSIM_RUN, std::string(TEST_WORKLOADS_DIR) + "/plain_alloc.json", "--set",
                                             "FOOT=" + std::to_string(bytes), "--json", out},
                                            {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                             {"LD_PRELOAD", ""},
                                             {"MSIM_DEVICE", device_},
                                             {"MSIM_HBM_BYTES", std::to_string(kHbm)}});
    json result = SimStats(out);
    if (!result.is_object()) result = json::object();
    result["status"] = r.status;
    return result;
  }

  // msim-run with `args` alone, without msched, on a GPU of its own.
  ts::ProgramRun RunAlone(std::vector<std::string> args) {
    args.insert(args.begin(), MSIM_RUN);
    const ts::ProgramRun r = ts::RunProgram(args, {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                                   {"LD_PRELOAD", ""},
                                                   {"MSIM_DEVICE", device_ + "alone"},
                                                   {"MSIM_HBM_BYTES", std::to_string(kHbm)}});
    ::unlink(("/dev/shm/msim-" + device_ + "alone").c_str());
    return r;
  }
};

// The job registers at its first cuMemCreate, and a pause gives its VMM
// memory back for real: a process that is not msched's sees it free
// (cuMemGetInfo) and allocates it with cuMemAlloc, which it could not while
// the job ran. Resumed, the job maps it back where it was and finishes with
// the checksums of its run alone.
TEST_F(VmmMemoryTest, APausedJobsVmmMemoryIsFreeForAnyProcessAndTheJobResumesIntact) {
  StartDaemon();
  const uint64_t foot = 36 * kMiB;  // three buffers of 12 MiB: whole 2 MiB granules
  StartJob(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }))
      << "registered with its coordinator";
  EXPECT_NE(PlainAlloc(foot)["status"], 0) << "the running job holds the memory";
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("its memory is on the host"), std::string::npos) << r.out;
  const json plain = PlainAlloc(foot);
  EXPECT_EQ(plain["status"], 0) << plain.dump();
  EXPECT_EQ(plain.value("free_bytes", uint64_t{0}), kHbm) << "all of the GPU: " << plain.dump();
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
}

// Two such jobs whose VMM memory together exceeds the GPU take turns: each
// switch moves the stopped job's memory out whole and brings the other's
// back, and both finish with the checksums of their runs alone.
TEST_F(VmmMemoryTest, TwoJobsWhoseVmmMemoryExceedsTheGpuTakeTurnsIntact) {
  StartDaemon({"--slice", "5ms", "--max-slice", "20ms"});
  const uint64_t foot = 36 * kMiB;
  const int tasks = 300;
  StartJob(foot, tasks);
  StartJob(foot, tasks);
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  ASSERT_EQ(jobs_[1].Wait(), 0) << Err(1);
  const json status = Status();
  ASSERT_TRUE(status.is_object());
  EXPECT_GE(status["coordinator"]["switches"].get<uint64_t>(), 4u) << "they took turns";
  const std::string alone = AloneChecksum(foot, tasks);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), alone);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), alone);
}

// Two vLLM-like servers (llm_service.json under msim-run --vmm: weights and
// a preallocated KV-cache pool mapped through the VMM API) whose memory
// together exceeds the GPU answer their requests time-sliced by the
// coordinator, every request with the data of each server's run alone.
TEST_F(VmmMemoryTest, TwoVllmLikeServersWhoseMemoryExceedsTheGpuAnswerEveryRequestIntact) {
  StartDaemon({"--slice", "5ms", "--max-slice", "20ms"});
  // 24 MiB of weights, a 2 MiB KV pool and three small buffers of one
  // 2 MiB granule each: 32 MiB a server, 64 MiB for the two.
  const auto server = [&](int model) {
    return std::vector<std::string>{std::string(WORKLOADS_DIR) + "/llm_service.json",
                                    "--vmm",
                                    "--set",
                                    "FOOT=24M",
                                    "--set",
                                    "MODELS=2",
                                    "--set",
                                    "MODEL=" + std::to_string(model),
                                    "--set",
                                    "REQS=16",
                                    "--set",
                                    "RATE=200",
                                    "--json",
                                    dir_ + "/server" + std::to_string(model) + ".json"};
  };
  for (int model : {0, 1}) StartProgram(server(model), {{"MSCHED_CLASS", "service"}});
  for (size_t i : {0, 1}) ASSERT_EQ(jobs_[i].Wait(), 0) << Err(i);
  const json status = Status();
  ASSERT_TRUE(status.is_object());
  EXPECT_GE(status["coordinator"]["switches"].get<uint64_t>(), 2u) << "they took turns";
  for (int model : {0, 1}) {
    const json run = SimStats(dir_ + "/server" + std::to_string(model) + ".json");
    EXPECT_FALSE(run["latency_ns"].empty()) << "server " << model << " answered requests";
    std::vector<std::string> alone = server(model);
    alone.back() = dir_ + "/alone" + std::to_string(model) + ".json";
    const ts::ProgramRun r = RunAlone(alone);
    ASSERT_EQ(r.status, 0) << r.err;
    const json by_itself = SimStats(dir_ + "/alone" + std::to_string(model) + ".json");
    EXPECT_EQ(run["checksums"], by_itself["checksums"]) << "server " << model;
    EXPECT_EQ(run["latency_ns"].size(), by_itself["latency_ns"].size()) << "server " << model << ": every request";
  }
}

// A handle exported to another process (workloads/vmm_shared_vadd.json: C,
// as NCCL hands a buffer to a peer) is never moved, since the peer maps it
// too: a pause moves the job's other VMM memory out and keeps that, and
// `msched status` says so. Resumed, the job finishes intact.
TEST_F(VmmMemoryTest, AHandleExportedToAnotherProcessStaysOnTheGpuThroughAPauseAndStatusSaysSo) {
  workload_ = std::string(TEST_WORKLOADS_DIR) + "/vmm_shared_vadd.json";
  StartDaemon();
  const uint64_t foot = 36 * kMiB, buffer = foot / 3;
  StartJob(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }));
  ASSERT_TRUE(Eventually([&] { return Job("job0")["shared_bytes"] == buffer; })) << Job("job0").dump();
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Job("job0")["resident_bytes"], buffer) << "the exported handle stays";
  EXPECT_NE(Cli({"status"}).out.find("SHARED"), std::string::npos);
  const json plain = PlainAlloc(foot - buffer);
  EXPECT_EQ(plain["status"], 0) << "the rest is free: " << plain.dump();
  EXPECT_EQ(plain.value("free_bytes", uint64_t{0}), kHbm - buffer) << "all but the exported handle: " << plain.dump();
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
}

// A trainer whose buffers live in PyTorch-style expandable segments
// (dnn_train.json under msim-run --expandable: one reserved range grown in
// 2 MiB VMM pieces, tensors spanning several) takes turns with another VMM
// job that does not fit beside it, and both finish with the checksums of
// their runs alone.
TEST_F(VmmMemoryTest, AnExpandableSegmentsTrainerTakesTurnsWithAnotherJobIntact) {
  StartDaemon({"--slice", "5ms", "--max-slice", "20ms"});
  const std::vector<std::string> trainer = {
      std::string(WORKLOADS_DIR) + "/dnn_train.json", "--expandable", "--set", "FOOT=24M", "--set", "STEPS=40"};
  StartProgram(trainer);
  StartJob(36 * kMiB, 300);
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  ASSERT_EQ(jobs_[1].Wait(), 0) << Err(1);
  const json status = Status();
  ASSERT_TRUE(status.is_object());
  EXPECT_GE(status["coordinator"]["switches"].get<uint64_t>(), 2u) << "they took turns";
  const ts::ProgramRun r = RunAlone(trainer);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), ts::Checksums(r.out)) << "the trainer";
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), AloneChecksum(36 * kMiB, 300)) << "the other job";
}

// Unified memory, by contrast (micro_vadd.json, which msched makes
// managed): a pause moves the job's pages to the host, but the driver keeps
// their GPU chunks allocated to the job until another allocation needs
// them. A process that is not msched's sees that memory used in
// cuMemGetInfo, and yet its cuMemAlloc of it succeeds. Resumed, the job
// finishes intact.
TEST_F(VmmMemoryTest, APausedUnifiedMemoryJobsChunksLookUsedToAnotherProcessYetItsAllocationGetsThem) {
  workload_ = std::string(WORKLOADS_DIR) + "/micro_vadd.json";
  StartDaemon();
  const uint64_t foot = 36 * kMiB;
  StartJob(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return PlainAlloc(kMiB).value("free_bytes", kHbm) <= kHbm - foot; }))
      << "the job's data reached the GPU";
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Job("job0")["resident_bytes"], 0) << "its pages are on the host";
  const json plain = PlainAlloc(foot);
  EXPECT_EQ(plain["status"], 0) << "the driver takes the emptied chunks back: " << plain.dump();
  EXPECT_LE(plain.value("free_bytes", kHbm), kHbm - foot) << "yet they look used: " << plain.dump();
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
}

// A coordinated job's cuMemCreate that runs out of memory in its turn
// waits for the memory its grant counted on (a job stopped for the turn
// may answer late) and tries again: a refusal that passes (MSIM_FAIL, once)
// never reaches the program. Without a coordinator the driver's answer
// stands.
TEST_F(VmmMemoryTest, ACoordinatedJobsVmmAllocationWaitsOutAPassingOutOfMemory) {
  StartDaemon();
  const uint64_t foot = 36 * kMiB;
  const std::string once = "cuMemCreate:2:CUDA_ERROR_OUT_OF_MEMORY";
  StartJob(foot, 20, {{"MSIM_FAIL", once}});
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_NE(Err(0).find("waiting for device memory"), std::string::npos) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 20));
  const ts::ProgramRun alone = ts::RunProgram({MSIM_RUN, workload_, "--set", "FOOT=36M", "--set", "TASKS=20"},
                                              {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                               {"LD_PRELOAD", LIBMSCHED},
                                               {"MSCHED_COORD", "off"},
                                               {"MSIM_FAIL", once},
                                               {"MSIM_DEVICE", device_ + "alone"},
                                               {"MSIM_HBM_BYTES", std::to_string(kHbm)}});
  ::unlink(("/dev/shm/msim-" + device_ + "alone").c_str());
  EXPECT_NE(alone.status, 0) << "uncoordinated, the program gets the driver's answer";
  EXPECT_NE(alone.err.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << alone.err;
}

// The driver refuses one of msched's calls while it moves a paused job's
// VMM memory (MSIM_FAIL names the call and which one: the job's own calls
// of that name come before, so the failure lands on msched's): out, the
// copy, either unmap or the release; back, the creation, the copy in, the
// mapping or the access. What failed going out stays on the GPU; what
// failed coming back is tried again before the job runs. Either way the job
// finishes with the checksums of its run alone.
class VmmMoveFailureTest : public VmmMemoryTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(VmmMoveFailureTest, TheJobFinishesIntactWhateverStepTheDriverRefuses) {
  StartDaemon();
  const uint64_t foot = 36 * kMiB;
  StartJob(foot, 1500, {{"MSIM_FAIL", GetParam()}});
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }));
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_NE(Err(0).find("msim: MSIM_FAIL: "), std::string::npos) << "the failure was injected:\n" << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
}

// vmm_vadd.json makes 3 handles, 3 mappings and 3 grants of access before
// it is paused, and no copy to the host, unmap or release until its end;
// msched copies each handle through a mapping of its own.
INSTANTIATE_TEST_SUITE_P(EachStep, VmmMoveFailureTest,
                         ::testing::Values("cuMemcpyDtoH:1:CUDA_ERROR_UNKNOWN", "cuMemUnmap:1:CUDA_ERROR_UNKNOWN",
                                           "cuMemUnmap:2:CUDA_ERROR_UNKNOWN", "cuMemRelease:1:CUDA_ERROR_UNKNOWN",
                                           "cuMemCreate:4:CUDA_ERROR_OUT_OF_MEMORY",
                                           "cuMemcpyHtoD:3:CUDA_ERROR_UNKNOWN", "cuMemMap:8:CUDA_ERROR_UNKNOWN",
                                           "cuMemSetAccess:8:CUDA_ERROR_UNKNOWN"));

// A job that maps its output buffer afresh for every task and unmaps and
// releases it after (workloads/vmm_churn.json) is paused and resumed twice
// and takes turns with another VMM job: stops find it between a map and an
// unmap, with the buffer mapped or not, and it maps new memory after msched
// released and brought back the rest. Both finish with the checksums of
// their runs alone, and the churning job's VMM memory did move.
TEST_F(VmmMemoryTest, AJobThatMapsAndUnmapsEveryTaskIsPausedAndTimeSlicedIntact) {
  StartDaemon({"--slice", "5ms", "--max-slice", "20ms"});
  const std::string churn = std::string(TEST_WORKLOADS_DIR) + "/vmm_churn.json";
  const std::vector<std::string> args = {churn, "--set", "FOOT=36M", "--set", "TASKS=600"};
  StartProgram(args, {{"MSCHED_STATS", dir_ + "/churn.hook.json"}});
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }));
  StartJob(36 * kMiB, 300);
  for (int round = 0; round < 2; ++round) {
    ts::ProgramRun r = Cli({"pause", "job0"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("its memory is on the host"), std::string::npos) << r.out;
    r = Cli({"resume", "job0"});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  ASSERT_EQ(jobs_[1].Wait(), 0) << Err(1);
  const ts::ProgramRun alone = RunAlone(args);
  ASSERT_EQ(alone.status, 0) << alone.err;
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), ts::Checksums(alone.out)) << "the churning job";
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(1))), AloneChecksum(36 * kMiB, 300)) << "the other job";
  const json hook = SimStats(dir_ + "/churn.hook.json");
  ASSERT_TRUE(hook.is_object());
  EXPECT_GT(ts::JsonU64(hook, {"vmm", "moved_out_bytes"}), 0u) << hook.dump();
  EXPECT_EQ(ts::JsonU64(hook, {"vmm", "moved_out_bytes"}), ts::JsonU64(hook, {"vmm", "moved_back_bytes"}))
      << "all of it came back";
}

// A paused VMM job resumed while a process that is not msched's holds the
// memory it gave back: mapping back runs out of device memory, and the job
// waits, its gate closed, until that process lets go. It never runs with a
// mapping that lacks its data: it finishes with the checksums of its run
// alone.
TEST_F(VmmMemoryTest, AResumedJobWaitsWhileAnotherProcessHoldsItsMemoryAndNeverRunsWithoutIt) {
  StartDaemon();
  const uint64_t foot = 36 * kMiB;
  StartJob(foot, 1500);
  ASSERT_TRUE(Eventually([&] { return Job("job0").is_object() && Job("job0")["on_gpu"] == true; }));
  ts::ProgramRun r = Cli({"pause", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  // A plain vector-add job of 40 MiB, long enough in real time to hold its
  // memory across the resume.
  msched::SpawnOptions o;
  o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
           {"LD_PRELOAD", ""},
           {"MSIM_DEVICE", device_},
           {"MSIM_HBM_BYTES", std::to_string(kHbm)}};
  o.stdout_path = dir_ + "/holder.out";
  o.stderr_path = dir_ + "/holder.err";
  msched::Result<msched::Subprocess> holder = msched::Subprocess::Spawn(
      {MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set", "FOOT=40M", "--set", "TASKS=40"}, o);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_TRUE(Eventually([&] { return PlainAlloc(kMiB).value("free_bytes", kHbm) <= kHbm - 40 * kMiB; }))
      << "the plain job holds its memory";
  r = Cli({"resume", "job0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(holder->Wait(), 0) << ts::Slurp(dir_ + "/holder.err");
  ASSERT_EQ(jobs_[0].Wait(), 0) << Err(0);
  EXPECT_EQ(ts::Checksums(ts::Slurp(Out(0))), AloneChecksum(foot, 1500));
  EXPECT_NE(Err(0).find("waiting to map VMM memory back"), std::string::npos) << "it did wait for the memory:\n"
                                                                              << Err(0);
}

}  // namespace

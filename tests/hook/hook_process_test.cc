// libmsched.so preloaded into real driver-API programs running on the
// simulated GPU: a program linked with -lcuda (msim-run), one that resolves
// everything cudart-style (probe_app), and cudart itself. The tests read the
// hook's statistics (MSCHED_STATS), the simulator's (MSIM_STATS), exit
// status and output.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/trace.h"
#include "run_program.h"

namespace {

namespace testsupport = msched::testsupport;
using json = nlohmann::json;
using msched::SiblingTraces;

struct Outcome : testsupport::ProgramRun {
  json hook, sim;  // statistics, when written
};

// Runs argv with libmsched preloaded (unless preload is false) over the
// simulator, with `env` added. Templates for the workloads' kernels are
// always available.
Outcome RunHooked(std::vector<std::string> argv, std::map<std::string, std::string> env = {}, bool preload = true) {
  static int serial = 0;
  const std::string base = testing::TempDir() + "hook_" + std::to_string(getpid()) + "_" + std::to_string(serial++);
  env.emplace("LD_LIBRARY_PATH", SIM_LIB_DIR);
  if (preload) env.emplace("LD_PRELOAD", LIBMSCHED);
  env.emplace("MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels");
  env.emplace("MSCHED_STATS", base + ".hook.json");
  env.emplace("MSIM_STATS", base + ".sim.json");
  env.emplace("MSIM_HBM_BYTES", std::to_string(256ull << 20));
  // Inherited settings that would change the outcome are dropped unless the
  // test sets them.
  for (const char* k : {"MSIM_DEVICE", "MSCHED_LOG", "MSCHED_LOG_LEVEL", "MSCHED_GPU_MEMORY", "MSCHED_COORD"}) {
    env.emplace(k, "");
  }
  Outcome r;
  static_cast<testsupport::ProgramRun&>(r) = testsupport::RunProgram(argv, env);
  r.hook = json::parse(testsupport::Slurp(base + ".hook.json"), nullptr, false);
  r.sim = json::parse(testsupport::Slurp(base + ".sim.json"), nullptr, false);
  return r;
}

std::string Workload(const std::string& name) { return std::string(WORKLOADS_DIR) + "/" + name; }

using testsupport::Checksums;
uint64_t U(const json& j, std::initializer_list<const char*> path) { return testsupport::JsonU64(j, path); }

// Another interposer preloaded beside libmsched resolves the next getppid
// with dlsym(RTLD_NEXT) in its constructor, which runs before libmsched's:
// the answer must be libc's, whatever the order, not its own wrapper (on
// which it would recurse forever).
TEST(HookProcessTest, AnotherInterposersNextLookupIsAnsweredForItsCaller) {
  for (const std::string& preload :
       {std::string(LIBMSCHED) + ":" + NEXT_INTERPOSER, std::string(NEXT_INTERPOSER) + ":" + LIBMSCHED}) {
    const Outcome r = RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"LD_PRELOAD", preload}});
    EXPECT_EQ(r.status, 0) << preload << ": " << r.err;
    EXPECT_NE(r.err.find("next: libc\n"), std::string::npos) << preload << ": " << r.err;
  }
}

TEST(HookProcessTest, ProgramLinkedWithLibcudaIsIntercepted) {
  const Outcome r = RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(U(r.hook, {"launches", "total"}), 16u);
  EXPECT_EQ(U(r.hook, {"launches", "predicted"}), 16u);
  EXPECT_EQ(U(r.hook, {"allocations", "converted"}), 4u);  // device, pitch, async, pool: all but managed and host
  EXPECT_GT(U(r.hook, {"calls", "cuLaunchKernel"}), 0u);
  EXPECT_GT(U(r.hook, {"calls", "cuLaunchKernelEx"}), 0u);
  EXPECT_GT(U(r.hook, {"calls", "cuLaunchCooperativeKernel"}), 0u);
  EXPECT_GT(U(r.hook, {"calls", "cuMemAllocPitch_v2"}), 0u);
  EXPECT_GT(U(r.hook, {"calls", "cuMemAllocAsync"}), 0u);
  EXPECT_EQ(U(r.sim, {"faults"}), 0u) << "every kernel's data was prefetched";
}

TEST(HookProcessTest, CudartStyleLookupsReturnWrappersOfTheRightAbi) {
  const Outcome r = RunHooked({PROBE_APP, "lookups"}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string& o = r.out;
  EXPECT_NE(o.find("dlsym cuGetProcAddress_v2 libmsched.so:cuGetProcAddress_v2"), std::string::npos) << o;
  EXPECT_NE(o.find("cuGetProcAddress@12000/0 libmsched.so:cuGetProcAddress_v2\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuGetProcAddress@11030/0 libmsched.so:cuGetProcAddress\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuLaunchKernel@4000/0 libmsched.so:cuLaunchKernel\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuLaunchKernel@7000/2 libmsched.so:cuLaunchKernel_ptsz\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuLaunchKernelEx@11060/2 libmsched.so:cuLaunchKernelEx_ptsz\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuMemAlloc@3020/0 libmsched.so:cuMemAlloc_v2\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuMemcpyHtoD@7000/2 libmsched.so:cuMemcpyHtoD_v2_ptds\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuCtxSynchronize@13000/0 libmsched.so:cuCtxSynchronize_v2\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuCtxSynchronize@2000/0 libmsched.so:cuCtxSynchronize\n"), std::string::npos) << o;
  // An ABI msched does not hook, and an entry point it does not hook, pass through.
  EXPECT_NE(o.find("cuMemAlloc@2000/0 libcuda.so.1:cuMemAlloc\n"), std::string::npos) << o;
  EXPECT_NE(o.find("cuModuleLoadData@2000/0 libcuda.so.1:cuModuleLoadData\n"), std::string::npos) << o;
  EXPECT_GE(U(r.hook, {"lookups", "get_proc_address_substituted"}), 10u);
  EXPECT_EQ(U(r.hook, {"lookups", "dlsym_substituted"}), 1u);

  const Outcome plain = RunHooked({PROBE_APP, "lookups"}, {}, /*preload=*/false);
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find("libmsched"), std::string::npos) << "without the hook every answer is the driver's";
}

TEST(HookProcessTest, CudartStyleProgramRunsThroughTheWrappers) {
  const Outcome plain = RunHooked({PROBE_APP, "run"}, {}, false);
  ASSERT_EQ(plain.status, 0) << plain.err;
  for (const char* cmd : {"run", "run_ptsz"}) {
    const Outcome r = RunHooked({PROBE_APP, cmd}, {{"MSCHED_MODE", "msched"}});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(Checksums(r.out), Checksums(plain.out));
    EXPECT_EQ(U(r.hook, {"launches", "total"}), 3u) << cmd;
    EXPECT_EQ(U(r.hook, {"allocations", "converted"}), 3u);
    EXPECT_EQ(U(r.hook, {"calls", std::string(cmd) == "run" ? "cuLaunchKernel" : "cuLaunchKernel_ptsz"}), 3u);
  }
}

TEST(HookProcessTest, ChecksumsAreIdenticalInEveryModeAndUnderASmallBudget) {
  for (const char* workload : {"integrity.json", "llm_decode.json", "micro_matmul.json"}) {
    const Outcome reference = RunHooked({MSIM_RUN, Workload(workload)}, {}, false);
    ASSERT_EQ(reference.status, 0) << reference.err;
    const std::string sums = Checksums(reference.out);
    ASSERT_FALSE(sums.empty());
    for (const char* mode : {"off", "um", "alloc", "msched"}) {
      for (const char* budget : {"", "4M"}) {
        const Outcome r =
            RunHooked({MSIM_RUN, Workload(workload)}, {{"MSCHED_MODE", mode}, {"MSCHED_GPU_MEMORY", budget}});
        ASSERT_EQ(r.status, 0) << workload << " " << mode << "\n" << r.err;
        EXPECT_EQ(Checksums(r.out), sums) << workload << " in mode " << mode << " budget '" << budget << "'";
      }
    }
  }
}

// Templates that claim every region is only read: msched advises whatever
// kernels touch read-mostly and never takes the advice off before their
// writes. The driver collapses the duplicates the writes land on, so no
// data may change; what msched believes of its host copies is wrong, which
// may cost time only.
TEST(HookProcessTest, ChecksumsHoldWhenTemplatesSayKernelsOnlyReadWhatTheyWrite) {
  const std::string dir = testing::TempDir() + "read_only_templates_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  std::string text = testsupport::Slurp(std::string(WORKLOADS_DIR) + "/kernels/basic.templates.json");
  for (const char* mode : {"\"readwrite\"", "\"write\""}) {
    for (size_t at = text.find(mode); at != std::string::npos; at = text.find(mode)) {
      text.replace(at, std::string(mode).size(), "\"read\"");
    }
  }
  ASSERT_EQ(text.find("write\""), std::string::npos);
  std::ofstream(dir + "/basic.templates.json") << text;
  for (const char* workload : {"integrity.json", "llm_decode.json"}) {
    const Outcome reference = RunHooked({MSIM_RUN, Workload(workload)}, {}, false);
    ASSERT_EQ(reference.status, 0) << reference.err;
    for (const char* budget : {"", "4M"}) {
      const Outcome r =
          RunHooked({MSIM_RUN, Workload(workload)},
                    {{"MSCHED_MODE", "msched"}, {"MSCHED_GPU_MEMORY", budget}, {"MSCHED_TEMPLATES", dir}});
      ASSERT_EQ(r.status, 0) << workload << "\n" << r.err;
      EXPECT_EQ(Checksums(r.out), Checksums(reference.out)) << workload << " budget '" << budget << "'";
      // Under the budget, evicted data comes back duplicated and is written.
      if (*budget != '\0') {
        EXPECT_GT(U(r.sim, {"collapses"}), 0u) << workload << ": kernels wrote over duplicates";
      }
    }
  }
}

// The driver refusing every read-mostly advice costs the copies it would
// have saved, never data.
TEST(HookProcessTest, ChecksumsHoldWhenTheDriverRefusesEveryAdvice) {
  for (const char* workload : {"integrity.json", "llm_decode.json"}) {
    const Outcome reference = RunHooked({MSIM_RUN, Workload(workload)}, {}, false);
    ASSERT_EQ(reference.status, 0) << reference.err;
    const Outcome r =
        RunHooked({MSIM_RUN, Workload(workload)}, {{"MSCHED_MODE", "msched"},
                                                   {"MSCHED_GPU_MEMORY", "4M"},
                                                   {"MSIM_FAIL", "cuMemAdvise:1+:CUDA_ERROR_INVALID_VALUE"}});
    ASSERT_EQ(r.status, 0) << workload << "\n" << r.err;
    EXPECT_NE(r.err.find("msim: MSIM_FAIL: "), std::string::npos) << "the failure was not injected\n" << r.err;
    EXPECT_EQ(Checksums(r.out), Checksums(reference.out)) << workload;
    EXPECT_EQ(U(r.sim, {"bytes", "duplicate_dropped"}), 0u) << workload << ": nothing was advised";
  }
}

TEST(HookProcessTest, OversubscribedWorkloadFaultsLessAndFinishesSoonerUnderMsched) {
  // Weights of 96 MiB streamed every decode step through a 64 MiB device.
  const std::vector<std::string> argv = {MSIM_RUN, Workload("llm_decode.json"),
                                         "--set",  "LAYERS=24",
                                         "--set",  "ROWS=1024",
                                         "--set",  "COLS=1024",
                                         "--set",  "MAXCTX=256",
                                         "--set",  "INIT=0"};
  std::map<std::string, json> sim;
  for (const char* mode : {"um", "msched"}) {
    const Outcome r = RunHooked(argv, {{"MSCHED_MODE", mode}, {"MSIM_HBM_BYTES", std::to_string(64ull << 20)}});
    ASSERT_EQ(r.status, 0) << r.err;
    sim[mode] = r.sim;
  }
  EXPECT_LT(U(sim["msched"], {"faults"}), U(sim["um"], {"faults"}));
  EXPECT_LT(U(sim["msched"], {"virtual_time_ns"}), U(sim["um"], {"virtual_time_ns"}));
}

TEST(HookProcessTest, NothingIsInjectedWhileAStreamCaptures) {
  const Outcome r = RunHooked({PROBE_APP, "capture"}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("replayed 2"), std::string::npos);
  EXPECT_EQ(U(r.hook, {"launches", "in_capture"}), 1u);
  EXPECT_EQ(U(r.hook, {"launches", "graph"}), 1u);
  EXPECT_EQ(U(r.hook, {"errors", "prefetch"}), 0u);
}

// A loop over 96 MiB captured as a CUDA graph and replayed on a 64 MiB
// device: msched predicts the graph's kernel nodes at instantiation and runs
// each replay in segments whose data it makes resident first, so nothing
// faults, and every byte reads back as without msched.
TEST(HookProcessTest, AGraphLargerThanTheBudgetIsSplitAndFaultsOnNothing) {
  const std::vector<std::string> argv = {MSIM_RUN, Workload("graph_loop.json")};
  const Outcome reference = RunHooked(argv, {}, /*preload=*/false);
  ASSERT_EQ(reference.status, 0) << reference.err;
  const std::string hbm = std::to_string(64ull << 20);
  const Outcome um = RunHooked(argv, {{"MSCHED_MODE", "um"}, {"MSIM_HBM_BYTES", hbm}});
  ASSERT_EQ(um.status, 0) << um.err;
  EXPECT_GT(U(um.sim, {"faults"}), 0u) << "the graph's data does not fit: demand paging faults";
  const Outcome r = RunHooked(argv, {{"MSCHED_MODE", "msched"}, {"MSIM_HBM_BYTES", hbm}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Checksums(r.out), Checksums(reference.out));
  EXPECT_EQ(U(r.sim, {"faults"}), 0u) << "every segment's data was made resident before it ran";
  EXPECT_EQ(U(r.hook, {"graphs", "planned"}), 1u);
  EXPECT_EQ(U(r.hook, {"graphs", "nodes_predicted"}), 12u);
  EXPECT_EQ(U(r.hook, {"graphs", "nodes_unpredicted"}), 0u);
  EXPECT_EQ(U(r.hook, {"graphs", "launches_split"}), 3u) << "each of the 3 replays";
  EXPECT_GE(U(r.hook, {"graphs", "segments"}), 3u * 3u) << "96 MiB in segments of at most 32 MiB";
  EXPECT_LT(U(r.sim, {"virtual_time_ns"}), U(um.sim, {"virtual_time_ns"}));
}

// When the graph's data fits, each launch is the program's own graph launch,
// after its data was made resident; the source graph, destroyed by the
// program right after instantiation, lives on until the executable graph goes.
TEST(HookProcessTest, AGraphThatFitsIsLaunchedWholeWithItsDataResident) {
  const Outcome r = RunHooked({MSIM_RUN, Workload("graph_loop.json")}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(U(r.sim, {"faults"}), 0u);
  EXPECT_EQ(U(r.hook, {"graphs", "planned"}), 1u);
  EXPECT_EQ(U(r.hook, {"graphs", "launches_split"}), 0u);
  EXPECT_EQ(U(r.hook, {"launches", "graph"}), 3u);
  EXPECT_EQ(U(r.hook, {"calls", "cuGraphLaunch"}), 3u);
  EXPECT_EQ(U(r.hook, {"calls", "cuGraphDestroy"}), 1u);
  EXPECT_EQ(U(r.hook, {"errors", "prefetch"}), 0u);
}

TEST(HookProcessTest, VmmMemoryIsPinnedAndMemGetInfoShowsTheJobsView) {
  const Outcome r = RunHooked({PROBE_APP, "vmm"}, {{"MSCHED_MODE", "msched"}, {"MSCHED_GPU_MEMORY", "64M"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(U(r.hook, {"allocations", "pinned"}), 1u);
  EXPECT_EQ(U(r.hook, {"allocations", "pinned_bytes"}), 4u << 20);
  // 64 MiB budget, 4 MiB pinned, 8 MiB allocated (managed).
  EXPECT_NE(r.out.find("meminfo free " + std::to_string(52u << 20) + " total " + std::to_string(64u << 20)),
            std::string::npos)
      << r.out;
}

// Memory meant for another process: a pool created with an export handle
// type is left to the driver (its blocks are plain device memory, which
// cuMemPoolExportPointer exports), counted as shared while it lives; the
// default pool's blocks are msched's managed memory. The driver cannot
// export managed memory through legacy IPC: msched says why, once, and the
// program gets the driver's answer.
TEST(HookProcessTest, ExportablePoolsAreLeftToTheDriverAndAnIpcExportOfManagedMemoryIsExplained) {
  Outcome r = RunHooked({PROBE_APP, "share", "keep"}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("exportable managed 0 export 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default managed 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ipc 1\n"), std::string::npos) << "the driver's CUDA_ERROR_INVALID_VALUE: " << r.out;
  EXPECT_NE(r.err.find("the driver cannot share managed memory through IPC"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MSCHED_MODE=off"), std::string::npos) << r.err;
  EXPECT_EQ(U(r.hook, {"ipc", "export_refused"}), 1u);
  EXPECT_EQ(U(r.hook, {"bytes", "shared"}), 4u << 20) << "the exportable block, still allocated";

  r = RunHooked({PROBE_APP, "share", "free"}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(U(r.hook, {"bytes", "shared"}), 0u) << "freed, it is no longer shared";

  r = RunHooked({PROBE_APP, "share", "free"}, {{"MSCHED_MODE", "off"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ipc 0\n"), std::string::npos) << "plain device memory exports: " << r.out;
  EXPECT_NE(r.out.find("default managed 0\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("cannot share managed memory"), std::string::npos) << r.err;
}

TEST(HookProcessTest, StreamOrderedFreesWaitForTheirStream) {
  for (const char* mode : {"off", "msched"}) {
    const Outcome r = RunHooked({PROBE_APP, "async"}, {{"MSCHED_MODE", mode}});
    EXPECT_EQ(r.status, 0) << mode << "\n" << r.err;
    EXPECT_NE(r.out.find("async ok"), std::string::npos);
  }
}

// A per-tensor stream-ordered allocator, as PyTorch's cudaMallocAsync
// backend drives the driver: cuMemAllocAsync and cuMemAllocFromPoolAsync per
// tensor on two streams, cuMemFreeAsync as soon as the last reader is
// queued, cuMemPoolTrimTo at the end. msched serves it from its pool: the
// same data in every mode (and under a budget smaller than the weights), one
// managed allocation in all instead of one per tensor, and all of it given
// back when the program trims.
TEST(HookProcessTest, StreamOrderedAllocationsAreServedFromThePoolWithTheSameData) {
  const std::vector<std::string> argv = {PROBE_APP, "pool", "12"};
  const Outcome plain = RunHooked(argv, {}, false);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const std::string sums = Checksums(plain.out);
  ASSERT_NE(sums.find("checksum losses "), std::string::npos) << plain.out;
  const uint64_t allocations = 16 + 12 * 15;  // the weights, then 15 activations a step
  for (const auto& [mode, budget] :
       std::vector<std::pair<std::string, std::string>>{{"off", ""}, {"um", ""}, {"msched", ""}, {"msched", "8M"}}) {
    const Outcome r = RunHooked(argv, {{"MSCHED_MODE", mode}, {"MSCHED_GPU_MEMORY", budget}});
    ASSERT_EQ(r.status, 0) << mode << " " << budget << "\n" << r.err;
    EXPECT_EQ(Checksums(r.out), sums) << "in mode " << mode << " budget '" << budget << "'";
    if (mode == "off") {
      EXPECT_EQ(U(r.hook, {"allocations", "converted"}), 0u);
      EXPECT_EQ(U(r.hook, {"pool", "chunks"}), 0u);
      continue;
    }
    EXPECT_EQ(U(r.hook, {"allocations", "converted"}), allocations) << mode;
    EXPECT_EQ(U(r.hook, {"calls", "cuMemAllocAsync"}) + U(r.hook, {"calls", "cuMemAllocFromPoolAsync"}), allocations);
    EXPECT_EQ(U(r.hook, {"pool", "chunks"}), 1u) << "one 64 MiB chunk of managed memory holds every tensor";
    EXPECT_NE(r.out.find(" managed_allocations 0\n"), std::string::npos) << "none during the steps\n" << r.out;
    EXPECT_GT(U(r.hook, {"pool", "stream_waits"}), 0u) << "reuse waited for the frees' streams";
    EXPECT_EQ(U(r.hook, {"pool", "chunks_released"}), 1u) << "cuMemPoolTrimTo gave the idle chunk back";
    EXPECT_EQ(U(r.hook, {"pool", "reserved_bytes"}), 0u);
    EXPECT_EQ(U(r.hook, {"allocations", "failed"}), 0u);
    EXPECT_EQ(U(r.hook, {"errors", "prefetch"}), 0u);
    EXPECT_EQ(U(r.hook, {"errors", "internal"}), 0u);
  }
}

TEST(HookProcessTest, RtldNextIsAnsweredRelativeToTheCaller) {
  const Outcome r = RunHooked({PROBE_APP, "rtld_next"}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("cuLaunchKernel libmsched.so:cuLaunchKernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("strlen libc.so.6"), std::string::npos) << r.out;
}

TEST(HookProcessTest, BadSettingsAreReportedOnceAndTheDefaultsApply) {
  const Outcome plain = RunHooked({MSIM_RUN, Workload("integrity.json")}, {}, false);
  const Outcome r = RunHooked(
      {MSIM_RUN, Workload("integrity.json")},
      {{"MSCHED_MODE", "fast"}, {"MSCHED_GPU_MEMORY", "lots"}, {"MSCHED_LOG_LEVEL", "warn"}, {"MSCHED_MODEE", "um"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("MSCHED_MODE='fast' is not valid: expected off|um|alloc|msched|profile"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("MSCHED_GPU_MEMORY='lots' is not valid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MSCHED_MODEE is not an msched variable"), std::string::npos) << r.err;
  EXPECT_EQ(r.hook["mode"], "msched");
  EXPECT_EQ(Checksums(r.out), Checksums(plain.out));
}

TEST(HookProcessTest, TheHookNeverWritesToStdout) {
  const Outcome plain = RunHooked({MSIM_RUN, Workload("integrity.json")}, {}, false);
  // In pass-through mode the program's output is byte for byte its own.
  const Outcome off =
      RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"MSCHED_MODE", "off"}, {"MSCHED_LOG_LEVEL", "trace"}});
  ASSERT_EQ(off.status, 0);
  EXPECT_EQ(off.out, plain.out);
  // Managing memory changes the virtual time msim-run reports, nothing else.
  const Outcome r =
      RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"MSCHED_MODE", "msched"}, {"MSCHED_LOG_LEVEL", "trace"}});
  ASSERT_EQ(r.status, 0);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("checksum ", 0) == 0 || line.rfind("workload ", 0) == 0) << "unexpected stdout: " << line;
  }
  EXPECT_NE(r.err.find("[msched "), std::string::npos) << "trace logging goes to stderr";
}

TEST(HookProcessTest, MalformedTemplatesAreReportedAndTheRestStillPredict) {
  const std::string bad = testing::TempDir() + "bad_templates_" + std::to_string(getpid()) + ".json";
  std::ofstream(bad) << R"({"format":"msched-templates","version":1,"kernels":[
      {"name":"vector_add","params":[[0,8]],"regions":[{"base":"p4","kind":"fixed","extent":1}]}]})";
  const Outcome r = RunHooked({MSIM_RUN, Workload("integrity.json")},
                              {{"MSCHED_MODE", "msched"},
                               {"MSCHED_LOG_LEVEL", "warn"},
                               {"MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels:" + bad}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(bad + ": kernel 'vector_add': regions[0].base"), std::string::npos) << r.err;
  EXPECT_EQ(U(r.hook, {"templates", "problems"}), 1u);
  EXPECT_EQ(U(r.hook, {"launches", "predicted"}), 16u) << "the good definition still loaded";
}

// A kernel without a template (scale_f32 here: the templates file has only
// fill_u32) predicts from its pointer as far as the templates used it
// (model/extent_memo.h), not to the end of the 64 MiB allocation; before any
// template used the pointer it runs to the end.
TEST(HookProcessTest, AKernelWithoutATemplateReachesAsFarAsATemplatePredictedAtItsPointer) {
  const std::string dir = testing::TempDir() + "extent_" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/fill.templates.json") << R"({"format":"msched-templates","version":1,"kernels":[
      {"name":"fill_u32","params":[[0,8],[8,4],[16,8]],
       "regions":[{"base":"p0","kind":"linear","mode":"write","extent":{"coef":4,"factors":["p2"]}}]}]})";
  auto workload = [&](bool fill_first) {
    const std::string path = dir + (fill_first ? "/fill_first.json" : "/scale_first.json");
    const std::string fill = R"({"op": "launch", "kernel": "fill_u32", "grid": [1024], "block": [256],
                                 "args": ["M", {"u32": 7}, "256K"]})";
    const std::string scale = R"({"op": "launch", "kernel": "scale_f32", "grid": [1024], "block": [256],
                                  "args": ["M", {"f32": 2.0}, "256K"]})";
    std::ofstream(path) << R"({"format": "msim-workload", "version": 1, "name": "extent",
        "modules": [")" << Workload("kernels/basic.json")
                        << R"("],
        "buffers": [{"name": "M", "size": "64M", "kind": "managed"}],
        "steps": [)" << (fill_first ? fill + ", " + scale : scale + ", " + fill)
                        << R"(, {"op": "sync"}], "checksum": ["M"]})";
    return path;
  };
  auto predicted = [&](bool fill_first) {
    const Outcome r = RunHooked({MSIM_RUN, workload(fill_first)},
                                {{"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", dir + "/fill.templates.json"}});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(U(r.hook, {"launches", "fallback"}), 1u);
    return U(r.hook, {"bytes", "predicted"});
  };
  EXPECT_EQ(predicted(true), 2u << 20) << "1 MiB each: the fill's template, then the scale from the memo";
  EXPECT_EQ(predicted(false), (64u << 20) + (1u << 20)) << "the scale before anything was learned: to the end";
}

// A template region that fails to evaluate sends its launch to the pointer
// fallback only when the region starts in the job's memory: in a list of
// tensors, the slots past the last in use hold garbage (here the size word,
// read as a pointer, with an extent that overflows), and predict nothing.
TEST(HookProcessTest, AFailedTemplateRegionFallsBackOnlyWhenItStartsInTheJobsMemory) {
  const std::string dir = testing::TempDir() + "failed_region_" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0700);
  const std::string workload = dir + "/fill.json";
  std::ofstream(workload) << R"({"format": "msim-workload", "version": 1, "name": "failed_region",
      "modules": [")" << Workload("kernels/basic.json")
                          << R"("], "buffers": [{"name": "M", "size": "64M", "kind": "managed"}],
      "steps": [{"op": "launch", "kernel": "fill_u32", "grid": [1024], "block": [256],
                 "args": ["M", {"u32": 7}, "256K"]}, {"op": "sync"}], "checksum": ["M"]})";
  auto predicted = [&](const char* failing_base, uint64_t failures) {
    const std::string path = dir + "/fill_" + failing_base + ".templates.json";
    std::ofstream(path) << R"({"format":"msched-templates","version":1,"kernels":[
        {"name":"fill_u32","params":[[0,8],[8,4],[16,8]],
         "regions":[{"base":"p0","kind":"linear","mode":"write","extent":{"coef":4,"factors":["p2"]}},
                    {"base":")"
                        << failing_base
                        << R"(","kind":"linear","mode":"write","extent":{"coef":1099511627776,"factors":["p2"]}}]}]})";
    const Outcome r = RunHooked({MSIM_RUN, workload}, {{"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", path}});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(U(r.hook, {"launches", "predicted"}), 1u);
    EXPECT_EQ(U(r.hook, {"errors", "template_evaluation"}), failures);
    return U(r.hook, {"bytes", "predicted"});
  };
  EXPECT_EQ(predicted("p2", 0), 1u << 20) << "the first region's 1 MiB alone";
  EXPECT_EQ(predicted("p0", 1), (1u << 20) + (64u << 20)) << "and the fallback: to the allocation's end";
}

TEST(HookProcessTest, StatisticsCarryWhatTheIssueAsksFor) {
  const Outcome r = RunHooked({MSIM_RUN, Workload("llm_decode.json")}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* key : {"lookups", "calls", "allocations", "launches", "bytes", "hook", "memory", "mode"}) {
    EXPECT_TRUE(r.hook.contains(key)) << key;
  }
  for (const char* key : {"count", "bytes", "converted", "pinned"}) EXPECT_TRUE(r.hook["allocations"].contains(key));
  for (const char* key : {"total", "predicted", "unknown"}) EXPECT_TRUE(r.hook["launches"].contains(key));
  for (const char* key : {"predicted", "prefetched", "evicted"}) EXPECT_TRUE(r.hook["bytes"].contains(key));
  EXPECT_GT(U(r.hook, {"hook", "launch_latency_ns", "count"}), 0u);
  EXPECT_TRUE(r.hook["hook"]["launch_latency_ns"].contains("p99"));
}

// A kernel whose data exceeds the budget faults the rest in beyond it
// (msched loads no more than the budget): once the job synchronises, what it
// holds past the budget is its peak over budget, which its reports carry to
// `msched status`. A job within its budget reports none.
TEST(HookProcessTest, WhatAKernelFaultsInBeyondTheBudgetIsThePeakOverBudget) {
  const std::string dir = testing::TempDir() + "over_budget_" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0700);
  auto peak_over = [&](int mib) {
    const std::string path = dir + "/fill_" + std::to_string(mib) + ".json";
    std::ofstream(path) << R"({"format": "msim-workload", "version": 1, "name": "over_budget",
        "modules": [")" << Workload("kernels/basic.json")
                        << R"("], "buffers": [{"name": "M", "size": ")" << mib << R"(M", "kind": "managed"}],
        "steps": [{"op": "launch", "kernel": "fill_u32", "grid": [1024], "block": [256],
                   "args": ["M", {"u32": 7}, ")"
                        << mib / 4 << R"(M"]}, {"op": "sync"}], "checksum": ["M"]})";
    const Outcome r = RunHooked({MSIM_RUN, path}, {{"MSCHED_MODE", "msched"}, {"MSCHED_GPU_MEMORY", "16MiB"}});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(U(r.hook, {"launches", "predicted"}), 1u);
    return U(r.hook, {"bytes", "peak_over_budget"});
  };
  EXPECT_EQ(peak_over(32), 16u << 20) << "32 MiB written under a 16 MiB budget";
  EXPECT_EQ(peak_over(8), 0u) << "8 MiB fits";
}

TEST(HookProcessTest, AMissingRealDriverFailsHookedCallsClearlyWithoutCrashing) {
  // The wrappers a -lcuda program binds to have no driver to forward to:
  // they answer CUDA_ERROR_NO_DEVICE and say why, once, on stderr.
  const Outcome run =
      RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"MSCHED_REAL_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("CUDA_ERROR_NO_DEVICE"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("cannot load the real driver '/nonexistent/libcuda.so.1'"), std::string::npos) << run.err;
  // A program that opened the driver itself keeps its own driver, unhooked.
  const Outcome probe = RunHooked({PROBE_APP, "run"}, {{"MSCHED_REAL_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(probe.status, 0) << probe.err;
}

// How many times `needle` occurs in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Statistics that cannot be written are not lost without a word: the
// failure is reported at the default log level. A device such as /dev/full
// is no place for them.
TEST(HookProcessTest, StatisticsThatCannotBeWrittenAreReported) {
  const Outcome r =
      RunHooked({MSIM_RUN, Workload("integrity.json")}, {{"MSCHED_MODE", "msched"}, {"MSCHED_STATS", "/dev/full"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Count(r.err, "cannot write statistics to '/dev/full' (MSCHED_STATS): not a regular file"), 1u) << r.err;
}

// A FIFO nobody reads, named by MSCHED_STATS, MSCHED_LOG or
// MSCHED_REAL_LIBCUDA, never blocks the job: each is refused with a word
// and the job goes on (its output intact), where it once blocked forever
// (at exit for MSCHED_STATS, losing the job's buffered checksums when it
// was killed).
TEST(HookProcessTest, AFifoWithNoReaderNeverBlocksTheJob) {
  const std::string fifo = testing::TempDir() + "fifo_" + std::to_string(getpid());
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::string> argv = {"timeout", "60", MSIM_RUN, Workload("integrity.json")};
  const Outcome alone = RunHooked(argv, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(alone.status, 0) << alone.err;

  const Outcome stats = RunHooked(argv, {{"MSCHED_MODE", "msched"}, {"MSCHED_STATS", fifo}});
  EXPECT_EQ(stats.status, 0) << stats.err;
  EXPECT_EQ(Checksums(stats.out), Checksums(alone.out));
  EXPECT_EQ(Count(stats.err, "cannot write statistics to '" + fifo + "' (MSCHED_STATS)"), 1u) << stats.err;

  const Outcome log = RunHooked(argv, {{"MSCHED_MODE", "msched"}, {"MSCHED_LOG", fifo}});
  EXPECT_EQ(log.status, 0) << log.err;
  EXPECT_EQ(Checksums(log.out), Checksums(alone.out));
  EXPECT_EQ(Count(log.err, "cannot log to '" + fifo + "' (MSCHED_LOG): not a regular file; logging to stderr"), 1u)
      << log.err;

  // No driver then: the program's calls fail, but it ends.
  const Outcome driver = RunHooked(argv, {{"MSCHED_MODE", "msched"}, {"MSCHED_REAL_LIBCUDA", fifo}});
  EXPECT_NE(driver.status, 124) << "blocked opening the FIFO: " << driver.err;
  EXPECT_NE(driver.err.find("cannot load the real driver '" + fifo + "' (MSCHED_REAL_LIBCUDA): not a regular file"),
            std::string::npos)
      << driver.err;
  ::unlink(fifo.c_str());
}

// An unusable MSCHED_LOG falls back to stderr, saying why, once, and a
// missing parent directory is not created.
TEST(HookProcessTest, AnUnusableLogFileIsReportedOnStderrAndNoDirectoryIsCreated) {
  const std::string dir = testing::TempDir() + "nolog_" + std::to_string(getpid());
  const std::string log = dir + "/sub/msched.log";
  const Outcome r = RunHooked({MSIM_RUN, Workload("integrity.json")},
                              {{"MSCHED_MODE", "msched"}, {"MSCHED_LOG", log}, {"MSCHED_MODEE", "um"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Count(r.err, "cannot log to '" + log + "' (MSCHED_LOG): No such file or directory; logging to stderr"), 1u)
      << r.err;
  EXPECT_NE(r.err.find("MSCHED_MODEE is not an msched variable"), std::string::npos) << "logged to stderr: " << r.err;
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << "the missing directory was created";
}

// Misspelt variables and unreadable templates files are errors, shown at the
// default level (warnings would be hidden); /dev/zero as a templates file is
// not read forever.
TEST(HookProcessTest, MisspeltVariablesAndUnreadableTemplatesAreErrorsAtTheDefaultLevel) {
  const std::string missing = "/nonexistent/t.templates.json";
  const Outcome r = RunHooked({"timeout", "60", MSIM_RUN, Workload("integrity.json")},
                              {{"MSCHED_MODE", "msched"},
                               {"MSCHED_MODEE", "um"},
                               {"MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels:/dev/zero:" + missing}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(Count(r.err, "error: MSCHED_MODEE is not an msched variable"), 1u) << r.err;
  EXPECT_EQ(Count(r.err, "error: templates: /dev/zero: not a regular file"), 1u) << r.err;
  EXPECT_EQ(Count(r.err, "error: templates: " + missing + ": cannot open"), 1u) << r.err;
  EXPECT_EQ(U(r.hook, {"launches", "predicted"}), 16u) << "the readable templates still loaded";
}

// MSCHED_REAL_LIBCUDA naming libmsched itself would make every call recurse
// into the hook (100% CPU, never finishing). It is refused: hooked calls fail
// as with no driver, promptly.
TEST(HookProcessTest, RealLibcudaNamingLibmschedItselfIsRefused) {
  const Outcome r = RunHooked({"timeout", "60", MSIM_RUN, Workload("integrity.json")},
                              {{"MSCHED_MODE", "msched"}, {"MSCHED_REAL_LIBCUDA", LIBMSCHED}});
  EXPECT_EQ(r.status, 1) << "not killed by the timeout (124)\n" << r.err;
  EXPECT_EQ(Count(r.err, std::string("MSCHED_REAL_LIBCUDA '") + LIBMSCHED + "' is libmsched itself"), 1u) << r.err;
  EXPECT_NE(r.err.find("CUDA_ERROR_NO_DEVICE"), std::string::npos) << r.err;
}

// The profile trace is created new (O_EXCL, O_NOFOLLOW) and private: opened
// with O_TRUNC alone, mode 0644, it would go to a file or symlink planted at
// the path.
TEST(HookProcessTest, TheProfileTraceIsANewPrivateFileNeverAnExistingOneOrASymlink) {
  const std::string base = testing::TempDir() + "ptrace_" + std::to_string(getpid());
  const std::string victim = base + ".victim", link = base + ".link", fresh = base + ".fresh";
  for (const std::string& p : {victim, link, fresh}) ::unlink(p.c_str());
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  // A taken path (another process's trace, or anything else) is never
  // written: the process records beside it, to a new file of its own.
  auto expect_private_trace = [](const std::string& path) {
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << path;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the trace (kernel arguments, addresses) is private: " << path;
    EXPECT_NE(testsupport::Slurp(path).find("msched-trace"), std::string::npos) << path;
  };
  for (const std::string& path : {link, victim}) {
    const Outcome r = RunHooked({PROBE_APP, "run"}, {{"MSCHED_MODE", "profile"}, {"MSCHED_PROFILE_TRACE", path}});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(testsupport::Slurp(victim), "precious\n") << "written through " << path;
    const std::vector<std::string> beside = SiblingTraces(path);
    ASSERT_EQ(beside.size(), 1u) << r.err;
    expect_private_trace(beside[0]);
    ::unlink(beside[0].c_str());
  }
  const Outcome r = RunHooked({PROBE_APP, "run"}, {{"MSCHED_MODE", "profile"}, {"MSCHED_PROFILE_TRACE", fresh}});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private_trace(fresh);
  EXPECT_TRUE(SiblingTraces(fresh).empty());
  for (const std::string& p : {victim, link, fresh}) ::unlink(p.c_str());
}

TEST(HookProcessTest, TheRealCudartsLookupsReachTheHook) {
  // cudart cannot initialise on the simulator (it needs NVIDIA's private
  // export tables), but every one of its ~440 cuGetProcAddress_v2 requests
  // comes first, and must go through the hook.
  const Outcome r = RunHooked({CUDART_APP}, {{"MSCHED_MODE", "msched"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("cudaGetDeviceCount"), std::string::npos);
  EXPECT_EQ(U(r.hook, {"lookups", "dlsym_substituted"}), 1u) << "dlsym(h, \"cuGetProcAddress_v2\")";
  EXPECT_GE(U(r.hook, {"lookups", "get_proc_address"}), 400u);
  EXPECT_GE(U(r.hook, {"lookups", "get_proc_address_substituted"}), 50u);
  EXPECT_GE(U(r.hook, {"calls", "cuGetProcAddress_v2"}), 400u);
}

}  // namespace

// Every driver entry point libmsched interposes, made to fail by the
// simulator (MSIM_FAIL) while a program calls it through the hook: the
// program must get the driver's error from that call, not another code and
// not success, must not crash, and must read back unchanged the data it wrote
// before the failure. The list of calls comes from the generated entry table,
// so a newly hooked call is covered (or fails here) without editing this file.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "hooked_entry_list.h"
#include "run_program.h"

namespace {

namespace testsupport = msched::testsupport;

// Hooked calls fault_app cannot make, each with the reason. Every hooked call
// is made today; a call added here is reported as skipped, never silently
// passed.
const std::map<std::string, std::string> kNotExercised = {};

// Hooked calls the simulator does not implement: without injection they fail
// with CUDA_ERROR_NOT_SUPPORTED from its stub, which the injected error must
// replace all the same.
const std::set<std::string> kSimulatorStubs = {"cuIpcOpenMemHandle", "cuIpcCloseMemHandle"};

// What a hooked call answers without injection: CUDA_ERROR_NOT_SUPPORTED
// from a stub; CUDA_ERROR_INVALID_VALUE from cuIpcGetMemHandle in the modes
// that make fault_app's buffer managed, which the driver cannot export;
// else success.
long CleanResult(const std::string& base, const std::string& mode) {
  if (kSimulatorStubs.count(base)) return 801;
  if (base == "cuIpcGetMemHandle" && mode != "none") return 1;
  return 0;
}

// The call made under the hook, and the modes: "none" runs without the hook
// (the simulator alone, so a failure there is fault_app's or MSIM_FAIL's).
using Case = std::tuple<HookedEntry, std::string>;

testsupport::ProgramRun RunApp(const std::vector<std::string>& argv, const std::string& mode, const std::string& fail) {
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                            {"LD_PRELOAD", mode == "none" ? "" : LIBMSCHED},
                                            {"MSCHED_MODE", mode == "none" ? "" : mode},
                                            {"MSIM_FAIL", fail},
                                            {"MSIM_STATS", ""},
                                            {"MSCHED_STATS", ""}};
  for (const char* k : {"MSIM_DEVICE", "MSCHED_LOG", "MSCHED_LOG_LEVEL", "MSCHED_GPU_MEMORY", "MSCHED_COORD"}) {
    env.emplace(k, "");
  }
  return testsupport::RunProgram(argv, env);
}

// fault_app's report: "count NAME BEFORE AFTER", "result R", "witness W expected E".
struct Report {
  std::map<std::string, std::pair<uint64_t, uint64_t>> counts;
  long result = -1;
  std::string witness, expected;
};

Report Parse(const std::string& out) {
  Report r;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word == "count") {
      std::string name;
      uint64_t before = 0, after = 0;
      in >> name >> before >> after;
      r.counts[name] = {before, after};
    } else if (word == "result") {
      in >> r.result;
    } else if (word == "witness") {
      in >> r.witness >> word >> r.expected;
    }
  }
  return r;
}

// A realistic error for each kind of call: out of memory for allocations
// (given by name), an uncorrectable ECC error for the rest (given by number,
// CUDA_ERROR_ECC_UNCORRECTABLE: neither the hook nor the simulator produces
// it on its own, so seeing it proves it came from the injected failure).
std::pair<std::string, long> ErrorFor(const std::string& base) {
  if (base.find("Alloc") != std::string::npos || base == "cuMemCreate") return {"CUDA_ERROR_OUT_OF_MEMORY", 2};
  return {"214", 214};
}

std::vector<std::string> AppArgs(const HookedEntry& e) {
  // Counted: the call itself, and cuMemAllocManaged, which the hook makes
  // instead of the plain allocation calls in the modes that convert them.
  return {FAULT_APP, e.base, std::to_string(e.version), std::to_string(e.flavour), e.base, "cuMemAllocManaged"};
}

class FaultInjectionTest : public testing::TestWithParam<Case> {};

TEST_P(FaultInjectionTest, TheDriversErrorReachesTheProgramAndWrittenDataSurvives) {
  const auto& [e, mode] = GetParam();
  if (const auto it = kNotExercised.find(e.symbol); it != kNotExercised.end()) GTEST_SKIP() << it->second;
  const std::vector<std::string> argv = AppArgs(e);

  // A run without failures: which driver call the hooked call turned into,
  // and how many calls of that name came before it.
  const testsupport::ProgramRun dry = RunApp(argv, mode, "");
  ASSERT_NE(dry.status, 3) << "hooked call " << e.symbol
                           << " is never exercised: teach fault_app to make it, or list it in kNotExercised with "
                              "the reason\n"
                           << dry.err;
  ASSERT_EQ(dry.status, 0) << dry.err;
  const Report clean = Parse(dry.out);
  ASSERT_EQ(clean.result, CleanResult(e.base, mode)) << e.symbol << " without injection\n" << dry.err;
  std::string target;
  for (const char* name : {e.base, "cuMemAllocManaged"}) {
    const auto it = clean.counts.find(name);
    ASSERT_NE(it, clean.counts.end()) << dry.out;
    if (it->second.second > it->second.first) {
      target = name;
      break;
    }
  }
  ASSERT_FALSE(target.empty()) << e.symbol << " in mode " << mode
                               << " made no driver call this test knows how to fail\n"
                               << dry.out;
  const uint64_t nth = clean.counts.at(target).first + 1;

  const auto [spec_error, code] = ErrorFor(e.base);
  const std::string spec = target + ":" + std::to_string(nth) + ":" + spec_error;
  const testsupport::ProgramRun failed = RunApp(argv, mode, spec);
  ASSERT_EQ(failed.status, 0) << "MSIM_FAIL=" << spec << " (a status over 128 is a signal)\n" << failed.err;
  EXPECT_NE(failed.err.find("msim: MSIM_FAIL: "), std::string::npos) << "the failure was not injected\n" << failed.err;
  const Report r = Parse(failed.out);
  EXPECT_EQ(r.counts.at(target).first, nth - 1) << "the run is not deterministic, the injection hit another call";
  EXPECT_EQ(r.result, code) << e.symbol << " in mode " << mode << " with MSIM_FAIL=" << spec << "\n" << failed.err;
  EXPECT_FALSE(r.witness.empty()) << failed.out;
  EXPECT_EQ(r.witness, r.expected) << "data written before the failure changed\n" << failed.err;
}

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  return std::get<1>(info.param) + "_" + std::get<0>(info.param).symbol;
}

INSTANTIATE_TEST_SUITE_P(EveryHookedCall, FaultInjectionTest,
                         testing::Combine(testing::ValuesIn(kHookedEntries), testing::Values("none", "um", "msched")),
                         CaseName);

TEST(FaultInjectionSpecTest, MalformedSpecIsReportedOnceAndInjectsNothing) {
  const HookedEntry memset = {"cuMemsetD8_v2", "cuMemsetD8", 3020, 0};
  const testsupport::ProgramRun run =
      RunApp(AppArgs(memset), "none", "cuMemsetD8:1:CUDA_ERROR_ECC_UNCORRECTABLE,cuMemAlloc:0:2");
  ASSERT_EQ(run.status, 0) << run.err;
  size_t lines = 0;
  for (size_t at = run.err.find("msim: MSIM_FAIL: "); at != std::string::npos;
       at = run.err.find("msim: MSIM_FAIL: ", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << run.err;
  EXPECT_NE(run.err.find("'cuMemAlloc:0:2'"), std::string::npos) << "the line names the bad spec\n" << run.err;
  const Report r = Parse(run.out);
  EXPECT_EQ(r.result, 0) << "the well-formed spec beside the bad one must not apply either";
  EXPECT_NE(r.witness, r.expected) << "the memset ran";
}

TEST(FaultInjectionSpecTest, OnwardSpecFailsEveryCallFromTheNth) {
  const HookedEntry sync = {"cuCtxSynchronize", "cuCtxSynchronize", 2000, 0};
  const testsupport::ProgramRun dry = RunApp(AppArgs(sync), "msched", "");
  ASSERT_EQ(dry.status, 0) << dry.err;
  const uint64_t nth = Parse(dry.out).counts.at("cuCtxSynchronize").first + 1;
  // fault_app synchronises again after the call; with "N+" that fails too.
  const testsupport::ProgramRun run =
      RunApp(AppArgs(sync), "msched", "cuCtxSynchronize:" + std::to_string(nth) + "+:CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("w.sync() failed: 719"), std::string::npos) << run.err;
}

}  // namespace

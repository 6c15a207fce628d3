// msim-run over every workload shipped in bench/workloads (at their small
// default sizes), and its handling of malformed workload, module and device
// profile files: a clear message and exit status 2 (bad input) or 1 (the
// workload failed), never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "run_program.h"

namespace {

using Outcome = msched::testsupport::ProgramRun;

Outcome RunMsim(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {MSIM_RUN};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("MSIM_HBM_BYTES", std::to_string(256ull << 20));
  env.emplace("MSIM_DEVICE", "");
  env.emplace("LD_PRELOAD", "");
  return msched::testsupport::RunProgram(argv, env);
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SimWorkloadTest, EveryShippedWorkloadRunsAndChecksums) {
  int ran = 0;
  for (const auto& entry : std::filesystem::directory_iterator(WORKLOADS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const Outcome o = RunMsim({entry.path().string()});
    EXPECT_EQ(o.status, 0) << entry.path() << "\n" << o.err;
    EXPECT_NE(o.out.find("checksum "), std::string::npos) << entry.path();
    ++ran;
  }
  EXPECT_GE(ran, 3);
}

TEST(SimWorkloadTest, ChecksumsAreDeterministic) {
  const std::string w = std::string(WORKLOADS_DIR) + "/integrity.json";
  const Outcome a = RunMsim({w}), b = RunMsim({w});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out.substr(0, a.out.find("workload")), b.out.substr(0, b.out.find("workload")));
}

TEST(SimWorkloadTest, MalformedWorkloadsAreRejectedClearly) {
  const std::string dir = std::string(WORKLOADS_DIR);
  struct Case {
    std::string text;
    std::string expect;
  } cases[] = {
      {R"({"format":"msim-workload","version":1,"steps":[)", "truncated or malformed"},
      {R"({"format":"other","version":1,"steps":[]})", "msim-workload"},
      {R"({"format":"msim-workload","version":1,"steps":[{"op":"explode"}]})", "unknown op 'explode'"},
      {R"({"format":"msim-workload","version":1,"buffers":[{"name":"A","size":"4*(N"}],"steps":[]})", "missing ')'"},
      {R"({"format":"msim-workload","version":1,"buffers":[{"name":"A","size":"8","kind":"weird"}],"steps":[]})",
       "is not device, managed"},
      {R"({"format":"msim-workload","version":1,"steps":[{"op":"launch","kernel":"k","args":[]}]})", "no kernel 'k'"},
      {R"({"format":"msim-workload","version":1,"buffers":[{"name":"A","size":"NOPE*4"}],"steps":[]})",
       "cannot evaluate 'NOPE*4'"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = Write("bad_workload_" + std::to_string(i++) + ".json", c.text);
    const Outcome o = RunMsim({path});
    EXPECT_NE(o.status, 0) << c.text;
    EXPECT_LE(o.status, 2) << c.text;
    EXPECT_NE(o.err.find(c.expect), std::string::npos) << c.text << "\nstderr: " << o.err;
  }
  EXPECT_EQ(RunMsim({dir + "/integrity.json", "--set", "NOPE=3"}).status, 2);
  EXPECT_EQ(RunMsim({"/nonexistent.json"}).status, 2);
  EXPECT_EQ(RunMsim({}).status, 2);
}

TEST(SimWorkloadTest, MalformedModuleFailsTheLoad) {
  const std::string module = Write("bad_module.json", R"({"format":"msim-module","version":1,"kernels":[
      {"name":"k","params":[8],"accesses":[{"arg":"p0","kind":"sideways","extent":"4"}]}]})");
  const std::string workload = Write("uses_bad_module.json", R"({"format":"msim-workload","version":1,
      "modules":["bad_module.json"],"steps":[]})");
  const Outcome o = RunMsim({workload});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("kernel 'k'"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("CUDA_ERROR_INVALID_IMAGE"), std::string::npos) << o.err;
}

TEST(SimWorkloadTest, MalformedDeviceProfileFailsInitialisationClearly) {
  const std::string profile = Write("bad_profile.json", R"({"format":"msim-device","version":1,"name":"x",
      "hbm_bytes":1e9,"hbm_gbps":-3})");
  const Outcome o = RunMsim({std::string(WORKLOADS_DIR) + "/integrity.json"}, {{"MSIM_PROFILE", profile}});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("hbm_gbps"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("CUDA_ERROR_NO_DEVICE"), std::string::npos) << o.err;
  const Outcome missing = RunMsim({std::string(WORKLOADS_DIR) + "/integrity.json"}, {{"MSIM_PROFILE", "no-such-gpu"}});
  EXPECT_NE(missing.err.find("no device profile named 'no-such-gpu'"), std::string::npos) << missing.err;
  // A device, or a value nested past any sane depth, is refused unread.
  const Outcome device = RunMsim({std::string(WORKLOADS_DIR) + "/integrity.json"}, {{"MSIM_PROFILE", "/dev/zero"}});
  EXPECT_EQ(device.status, 1);
  EXPECT_NE(device.err.find("not a regular file"), std::string::npos) << device.err;
  const Outcome deep =
      RunMsim({std::string(WORKLOADS_DIR) + "/integrity.json"},
              {{"MSIM_PROFILE", Write("deep_profile.json", std::string(100000, '[') + std::string(100000, ']'))}});
  EXPECT_EQ(deep.status, 1);
  EXPECT_NE(deep.err.find("nested deeper than"), std::string::npos) << deep.err;
}

// A version 2 profile gives every kind of move its rate: one left out, or
// zero, or negative, is refused with the field named (it would otherwise be
// modelled as free), as is its flag left out or not a boolean. A version 1
// profile, with one d2h_gbps, still loads.
TEST(SimWorkloadTest, AProfileMissingOrZeroingALinkRateIsRefusedWithItsName) {
  std::ifstream in(std::string(DEVICES_DIR) + "/h200-measured.json");
  const nlohmann::json shipped = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(shipped.is_object() && shipped.contains("link"));
  const std::string integrity = std::string(WORKLOADS_DIR) + "/integrity.json";
  EXPECT_EQ(RunMsim({integrity}, {{"MSIM_PROFILE", "h200-measured"}}).status, 0) << "the shipped profile loads";
  for (const auto& [rate, value] : shipped["link"].items()) {
    nlohmann::json missing = shipped, zero = shipped, negative = shipped;
    missing["link"].erase(rate);
    zero["link"][rate] = 0;
    negative["link"][rate] = -1;
    // A flag (whether a call waits) is refused when missing or not a boolean.
    const bool flag = value.is_boolean();
    for (const auto& [what, doc, said] : {std::tuple{"missing", missing, "link: missing field '" + rate + "'"},
                                          std::tuple{"zero", zero,
                                                     flag ? "link: field '" + rate + "' must be true or false"
                                                          : "link: field '" + rate + "' = 0 is outside"},
                                          std::tuple{"negative", negative,
                                                     flag ? "link: field '" + rate + "' must be true or false"
                                                          : "link: field '" + rate + "' = -1 is outside"}}) {
      const Outcome o = RunMsim({integrity}, {{"MSIM_PROFILE", Write(rate + "-" + what + ".json", doc.dump())}});
      EXPECT_EQ(o.status, 1) << rate << " " << what;
      EXPECT_NE(o.err.find(said), std::string::npos) << o.err;
    }
  }
  nlohmann::json no_link = shipped;
  no_link.erase("link");
  EXPECT_NE(
      RunMsim({integrity}, {{"MSIM_PROFILE", Write("no-link.json", no_link.dump())}}).err.find("missing field 'link'"),
      std::string::npos);
  nlohmann::json old = no_link;
  old["version"] = 1;
  EXPECT_EQ(RunMsim({integrity}, {{"MSIM_PROFILE", Write("old.json", old.dump())}}).status, 0)
      << "a version 1 profile loads";
}

// MSIM_HBM_BYTES takes a size with its unit; a shared device keeps the size
// it was made with, and a later process asking for another is told so; a
// run reports its own time, not the shared clock's.
TEST(SimWorkloadTest, TheGpusSizeTakesUnitsAndAnExistingDeviceSaysItKeepsItsOwn) {
  const std::string integrity = std::string(WORKLOADS_DIR) + "/integrity.json";
  const std::string stats = testing::TempDir() + "hbm_stats.json";
  for (const std::string size : {"64MiB", "64M", "67108864"}) {
    ASSERT_EQ(RunMsim({integrity}, {{"MSIM_HBM_BYTES", size}, {"MSIM_STATS", stats}}).status, 0) << size;
    std::ifstream in(stats);
    EXPECT_EQ(nlohmann::json::parse(in, nullptr, false)["device"]["hbm_bytes"], 64u << 20) << size;
  }
  const Outcome bad = RunMsim({integrity}, {{"MSIM_HBM_BYTES", "64 parsecs"}});
  EXPECT_NE(bad.err.find("MSIM_HBM_BYTES='64 parsecs' must be a size of at least 1 MiB"), std::string::npos) << bad.err;
  const std::string name = "hbm-test-" + std::to_string(getpid());
  const Outcome made = RunMsim({integrity}, {{"MSIM_HBM_BYTES", "64MiB"}, {"MSIM_DEVICE", name}});
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_EQ(made.err.find("already exists"), std::string::npos) << made.err;
  const Outcome again = RunMsim({integrity}, {{"MSIM_HBM_BYTES", "128MiB"}, {"MSIM_DEVICE", name}});
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("MSIM_HBM_BYTES asks for 134217728 bytes, but the shared device " + name +
                           " already exists with 67108864: it keeps its size"),
            std::string::npos)
      << again.err;
  // Its time is its own; the device's clock, which ran on from the first
  // run, is given beside it.
  EXPECT_EQ(made.out.find("the device's clock from"), std::string::npos) << made.out;
  EXPECT_NE(again.out.find("ms virtual time (the device's clock from "), std::string::npos) << again.out;
  std::filesystem::remove("/dev/shm/msim-" + name);
}

TEST(SimWorkloadTest, DeviceAllocationsBeyondHbmFailWithOutOfMemory) {
  const Outcome o = RunMsim({std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set", "FOOT=300M"});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << o.err;
  // The same footprint as managed memory runs (demand paging).
  EXPECT_EQ(RunMsim({std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set", "FOOT=300M", "--managed"}).status, 0);
}

// --arrive-ns: the job does nothing on the device before its arrival.
TEST(SimWorkloadTest, AJobStartsAtItsArrivalTime) {
  const std::string out = testing::TempDir() + "arrive_" + std::to_string(getpid()) + ".json";
  const Outcome o = RunMsim({std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--arrive-ns", "5000000", "--json", out});
  ASSERT_EQ(o.status, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_GE(j["arrival_ns"].get<uint64_t>(), 5000000u);
  EXPECT_GT(j["first_launch_ns"].get<uint64_t>(), 5000000u);
  EXPECT_EQ(RunMsim({std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--arrive-ns", "-5"}).status, 2);
  EXPECT_EQ(RunMsim({std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--attempts", "0"}).status, 2);
}

// --attempts: a run that runs out of device memory is discarded and run
// again; the JSON counts the OOMs and the device time they had worked.
TEST(SimWorkloadTest, AJobThatRunsOutOfMemoryIsRunAgainAndCountsTheWorkLost) {
  const std::string out = testing::TempDir() + "attempts_" + std::to_string(getpid()) + ".json";
  // 300 MB on 256 MiB: A, B and C fit, D (allocated after the first burst) does not.
  const Outcome o = RunMsim({std::string(WORKLOADS_DIR) + "/train_phases.json", "--set", "FOOT=300M", "--attempts", "3",
                             "--retry-delay-ns", "1000000", "--json", out});
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("allocating D"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << o.err;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(out), nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["attempts"].get<int>(), 3);
  EXPECT_EQ(j["ooms"].get<int>(), 3);
  const uint64_t lost = j["lost_ns"].get<uint64_t>();
  EXPECT_GT(lost, 0u) << "each run did its first burst before it failed";
  EXPECT_GE(j["virtual_time_ns"].get<uint64_t>(), lost + 2 * 1000000) << "two retry delays";
  // Memory a failed run held is released for the next: with room, the same
  // program succeeds at its first attempt.
  const Outcome fits = RunMsim(
      {std::string(WORKLOADS_DIR) + "/train_phases.json", "--set", "FOOT=200M", "--attempts", "3", "--json", out});
  EXPECT_EQ(fits.status, 0) << fits.err;
  j = nlohmann::json::parse(std::ifstream(out), nullptr, false);
  EXPECT_EQ(j["attempts"].get<int>(), 1);
  EXPECT_EQ(j["ooms"].get<int>(), 0);
}

nlohmann::json RunJson(const std::vector<std::string>& args, const std::string& tag) {
  const std::string out = testing::TempDir() + tag + "_" + std::to_string(getpid()) + ".json";
  std::vector<std::string> argv = args;
  argv.insert(argv.end(), {"--json", out});
  const Outcome o = RunMsim(argv);
  EXPECT_EQ(o.status, 0) << o.err;
  return nlohmann::json::parse(std::ifstream(out), nullptr, false);
}

// A "serve" step: instances given the same seed split one trace between
// them; a model-swapping server answers all of it, paying a model load
// whenever a request needs a model it does not hold.
TEST(SimWorkloadTest, ServiceInstancesShareOneTraceAndASwapServerPaysForLoads) {
  const std::string service = std::string(WORKLOADS_DIR) + "/llm_service.json";
  const std::string server = std::string(WORKLOADS_DIR) + "/llm_swap_server.json";
  const std::vector<std::string> trace = {"--set", "REQS=40", "--set", "MODELS=2", "--set", "SEED=9"};
  size_t answered = 0;
  for (const char* model : {"MODEL=0", "MODEL=1"}) {
    std::vector<std::string> args = {service, "--set", model};
    args.insert(args.end(), trace.begin(), trace.end());
    const nlohmann::json j = RunJson(args, "service");
    ASSERT_TRUE(j.contains("latency_ns")) << j.dump();
    answered += j["latency_ns"].size();
    EXPECT_GT(j["latency_ns"].size(), 5u) << "a uniform draw gives each model a share";
  }
  EXPECT_EQ(answered, 40u) << "every request of the trace is for one of the instances";
  std::vector<std::string> args = {server, "--set", "RESIDENT=2"};
  args.insert(args.end(), trace.begin(), trace.end());
  const nlohmann::json both = RunJson(args, "server2");
  args[2] = "RESIDENT=1";
  const nlohmann::json one = RunJson(args, "server1");
  ASSERT_EQ(both["latency_ns"].size(), 40u);
  ASSERT_EQ(one["latency_ns"].size(), 40u);
  EXPECT_EQ(both["checksums"], one["checksums"]) << "the same answers, however many models stay loaded";
  uint64_t sum_both = 0, sum_one = 0;
  for (size_t i = 0; i < 40; ++i)
    sum_both += both["latency_ns"][i].get<uint64_t>(), sum_one += one["latency_ns"][i].get<uint64_t>();
  EXPECT_GT(sum_one, sum_both) << "with one model loaded at a time, requests wait for reloads";
}

TEST(SimWorkloadTest, AMalformedServeStepIsRejectedClearly) {
  const std::string w = Write("bad_serve.json", R"({"format": "msim-workload", "version": 1, "name": "bad",
    "buffers": [{"name": "W0", "size": 4096, "deferred": true}, {"name": "H", "size": 4096, "kind": "host"}],
    "steps": [{"op": "serve", "requests": 2, "per_s": 10, "seed": 1, "models": 1, "model": -1,
               "swap": {"buffers": ["W0"], "as": "H", "from": "H", "resident": 1}, "steps": []}]})");
  const Outcome o = RunMsim({w});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("swap.as: 'H' is a buffer's name"), std::string::npos) << o.err;
  const std::string w2 = Write("bad_serve2.json", R"({"format": "msim-workload", "version": 1, "name": "bad",
    "steps": [{"op": "serve", "requests": 2, "per_s": 0, "seed": 1, "models": 1, "model": 0, "steps": []}]})");
  const Outcome o2 = RunMsim({w2});
  EXPECT_EQ(o2.status, 1);
  EXPECT_NE(o2.err.find("serve: needs requests >= 0, per_s > 0"), std::string::npos) << o2.err;
}

}  // namespace

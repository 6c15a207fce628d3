// msim-run --replay on real programs' traces (bench/traces, recorded on an
// H200) and on hand-made ones: the replay makes the recorded allocations
// and launches again with pointers and ranges moved to the new allocations
// (checked by recording the replay with msched-profile), its checksums are
// the same whatever runs it and follow every write, msched under a budget
// faults a small fraction of what demand paging does, kernels take the
// trace's clean durations or the stated model, and bad traces get a clear
// error or a bounded run.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profile/trace.h"
#include "run_program.h"

namespace {

namespace ts = msched::testsupport;
using msched::Trace;
using msched::TraceLaunch;

constexpr uint64_t kMiB = 1 << 20;

// A directory of this process's own, removed when its tests end: ctest runs
// this program's tests side by side, and a trace one test is writing must
// not be another's input.
const std::string& ProcessDir() {
  static const std::string dir = [] {
    std::string pattern = testing::TempDir() + "replay_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
    return pattern + "/";
  }();
  return dir;
}

class RemoveProcessDir : public testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(ProcessDir()); }
};
testing::Environment* const kRemoveProcessDir = testing::AddGlobalTestEnvironment(new RemoveProcessDir);

std::string Temp(const std::string& name) { return ProcessDir() + name; }

// bench/traces/NAME.trace.xz, decompressed once per test program.
std::string RealTrace(const std::string& name) {
  static std::map<std::string, std::string> done;
  auto it = done.find(name);
  if (it != done.end()) return it->second;
  const ts::ProgramRun xz = ts::RunProgram({"xz", "-dc", std::string(TRACES_DIR) + "/" + name + ".trace.xz"}, {});
  EXPECT_EQ(xz.status, 0) << xz.err;
  const std::string path = Temp(name + ".trace");
  std::ofstream(path) << xz.out;
  return done[name] = path;
}

Trace Read(const std::string& path) {
  msched::TraceReadResult r = msched::ReadTrace(path);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.problems.empty());
  return r.trace;
}

uint64_t Footprint(const Trace& t) {
  uint64_t bytes = 0;
  for (const auto& a : t.allocs) bytes += a.alloc ? a.size : 0;
  return bytes;
}

struct Replay {
  ts::ProgramRun run;
  nlohmann::json out;  // --json
  nlohmann::json sim;  // MSIM_STATS
};

// msim-run --replay on a simulated GPU of `hbm` bytes, with `env` added
// (LD_PRELOAD=libmsched.so for msched).
Replay RunReplay(const std::string& trace, std::vector<std::string> args, std::map<std::string, std::string> env,
                 uint64_t hbm = 4096 * kMiB) {
  static int serial = 0;
  const std::string json = Temp("out" + std::to_string(serial) + ".json");
  const std::string stats = Temp("stats" + std::to_string(serial++) + ".json");
  std::vector<std::string> argv = {MSIM_RUN, "--replay", trace, "--json", json};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("MSIM_HBM_BYTES", std::to_string(hbm));
  env.emplace("MSIM_DEVICE", "");
  env.emplace("MSIM_STATS", stats);
  env.emplace("LD_PRELOAD", "");
  env.emplace("MSCHED_COORD", "off");
  Replay r;
  r.run = ts::RunProgram(argv, env);
  r.out = nlohmann::json::parse(ts::Slurp(json), nullptr, false);
  r.sim = nlohmann::json::parse(ts::Slurp(stats), nullptr, false);
  return r;
}

// Templates msched-profile fits from the trace itself.
std::string FittedTemplates(const std::string& trace) {
  const std::string out = trace + ".templates.json";
  const ts::ProgramRun r = ts::RunProgram({MSCHED_PROFILE, "analyze", trace, "-o", out}, {});
  EXPECT_EQ(r.status, 0) << r.err;
  return out;
}

// msched with `templates` alone: the shipped ones were fitted from these
// very traces.
std::map<std::string, std::string> Msched(const std::string& templates = "") {
  std::map<std::string, std::string> env = {{"LD_PRELOAD", LIBMSCHED}, {"MSCHED_SHIPPED_TEMPLATES", "off"}};
  if (!templates.empty()) env["MSCHED_TEMPLATES"] = templates;
  return env;
}

// A hand-made trace: the header, then `lines`.
std::string HandMade(const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = Temp(name + ".trace");
  std::ofstream f(path);
  f << msched::TraceHeaderLine("cupti", 65536, "hand-made") << "\n";
  for (const std::string& l : lines) f << l << "\n";
  return path;
}

TraceLaunch Launch(uint64_t seq, const std::string& kernel, std::vector<std::vector<uint8_t>> args,
                   std::vector<msched::TouchedRange> touched, uint64_t duration_ns = 0) {
  TraceLaunch l;
  l.seq = seq;
  l.kernel = kernel;
  uint32_t offset = 0;
  for (const auto& a : args) {
    offset = (offset + 7) / 8 * 8;
    l.layout.push_back({offset, static_cast<uint32_t>(a.size())});
    offset += static_cast<uint32_t>(a.size());
  }
  l.args = std::move(args);
  l.dims.grid[0] = 4;
  l.dims.block[0] = 128;
  l.touched = std::move(touched);
  l.duration_ns = duration_ns;
  return l;
}

std::vector<uint8_t> Word(uint64_t v) {
  std::vector<uint8_t> b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}

msched::TouchedRange Range(uint64_t begin, uint64_t end, msched::AccessMode mode) { return {{begin, end}, mode}; }

TEST(TraceReplayTest, ReplayMakesTheRecordedCallsAgainWithPointersAndRangesMoved) {
  const std::string original_path = RealTrace("train-w512-s3");
  const Trace original = Read(original_path);
  // The replay, recorded as msched-profile records any program on the
  // simulator: exact bytes.
  const std::string recorded_path = Temp("rerecorded.trace");
  const ts::ProgramRun r =
      ts::RunProgram({MSCHED_PROFILE, "--trace", recorded_path, "-o", Temp("rerecorded.templates.json"), "--", MSIM_RUN,
                      "--replay", original_path, "--no-checksum"},
                     {{"MSIM_HBM_BYTES", std::to_string(4096 * kMiB)}, {"MSIM_DEVICE", ""}});
  ASSERT_EQ(r.status, 0) << r.err;
  const Trace replayed = Read(recorded_path);
  ASSERT_EQ(replayed.allocs.size(), original.allocs.size());
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> moved;  // original base -> (size, replayed base)
  for (size_t i = 0; i < original.allocs.size(); ++i) {
    ASSERT_TRUE(original.allocs[i].alloc) << "the shared traces free nothing";
    ASSERT_EQ(replayed.allocs[i].size, original.allocs[i].size) << "allocation " << i;
    moved[original.allocs[i].base] = {original.allocs[i].size, replayed.allocs[i].base};
  }
  // Where an original address went: the same offset of its allocation's
  // replay (an address just past an allocation's end included).
  const auto relocate = [&](uint64_t addr, uint64_t* out) {
    auto it = moved.upper_bound(addr);
    if (it == moved.begin()) return false;
    --it;
    if (addr > it->first + it->second.first) return false;
    *out = it->second.second + (addr - it->first);
    return true;
  };
  ASSERT_EQ(replayed.launches.size(), original.launches.size());
  uint64_t pointers = 0, ranges = 0;
  for (size_t i = 0; i < original.launches.size(); ++i) {
    const TraceLaunch& o = original.launches[i];
    const TraceLaunch& n = replayed.launches[i];
    ASSERT_EQ(n.kernel, o.kernel) << "launch " << i;
    ASSERT_EQ(n.layout, o.layout) << "launch " << i;
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(n.dims.grid[d], o.dims.grid[d]);
      EXPECT_EQ(n.dims.block[d], o.dims.block[d]);
    }
    for (size_t p = 0; p < o.args.size(); ++p) {
      ASSERT_EQ(n.args[p].size(), o.args[p].size());
      for (size_t at = 0; at < o.args[p].size();) {
        uint64_t word = 0, want = 0;
        if (o.layout[p].offset % 8 == 0 && at % 8 == 0 && at + 8 <= o.args[p].size()) {
          std::memcpy(&word, o.args[p].data() + at, 8);
          if (relocate(word, &want)) {
            uint64_t got = 0;
            std::memcpy(&got, n.args[p].data() + at, 8);
            EXPECT_EQ(got, want) << "launch " << i << " argument " << p << " byte " << at;
            ++pointers;
            at += 8;
            continue;
          }
        }
        EXPECT_EQ(n.args[p][at], o.args[p][at]) << "launch " << i << " argument " << p << " byte " << at;
        ++at;
      }
    }
    // The replay touches exactly the recorded ranges, moved, a range
    // across two allocations in a piece for each.
    std::vector<msched::TouchedRange> want;
    for (const msched::TouchedRange& t : o.touched) {
      for (const auto& [base, to] : moved) {
        const auto& [size, new_base] = to;
        const uint64_t begin = std::max(t.range.begin, base), end = std::min(t.range.end, base + size);
        if (begin < end) want.push_back({{new_base + (begin - base), new_base + (end - base)}, t.mode});
      }
    }
    ASSERT_EQ(n.touched.size(), want.size()) << "launch " << i;
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_EQ(n.touched[t].range, want[t].range) << "launch " << i << " range " << t;
      EXPECT_EQ(n.touched[t].mode, want[t].mode);
      ++ranges;
    }
  }
  EXPECT_GT(pointers, 500u);
  EXPECT_GT(ranges, 200u);
}

TEST(TraceReplayTest, ChecksumsAreTheSameWhateverRunsItAndFollowEveryWrite) {
  const std::string trace = RealTrace("llama-8x1024-t3");
  const uint64_t hbm = Footprint(Read(trace)) * 6 / 10;
  const std::string templates = FittedTemplates(trace);
  const Replay off = RunReplay(trace, {}, {});
  ASSERT_EQ(off.run.status, 0) << off.run.err;
  const std::string sums = ts::Checksums(off.run.out);
  EXPECT_EQ(std::count(sums.begin(), sums.end(), '\n'), 25) << "one line per live allocation";
  const Replay runs[] = {RunReplay(trace, {"--managed"}, {}, hbm), RunReplay(trace, {}, Msched(templates), hbm),
                         RunReplay(trace, {}, Msched(), hbm),
                         RunReplay(
                             trace, {},
                             [] {
                               auto env = Msched();
                               env["MSCHED_UNKNOWN"] = "fault";
                               return env;
                             }(),
                             hbm)};
  for (const Replay& r : runs) {
    ASSERT_EQ(r.run.status, 0) << r.run.err;
    EXPECT_EQ(ts::Checksums(r.run.out), sums);
  }
  // The stamps reach memory: a written allocation's sum is not that of
  // zeros, and the same launches in another order end differently.
  const uint64_t a = 0x7f0000000000, b = a + 4 * kMiB;
  const std::string write_a =
      msched::TraceLaunchLine(Launch(1, "k", {Word(a)}, {Range(a, a + 64 * 1024, msched::AccessMode::kWrite)}));
  const std::string write_a_b = msched::TraceLaunchLine(Launch(
      2, "k", {Word(b)},
      {Range(a, a + 64 * 1024, msched::AccessMode::kReadWrite), Range(b, b + 64 * 1024, msched::AccessMode::kWrite)}));
  const std::string allocs = msched::TraceAllocLine(a, 4 * kMiB) + "\n" + msched::TraceAllocLine(b, 4 * kMiB);
  const Replay ab = RunReplay(HandMade("ab", {allocs, write_a, write_a_b}), {}, {});
  const Replay ba = RunReplay(HandMade("ba", {allocs, write_a_b, write_a}), {}, {});
  const Replay none = RunReplay(HandMade("none", {allocs}), {}, {});
  ASSERT_EQ(ab.run.status, 0) << ab.run.err;
  EXPECT_NE(ab.out["checksums"]["a0"], none.out["checksums"]["a0"]);
  EXPECT_NE(ab.out["checksums"]["a1"], none.out["checksums"]["a1"]);
  EXPECT_NE(ab.out["checksums"]["a0"], ba.out["checksums"]["a0"]) << "the order of writes shows";
}

// The replay touches what CUPTI reported, which includes the driver's own
// prefetch around what a kernel accessed: bytes no template predicts. A
// launch's loads bring whole chunks in while the budget has room, so those
// bytes do not fault either (memory_manager.h).
TEST(TraceReplayTest, UnderABudgetMschedFaultsAtMostOnePercentOfDemandPaging) {
  for (const char* name : {"llama-8x1024-t3", "train-w256-s3"}) {
    const std::string trace = RealTrace(name);
    const uint64_t hbm = Footprint(Read(trace)) * 6 / 10;
    const Replay um = RunReplay(trace, {"--managed", "--no-checksum"}, {}, hbm);
    const Replay ms = RunReplay(trace, {"--no-checksum"}, Msched(FittedTemplates(trace)), hbm);
    ASSERT_EQ(um.run.status, 0) << um.run.err;
    ASSERT_EQ(ms.run.status, 0) << ms.run.err;
    const uint64_t um_faults = ts::JsonU64(um.sim, {"faults"}), ms_faults = ts::JsonU64(ms.sim, {"faults"});
    const uint64_t um_ns = ts::JsonU64(um.out, {"virtual_time_ns"}), ms_ns = ts::JsonU64(ms.out, {"virtual_time_ns"});
    std::printf("%s at 60%% of its footprint: demand paging %llu faults, %.1f ms; msched %llu faults, %.1f ms\n", name,
                static_cast<unsigned long long>(um_faults), um_ns / 1e6, static_cast<unsigned long long>(ms_faults),
                ms_ns / 1e6);
    EXPECT_GT(um_faults, 10000u) << name;
    EXPECT_LE(ms_faults * 100, um_faults) << name;
    EXPECT_LT(ms_ns * 2, um_ns) << name;
  }
}

// The trainer at width 512 under templates msched-profile fitted at width
// 256 (cuBLAS picks other kernels there, and its GEMM operands follow other
// sizes; issue 30's one case short of its targets): still far fewer faults
// than demand paging, at 60% of its footprint.
TEST(TraceReplayTest, TemplatesFittedAtAnotherWidthStillSpareMostFaults) {
  const std::string trace = RealTrace("train-w512-s3");
  const uint64_t hbm = Footprint(Read(trace)) * 6 / 10;
  const Replay um = RunReplay(trace, {"--managed", "--no-checksum"}, {}, hbm);
  const Replay narrow = RunReplay(trace, {"--no-checksum"}, Msched(FittedTemplates(RealTrace("train-w256-s3"))), hbm);
  ASSERT_EQ(um.run.status, 0) << um.run.err;
  ASSERT_EQ(narrow.run.status, 0) << narrow.run.err;
  const uint64_t um_faults = ts::JsonU64(um.sim, {"faults"}), faults = ts::JsonU64(narrow.sim, {"faults"});
  const uint64_t um_ns = ts::JsonU64(um.out, {"virtual_time_ns"}), ns = ts::JsonU64(narrow.out, {"virtual_time_ns"});
  std::printf("train-w512 at 60%%: demand paging %llu faults, %.1f ms; width-256 templates %llu faults, %.1f ms\n",
              static_cast<unsigned long long>(um_faults), um_ns / 1e6, static_cast<unsigned long long>(faults),
              ns / 1e6);
  EXPECT_LE(faults * 20, um_faults) << "it reaches 25x fewer";
  EXPECT_LT(ns * 2, um_ns);
}

TEST(TraceReplayTest, KernelsTakeTheTracesCleanDurationsOrTheStatedModel) {
  const uint64_t a = 0x7f0000000000;
  const auto trace = [&](const std::string& name, uint64_t duration) {
    return HandMade(name, {msched::TraceAllocLine(a, 64 * kMiB),
                           msched::TraceLaunchLine(Launch(
                               1, "k", {Word(a)}, {Range(a, a + 64 * kMiB, msched::AccessMode::kRead)}, duration))});
  };
  const Replay clean = RunReplay(trace("clean", 7'000'000), {"--no-checksum"}, {});
  const Replay modelled = RunReplay(trace("modelled", 0), {"--no-checksum"}, {});
  ASSERT_EQ(clean.run.status, 0) << clean.run.err;
  ASSERT_EQ(modelled.run.status, 0) << modelled.run.err;
  EXPECT_NE(clean.run.out.find("kernel times: 1 from the trace's clean durations, 0 modelled"), std::string::npos)
      << clean.run.out;
  EXPECT_NE(modelled.run.out.find("0 from the trace's clean durations, 1 modelled (the device's kernel launch "
                                  "time plus the bytes touched at its HBM bandwidth)"),
            std::string::npos)
      << modelled.run.out;
  const uint64_t clean_ns = ts::JsonU64(clean.sim, {"kernel_ns"}), model_ns = ts::JsonU64(modelled.sim, {"kernel_ns"});
  EXPECT_GE(clean_ns, 7'000'000u);
  EXPECT_LT(clean_ns, 7'100'000u);
  // 64 MiB at any HBM bandwidth of the profiles (at most 8 TB/s): >= 8 us,
  // well under 7 ms.
  EXPECT_GT(model_ns, 8'000u);
  EXPECT_LT(model_ns, 1'000'000u);
  EXPECT_EQ(ts::JsonU64(clean.out, {"replay", "clean_durations"}), 1u);
}

// Records no program could make are skipped and counted, and the replay
// runs on: allocations of 2^63 and 2^64-1 bytes (the first crashed the
// replay's size expression, the second aborted it), a kernel name with a
// NUL (which aborted it), and durations of 2^64-1 and 2^63 ns (which
// wrapped the virtual clock, or carried it past 2^63): those are modelled,
// and the clock stays within an hour a launch.
TEST(TraceReplayTest, ImpossibleSizesNamesAndDurationsAreSkippedAndCounted) {
  const uint64_t a = 0x7f0000000000;
  TraceLaunch nul_name = Launch(2, std::string("k\0evil", 6), {Word(a)}, {});
  const std::string trace = HandMade(
      "impossible",
      {msched::TraceAllocLine(a, 4 * kMiB), msched::TraceAllocLine(0x100000000000, uint64_t{1} << 63),
       msched::TraceAllocLine(0, UINT64_MAX),
       msched::TraceLaunchLine(Launch(1, "k", {Word(a)}, {Range(a, a + 4096, msched::AccessMode::kWrite)})),
       msched::TraceLaunchLine(nul_name),
       msched::TraceLaunchLine(Launch(3, "k", {Word(a)}, {Range(a, a + 4096, msched::AccessMode::kWrite)}, UINT64_MAX)),
       msched::TraceLaunchLine(
           Launch(4, "k", {Word(a)}, {Range(a, a + 4096, msched::AccessMode::kWrite)}, uint64_t{1} << 63)),
       msched::TraceLaunchLine(
           Launch(5, "k", {Word(a)}, {Range(a, a + 4096, msched::AccessMode::kWrite)}, uint64_t{1} << 63))});
  const Replay r = RunReplay(trace, {}, {});
  ASSERT_EQ(r.run.status, 0) << r.run.err;
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "allocations"}), 1u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "skipped_allocations"}), 2u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "skipped_launches"}), 1u) << "the NUL in a name";
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "launches"}), 4u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "implausible_durations"}), 3u);
  EXPECT_NE(r.run.err.find("2 allocations no GPU could make"), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find("3 durations past an hour modelled instead"), std::string::npos) << r.run.err;
  EXPECT_LT(ts::JsonU64(r.sim, {"kernel_ns"}), 1'000'000'000u) << "four short kernels";
}

// Host time: msched-profile --trace records the program's own host time
// before each launch (host_ns), and a replay waits that long before the
// launch, its earlier kernels running on meanwhile; a trace without it takes
// a stated host time a launch (--host-ns-per-launch), or none.
TEST(TraceReplayTest, ReplaysKeepTheProgramsHostTimeBetweenLaunches) {
  const std::string trace = Temp("host.trace");
  ::unlink(trace.c_str());
  const ts::ProgramRun recorded = ts::RunProgram(
      {MSCHED_PROFILE, "-o", Temp("host.templates.json"), "--trace", trace, "--", MSIM_RUN,
       std::string(TEST_WORKLOADS_DIR) + "/host_phases.json", "--set", "TASKS=4", "--set", "HOST_US=2000", "--set",
       "FOOT=4M"},
      {{"LD_LIBRARY_PATH", SIM_LIB_DIR}, {"MSIM_DEVICE", ""}, {"LD_PRELOAD", ""}, {"MSCHED_TEMPLATES", ""}});
  ASSERT_EQ(recorded.status, 0) << recorded.err;
  Trace t = Read(trace);
  ASSERT_EQ(t.launches.size(), 4u);
  EXPECT_EQ(t.launches[0].host_ns, 0u) << "nothing before the first";
  for (size_t i = 1; i < t.launches.size(); ++i) {
    EXPECT_GE(t.launches[i].host_ns, 2'000'000u) << i;
    EXPECT_LT(t.launches[i].host_ns, 2'200'000u) << i << ": the profiler's own work is not the program's";
  }
  const Replay with_host = RunReplay(trace, {"--no-checksum"}, {});
  ASSERT_EQ(with_host.run.status, 0) << with_host.run.err;
  EXPECT_NE(with_host.run.out.find("host time before a launch: 3 from the trace's host_ns, 0 at "
                                   "--host-ns-per-launch, 1 none"),
            std::string::npos)
      << with_host.run.out;
  // The same trace without its host time, then with a stated one.
  for (TraceLaunch& l : t.launches) l.host_ns = 0;
  std::vector<std::string> lines;
  for (const msched::TraceAllocEvent& a : t.allocs) {
    lines.push_back(a.alloc ? msched::TraceAllocLine(a.base, a.size) : msched::TraceFreeLine(a.base));
  }
  for (const TraceLaunch& l : t.launches) lines.push_back(msched::TraceLaunchLine(l));
  const std::string bare = HandMade("host-bare", lines);
  const Replay without = RunReplay(bare, {"--no-checksum"}, {});
  const Replay stated = RunReplay(bare, {"--no-checksum", "--host-ns-per-launch", "1000000"}, {});
  ASSERT_EQ(without.run.status, 0) << without.run.err;
  ASSERT_EQ(stated.run.status, 0) << stated.run.err;
  const uint64_t t_with = ts::JsonU64(with_host.out, {"virtual_time_ns"});
  const uint64_t t_without = ts::JsonU64(without.out, {"virtual_time_ns"});
  const uint64_t t_stated = ts::JsonU64(stated.out, {"virtual_time_ns"});
  // The host's gaps add up (its kernels, a few microseconds each, overlap them).
  EXPECT_GE(t_with, 6'000'000u) << "three gaps of 2 ms";
  EXPECT_LT(t_with, t_without + 6'600'000);
  EXPECT_GE(t_stated, 4'000'000u) << "1 ms before each of four launches";
  EXPECT_LT(t_stated, t_without + 4'400'000);
  EXPECT_LT(t_without, 1'000'000u) << "without host time, the kernels alone";
  EXPECT_EQ(ts::JsonU64(stated.out, {"replay", "stated_host"}), 4u);
}

TEST(TraceReplayTest, BadTracesGetAClearErrorOrABoundedRun) {
  // Unreadable: exit 2 and a message that says why.
  struct Bad {
    std::string path, expect;
  } bad[] = {
      {Temp("missing.trace"), "cannot open trace"},
      {[] {
         const std::string p = Temp("not-a-trace.trace");
         std::ofstream(p) << "{\"type\":\"alloc\",\"base\":1,\"size\":2}\n";
         return p;
       }(),
       "not an msched trace"},
      {[] {
         const std::string p = Temp("compressed.trace.xz");
         std::ofstream(p) << "\xfd"
                             "7zXZ";
         return p;
       }(),
       "xz -dk"},
  };
  for (const Bad& b : bad) {
    const Replay r = RunReplay(b.path, {}, {});
    EXPECT_EQ(r.run.status, 2) << b.path;
    EXPECT_NE(r.run.err.find(b.expect), std::string::npos) << r.run.err;
  }
  // What a trace cannot say is skipped and counted; the rest runs.
  const uint64_t a = 0x7f0000000000, b = a + 8 * kMiB;
  std::vector<uint8_t> wide(4096, 0x11);  // 4 KiB of arguments with a pointer inside
  std::memcpy(wide.data() + 2048, &b, 8);
  TraceLaunch too_many_threads = Launch(3, "k", {Word(a)}, {});
  too_many_threads.dims.block[0] = 2048;
  const std::string trace = HandMade(
      "odd", {msched::TraceAllocLine(a, 4 * kMiB), msched::TraceAllocLine(b, 4 * kMiB),
              msched::TraceLaunchLine(Launch(
                  1, "k", {Word(a)},
                  {Range(a, a + 4096, msched::AccessMode::kRead), Range(0x1000, 0x2000, msched::AccessMode::kWrite),
                   Range(b + 4 * kMiB - 4096, b + 5 * kMiB, msched::AccessMode::kWrite)})),
              msched::TraceLaunchLine(Launch(2, "k", {Word(a), Word(b)}, {})),  // a second layout for k
              msched::TraceLaunchLine(too_many_threads), msched::TraceLaunchLine(Launch(4, "wide", {wide}, {})),
              msched::TraceFreeLine(0x1234), msched::TraceAllocLine(a + 2 * kMiB, 4 * kMiB),  // over a
              "{\"type\":\"launch\",\"seq\":", "not json"});
  const Replay r = RunReplay(trace, {}, {});
  ASSERT_EQ(r.run.status, 0) << r.run.err;
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "launches"}), 2u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "skipped_launches"}), 2u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "dropped_ranges"}), 1u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "unknown_frees"}), 1u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "replaced_allocations"}), 1u);
  EXPECT_EQ(ts::JsonU64(r.out, {"replay", "unreadable_lines"}), 2u);
  for (const char* said : {"2 launches the driver would refuse skipped", "1 touched ranges outside every allocation",
                           "1 frees of unknown addresses", "1 allocations overlapped", "2 trace lines unreadable"}) {
    EXPECT_NE(r.run.err.find(said), std::string::npos) << said << "\n" << r.run.err;
  }
  // 100,000 launches of one kernel run in bounded time.
  {
    std::ofstream f(Temp("many.trace"));
    f << msched::TraceHeaderLine("cupti", 65536, "many") << "\n" << msched::TraceAllocLine(a, 4 * kMiB) << "\n";
    for (uint64_t i = 1; i <= 100'000; ++i) {
      f << msched::TraceLaunchLine(
               Launch(i, "k", {Word(a + i % 64 * 4096)}, {Range(a, a + 65536, msched::AccessMode::kReadWrite)}))
        << "\n";
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const Replay many = RunReplay(Temp("many.trace"), {"--no-checksum"}, Msched());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(many.run.status, 0) << many.run.err;
  EXPECT_EQ(ts::JsonU64(many.out, {"launches"}), 100'000u);
  std::printf("100,000 launches replayed under msched in %.1f s\n", seconds);
}

}  // namespace

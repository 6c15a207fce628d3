// The simulated device's own timeline (MSIM_TRACE, sim/src/device_trace.h):
// a job's run writes spans whose bytes add up to the simulator's counters,
// one engine's spans never overlap, and a directory it cannot write into is
// said and ignored without failing the job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/chrome_trace.h"
#include "msched/trace_layout.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
namespace ts = msched::testsupport;
namespace layout = msched::trace;
using nlohmann::json;

struct Span {
  uint64_t begin, end;
};

// One track's spans: their bytes per name, their operations, and their times.
struct Track {
  std::map<std::string, uint64_t> bytes;
  uint64_t operations = 0;
  std::vector<Span> spans;
  uint64_t Bytes() const {
    uint64_t n = 0;
    for (const auto& [name, b] : bytes) n += b;
    return n;
  }
};

uint64_t Ns(const json& micros) { return static_cast<uint64_t>(std::llround(micros.get<double>() * 1e3)); }

struct TracedRun {
  ts::ProgramRun program;
  json stats;
  std::map<int64_t, Track> tracks;  // by tid
  int files = 0;
};

// A decoder of 24 layers (about 96 MiB) on a 64 MiB GPU, so that memory moves
// both ways, in libmsched's `mode` (msched without templates: each kernel's
// pointers predict its data), its device timeline written into `trace_dir`.
TracedRun RunVectorAdd(const std::string& mode, const std::string& trace_dir) {
  const std::string tag = "devtrace_" + mode + "_" + std::to_string(getpid());
  const std::string stats = testing::TempDir() + tag + "_stats.json";
  TracedRun run;
  run.program = ts::RunProgram({MSIM_RUN, std::string(WORKLOADS_DIR) + "/llm_decode.json", "--set", "LAYERS=24",
                                "--set", "ROWS=1024", "--set", "COLS=1024", "--set", "MAXCTX=256", "--no-checksum"},
                               {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                {"LD_PRELOAD", LIBMSCHED},
                                {"MSCHED_MODE", mode},
                                {"MSCHED_COORD", "off"},
                                {"MSCHED_TEMPLATES", ""},
                                {"MSIM_DEVICE", tag},
                                {"MSIM_HBM_BYTES", std::to_string(64ull << 20)},
                                {"MSIM_HOST_KERNELS", "off"},
                                {"MSIM_TRACE", trace_dir},
                                {"MSIM_STATS", stats}});
  ::unlink(("/dev/shm/msim-" + tag).c_str());
  std::ifstream in(stats);
  run.stats = json::parse(in, nullptr, false);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(trace_dir, ec)) {
    ++run.files;
    msched::Result<std::vector<json>> events = msched::trace::ReadTraceEvents(entry.path().string());
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    if (!events.ok()) continue;
    for (const json& e : *events) {
      if (e.value("ph", "") != "X") continue;
      Track& t = run.tracks[e.value("tid", int64_t{0})];
      const json args = e.value("args", json::object());
      t.bytes[e.value("name", "")] += args.value("bytes", uint64_t{0});
      t.operations += args.value("operations", uint64_t{0});
      const uint64_t begin = Ns(e["ts"]);
      t.spans.push_back({begin, begin + Ns(e["dur"])});
    }
  }
  return run;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + name + "_" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// One engine does one thing at a time: its spans, in time order, never overlap.
void ExpectNoOverlap(const Track& t, const std::string& what) {
  std::vector<Span> s = t.spans;
  std::sort(s.begin(), s.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < s.size(); ++i) {
    ASSERT_GE(s[i].begin, s[i - 1].end) << what << ": span " << i << " overlaps the one before";
  }
}

TEST(MsimDeviceTraceTest, EachEnginesSpansAddUpToTheDevicesCountersAndNeverOverlap) {
  for (const std::string mode : {"um", "msched"}) {
    SCOPED_TRACE(mode);
    const TracedRun r = RunVectorAdd(mode, FreshDir("devtrace_" + mode));
    ASSERT_EQ(r.program.status, 0) << r.program.err;
    ASSERT_TRUE(r.stats.is_object());
    ASSERT_EQ(r.files, 1) << "one process, one timeline";
    const auto track = [&](int64_t tid) { return r.tracks.count(tid) ? r.tracks.at(tid) : Track{}; };
    const Track compute = track(layout::kSimComputeTid), in = track(layout::kSimToDeviceTid),
                out = track(layout::kSimToHostTid), faults = track(layout::kSimFaultsTid);
    EXPECT_EQ(compute.operations, ts::JsonU64(r.stats, {"launches"})) << "the workload launches kernels only";
    EXPECT_EQ(in.Bytes(),
              ts::JsonU64(r.stats, {"bytes", "h2d", "prefetch"}) + ts::JsonU64(r.stats, {"bytes", "h2d", "memcpy"}));
    EXPECT_EQ(faults.Bytes(), ts::JsonU64(r.stats, {"bytes", "h2d", "fault"}));
    EXPECT_EQ(out.Bytes(), ts::JsonU64(r.stats, {"bytes", "d2h", "eviction"}) +
                               ts::JsonU64(r.stats, {"bytes", "d2h", "prefetch"}) +
                               ts::JsonU64(r.stats, {"bytes", "d2h", "memcpy"}));
    if (mode == "um") {
      EXPECT_GT(faults.Bytes(), 0u) << "demand paging faults the data in";
      EXPECT_GT(out.bytes.count("eviction (driver)") ? out.bytes.at("eviction (driver)") : 0, 0u);
    } else {
      EXPECT_GT(in.bytes.count("prefetch") ? in.bytes.at("prefetch") : 0, 0u) << "msched prefetches";
      EXPECT_GT(out.bytes.count("prefetch to host") ? out.bytes.at("prefetch to host") : 0, 0u) << "and evicts";
    }
    ExpectNoOverlap(compute, "compute");
    ExpectNoOverlap(in, "host to device");
    ExpectNoOverlap(out, "device to host");
    uint64_t last = 0;
    for (const Span& s : compute.spans) last = std::max(last, s.end);
    EXPECT_EQ(last, ts::JsonU64(r.stats, {"all_work_done_ns"})) << "the last operation ends when the work does";
  }
}

TEST(MsimDeviceTraceTest, ADirectoryItCannotWriteIsSaidAndIgnored) {
  const TracedRun r = RunVectorAdd("um", testing::TempDir() + "no_such_dir_" + std::to_string(getpid()) + "/deeper");
  ASSERT_EQ(r.program.status, 0) << r.program.err;
  EXPECT_NE(r.program.err.find("MSIM_TRACE ignored"), std::string::npos) << r.program.err;
  EXPECT_TRUE(r.stats.is_object()) << "the job ran on";
}

}  // namespace

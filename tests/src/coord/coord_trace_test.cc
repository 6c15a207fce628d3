#include "coord/coord_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "msched/trace_layout.h"

namespace msched {
namespace {

using json = nlohmann::json;
constexpr uint64_t kGiB = 1ull << 30;

// The scheduler and its timeline, driven as the server drives them.
class CoordTraceTest : public ::testing::Test {
 protected:
  CoordTraceTest() : s_(Options()) {
    path_ = ::testing::TempDir() + "/coord_trace_" + std::to_string(::getpid()) + ".json";
    Result<std::unique_ptr<trace::Writer>> w = trace::Writer::Create(path_, 1 << 20);
    EXPECT_TRUE(w.ok());
    trace_ = std::make_unique<CoordTrace>(std::move(*w));
  }
  ~CoordTraceTest() override { std::remove(path_.c_str()); }

  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.hbm_bytes = 16 * kGiB;
    o.usable_fraction = 1.0;
    o.fixed_slice_ns = 1000;
    o.host_bytes = 1024 * kGiB;
    return o;
  }
  void Apply(const Commands& c) {
    trace_->Sent(s_, c);
    trace_->Sync(s_);
  }
  void Submit(uint64_t id, int32_t pid, uint64_t mem, uint64_t now) {
    Job j;
    j.id = id;
    j.pid = pid;
    j.name = "job" + std::to_string(id);
    j.declared = mem;
    trace_->Sync(s_);
    Apply(s_.Submit(std::move(j), 0, now));
  }
  void Stopped(uint64_t id, uint64_t now, uint64_t resident) {
    proto::Stopped m;
    m.now_ns = now;
    m.resident = resident;
    trace_->Stopped(s_, id, m);
    Apply(s_.Stopped(id, m));
  }
  std::vector<json> Events() {
    EXPECT_TRUE(trace_->Close(s_).ok());
    Result<std::vector<json>> e = trace::ReadTraceEvents(path_);
    EXPECT_TRUE(e.ok());
    return e.ok() ? *e : std::vector<json>{};
  }

  Scheduler s_;
  std::string path_;
  std::unique_ptr<CoordTrace> trace_;
};

// A job that gave its turn up for want of work shows as idle until
// it has work again, then as waiting for its turn.
TEST_F(CoordTraceTest, AJobThatGaveItsTurnUpIsIdleUntilItHasWorkAgain) {
  Submit(1, 101, 10 * kGiB, 0);
  Submit(2, 102, 10 * kGiB, 100);
  Apply(s_.Idle(1, 1000));
  Stopped(1, 1500, 4 * kGiB);
  Apply(s_.Busy(1, 3000));
  Apply(s_.Exited(2, 9000));
  Apply(s_.Exited(1, 9500));
  json idle, waiting;
  for (const json& e : Events()) {
    if (e["ph"] != "X" || e["pid"] != 101) continue;
    if (e["name"] == trace::kIdle) idle = e;
    if (e["name"] == trace::kWaitingTurn) waiting = e;
  }
  ASSERT_FALSE(idle.is_null() || waiting.is_null());
  EXPECT_DOUBLE_EQ(idle["ts"].get<double>(), 1.5) << "once it answered its stop";
  EXPECT_DOUBLE_EQ(idle["dur"].get<double>(), 1.5) << "until it had work again";
  EXPECT_DOUBLE_EQ(waiting["ts"].get<double>(), 3.0);
}

TEST_F(CoordTraceTest, ASwitchEndsOneRunningSpanStartsTheOtherAndSwapsBetween) {
  Submit(1, 101, 10 * kGiB, 0);
  Submit(2, 102, 10 * kGiB, 100);
  Apply(s_.SliceEnded(1, 2000));  // job 1 is told to stop: it drains
  Stopped(1, 2500, 4 * kGiB);     // it gave up 6 GiB; job 2 goes
  Apply(s_.Exited(2, 9000));
  Apply(s_.Exited(1, 9500));
  std::vector<json> spans, swaps, admitted;
  for (const json& e : Events()) {
    if (e["ph"] == "X" && e["pid"] != trace::kGpuPid) spans.push_back(e);
    if (e["ph"] == "X" && e["pid"] == trace::kGpuPid) swaps.push_back(e);
    if (e["ph"] == "i" && e["name"] == "admitted") admitted.push_back(e);
  }
  EXPECT_EQ(admitted.size(), 2u);
  auto span = [&](int64_t pid, const char* name) -> json {
    for (const json& e : spans) {
      if (e["pid"] == pid && e["name"] == name) return e;
    }
    return nullptr;
  };
  const json run1 = span(101, trace::kRunning), drain1 = span(101, trace::kDraining);
  const json wait2 = span(102, trace::kWaitingTurn), run2 = span(102, trace::kRunning);
  ASSERT_FALSE(run1.is_null() || drain1.is_null() || wait2.is_null() || run2.is_null());
  EXPECT_DOUBLE_EQ(run1["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(run1["dur"].get<double>(), 2.0);  // until its stop, in microseconds
  EXPECT_DOUBLE_EQ(drain1["ts"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(drain1["dur"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(run2["ts"].get<double>(), 2.5);  // once job 1 answered
  EXPECT_DOUBLE_EQ(run2["dur"].get<double>(), 6.5);
  ASSERT_EQ(swaps.size(), 2u);
  EXPECT_EQ(swaps[0]["name"], "swap-out");
  EXPECT_EQ(swaps[0]["tid"], trace::kLinkToHostTid);
  EXPECT_DOUBLE_EQ(swaps[0]["ts"].get<double>(), 2.5);
  EXPECT_EQ(swaps[0]["args"]["bytes"], 6 * kGiB);
  // Job 1 went again once job 2 left, bringing its working set back, and
  // exited before reporting how long that took: drawn as estimated.
  EXPECT_EQ(swaps[1]["name"], "swap-in");
  EXPECT_EQ(swaps[1]["tid"], trace::kLinkToDeviceTid);
  EXPECT_DOUBLE_EQ(swaps[1]["ts"].get<double>(), 9.0);
  EXPECT_EQ(swaps[1]["args"]["job"], 1);
  EXPECT_NE(swaps[1]["args"]["duration"].get<std::string>().find("estimated"), std::string::npos);
}

// A pause that comes while the job drains (told to stop at its slice's
// end, not yet answered) is answered by the same Stopped: from then on the
// job is drawn paused, not draining.
TEST_F(CoordTraceTest, APauseWhileTheJobDrainsIsDrawnPausedOnceItAnswers) {
  Submit(1, 101, 10 * kGiB, 0);
  Submit(2, 102, 10 * kGiB, 100);
  Apply(s_.SliceEnded(1, 2000));  // job 1 is told to stop: it drains
  Result<Commands> pause = s_.Pause(1);
  ASSERT_TRUE(pause.ok());
  Apply(*pause);
  Stopped(1, 2500, 0);  // its one answer
  Apply(s_.Exited(2, 9000));
  Result<Commands> resume = s_.Resume(1);
  ASSERT_TRUE(resume.ok());
  Apply(*resume);
  Apply(s_.Exited(1, 9500));
  json paused = nullptr, drained = nullptr;
  for (const json& e : Events()) {
    if (e["ph"] != "X" || e["pid"] != 101) continue;
    if (e["name"] == trace::kPaused) paused = e;
    if (e["name"] == trace::kDraining) drained = e;
  }
  ASSERT_FALSE(drained.is_null());
  EXPECT_DOUBLE_EQ(drained["ts"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(drained["dur"].get<double>(), 0.5) << "until its answer";
  ASSERT_FALSE(paused.is_null()) << "no paused span";
  EXPECT_DOUBLE_EQ(paused["ts"].get<double>(), 2.5);
}

// On the simulator the device clock moves only while some job runs: a job
// paused with nothing else running is paused for no device time at all, and
// its pause must still show.
TEST_F(CoordTraceTest, APauseWhileNoJobRunsIsDrawnThoughTheDeviceClockStoodStill) {
  Submit(1, 101, 10 * kGiB, 0);
  Apply(s_.SliceEnded(1, 2000));  // a slice end nobody waits for: it runs on
  Result<Commands> pause = s_.Pause(1);
  ASSERT_TRUE(pause.ok());
  Apply(*pause);
  Stopped(1, 2500, 0);  // drained and evicted, and then nothing runs
  Result<Commands> resume = s_.Resume(1);
  ASSERT_TRUE(resume.ok());
  Apply(*resume);
  Apply(s_.Exited(1, 4000));
  json paused = nullptr;
  for (const json& e : Events()) {
    if (e["pid"] == 101 && e["name"] == trace::kPaused) paused = e;
  }
  ASSERT_FALSE(paused.is_null()) << "no paused span";
  EXPECT_DOUBLE_EQ(paused["ts"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(paused["dur"].get<double>(), 0.0) << "the device clock stood still";
}

TEST_F(CoordTraceTest, RefusalsAndPriorityChangesAreInstants) {
  Submit(1, 101, 10 * kGiB, 0);
  Submit(2, 102, 2 * 1024 * kGiB, 10);  // can never fit: more than the host memory
  ASSERT_TRUE(s_.SetPriority(1, 5).ok());
  trace_->Sync(s_);
  std::vector<std::string> instants;
  for (const json& e : Events()) {
    if (e["ph"] == "i") instants.push_back(e["name"].get<std::string>() + "@" + std::to_string(e["pid"].get<int>()));
  }
  EXPECT_EQ(instants, (std::vector<std::string>{"admitted@101", "refused@102", "priority changed@101"}));
}

}  // namespace
}  // namespace msched

#include "coord/scheduler.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
using Kind = Command::Kind;

SchedulerOptions Options(double ratio = 2.0) {
  SchedulerOptions o;
  o.hbm_bytes = 16 * kGiB;
  o.usable_fraction = 1.0;
  o.oversubscribe = ratio;
  o.min_slice_ns = 1000;
  o.max_slice_ns = 1'000'000;
  return o;
}

Job NewJob(uint64_t id, uint64_t mem, int priority = 0, JobClass c = JobClass::kUnset) {
  Job j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.declared = mem;
  j.priority = priority;
  j.job_class = c;
  return j;
}

const Command* Find(const Commands& cs, Kind kind, uint64_t job) {
  for (const Command& c : cs) {
    if (c.kind == kind && c.job == job) return &c;
  }
  return nullptr;
}

proto::Stopped StoppedAt(uint64_t now, uint64_t resident, uint64_t ws) {
  proto::Stopped s;
  s.now_ns = now;
  s.resident = resident;
  s.working_set = ws;
  return s;
}

TEST(SchedulerTest, AJobAloneRunsWithTheWholeGpuAndNoSliceEnd) {
  Scheduler s(Options());
  const Commands c = s.Submit(NewJob(1, 4 * kGiB), 0, 100);
  const Command* go = Find(c, Kind::kGo, 1);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->go.start_ns, 100u);
  EXPECT_EQ(go->go.budget, 16 * kGiB);
  EXPECT_EQ(go->go.slice_end_ns, proto::kNever);
  EXPECT_FALSE(go->go.load);
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
}

TEST(SchedulerTest, JobsThatFitTogetherRunTogetherWithBudgets) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 0);
  const Commands c = s.Submit(NewJob(2, 4 * kGiB), 0, 10);
  ASSERT_NE(Find(c, Kind::kGo, 2), nullptr);
  EXPECT_EQ(Find(c, Kind::kGo, 2)->go.budget, 8 * kGiB);
  ASSERT_NE(Find(c, Kind::kBudget, 1), nullptr) << "job 1's budget shrinks to make room";
  EXPECT_EQ(Find(c, Kind::kBudget, 1)->budget, 8 * kGiB);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
}

TEST(SchedulerTest, TheFirstTurnIsLongEnoughToAmortiseLoadingTheNextJob) {
  SchedulerOptions o = Options();
  o.max_slice_ns = 100'000'000'000;
  Scheduler s(o);
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);  // started on an empty GPU: loaded nothing
  s.Submit(NewJob(2, 10 * kGiB), 0, 100);
  // Switching to job 2 loads its 10 GiB: job 1's turn lasts long enough
  // that this load takes at most the swap share of it.
  const double swap_ns = 10.0 * kGiB / o.link_bytes_per_ns;
  EXPECT_GE(static_cast<double>(s.slice_end_ns() - 100), 0.99 * swap_ns / o.swap_fraction)
      << "slice " << s.slice_end_ns();
}

// With only batch jobs waiting, the running job's turn amortises the whole
// switch that ends it: its own working set moved out (and back in a turn
// later) as well as the next job's load; and it grows as the running job
// allocates more. A waiting short job gets the shorter turn.
TEST(SchedulerTest, ABatchTurnAmortisesMovingTheRunningJobOutAndGrowsWithIt) {
  SchedulerOptions o = Options();
  o.max_slice_ns = 1'000'000'000'000;
  auto worth = [&](uint64_t bytes) { return static_cast<double>(bytes) / o.link_bytes_per_ns / o.swap_fraction; };
  Scheduler s(o);
  s.Submit(NewJob(1, 0), 0, 0);  // undeclared: its size is what it allocates
  s.Allocated(1, 10 * kGiB, 10);
  s.Submit(NewJob(2, 8 * kGiB), 0, 100);
  EXPECT_GE(static_cast<double>(s.slice_end_ns() - 100), 0.99 * worth(18 * kGiB)) << s.slice_end_ns();
  s.Allocated(1, 14 * kGiB, 200);
  EXPECT_GE(static_cast<double>(s.slice_end_ns() - 100), 0.99 * worth(22 * kGiB)) << "the turn grew with job 1";

  Scheduler t(o);
  t.Submit(NewJob(1, 0), 0, 0);
  t.Allocated(1, 10 * kGiB, 10);
  t.Submit(NewJob(2, 8 * kGiB, 0, JobClass::kShort), 0, 100);
  EXPECT_LE(static_cast<double>(t.slice_end_ns() - 100), 1.01 * worth(8 * kGiB)) << "a short job waits one load's worth";
}

TEST(SchedulerTest, JobsThatDoNotFitTakeTurnsWithOneSwapPerSwitch) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  Commands c = s.Submit(NewJob(2, 10 * kGiB), 0, 100);
  EXPECT_EQ(Find(c, Kind::kGo, 2), nullptr) << "job 2 waits for its turn";
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "job 1's turn now ends";
  EXPECT_EQ(s.group_count(), 2u);

  c = s.SliceEnded(1, 2000);
  const Command* stop = Find(c, Kind::kStop, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->stop.reason, proto::StopReason::kSlice);
  EXPECT_EQ(stop->stop.evict_bytes, 4 * kGiB) << "10 resident + 10 needed on 16: evict the 4 missing";
  EXPECT_EQ(Find(c, Kind::kGo, 2), nullptr) << "job 2 goes once job 1 has stopped";
  EXPECT_FALSE(s.MayRun(*s.Find(1)));

  c = s.Stopped(1, StoppedAt(2100, 6 * kGiB, 9 * kGiB));
  const Command* go = Find(c, Kind::kGo, 2);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->go.start_ns, 2100u) << "from when job 1 had drained";
  EXPECT_GT(go->go.slice_end_ns, 2100u);
  EXPECT_EQ(s.switches(), 1u);
  const uint64_t job2_slice_end = go->go.slice_end_ns;  // c is reassigned below

  c = s.SliceEnded(2, job2_slice_end);
  ASSERT_NE(Find(c, Kind::kStop, 2), nullptr);
  c = s.Stopped(2, StoppedAt(job2_slice_end + 50, 8 * kGiB, 10 * kGiB));
  const Command* back = Find(c, Kind::kGo, 1);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(back->go.load) << "job 1 comes back with its working set";
  EXPECT_EQ(s.Find(1)->working_set, 9 * kGiB);
  EXPECT_EQ(s.Find(1)->swaps_in, 1u);
}

TEST(SchedulerTest, WhenAJobLeavesTheRestStopTakingTurns) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);
  s.Stopped(1, StoppedAt(5000, 6 * kGiB, 10 * kGiB));  // job 2 runs
  const Commands c = s.Exited(2, 6000);
  const Command* go = Find(c, Kind::kGo, 1);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->go.slice_end_ns, proto::kNever);
  EXPECT_EQ(go->go.start_ns, 6000u);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
}

TEST(SchedulerTest, AJobThatCanNeverFitIsRefusedAtOnce) {
  Scheduler s(Options(2.0));
  const Commands c = s.Submit(NewJob(1, 40 * kGiB), 0, 0);
  const Command* r = Find(c, Kind::kRefuse, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("more than this GPU serves"), std::string::npos);
  EXPECT_EQ(s.Find(1)->state, JobState::kFinished);
}

TEST(SchedulerTest, WithoutOversubscriptionJobsQueueUntilMemoryFrees) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 12 * kGiB), 0, 0);
  Commands c = s.Submit(NewJob(2, 8 * kGiB), 0, 10);
  EXPECT_EQ(Find(c, Kind::kGo, 2), nullptr);
  EXPECT_EQ(s.Find(2)->state, JobState::kWaiting);
  c = s.Exited(1, 500);
  ASSERT_NE(Find(c, Kind::kGo, 2), nullptr);
  EXPECT_EQ(Find(c, Kind::kGo, 2)->go.start_ns, 500u);
  EXPECT_EQ(s.Find(2)->admitted_ns, 500u);
}

TEST(SchedulerTest, ShortJobsPassLongOnesInTheQueue) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 12 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB, 0, JobClass::kLong), 0, 10);
  s.Submit(NewJob(3, 10 * kGiB, 0, JobClass::kShort), 0, 20);
  const Commands c = s.Exited(1, 100);
  EXPECT_NE(Find(c, Kind::kGo, 3), nullptr);
  EXPECT_EQ(Find(c, Kind::kGo, 2), nullptr);
}

TEST(SchedulerTest, AHigherPriorityJobPreemptsAndItsWorkingSetMovesInAtOnce) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  const Commands c = s.Submit(NewJob(2, 10 * kGiB, 10), 0, 100);
  const Command* stop = Find(c, Kind::kStop, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->stop.reason, proto::StopReason::kPreempt);
  ASSERT_NE(Find(c, Kind::kGo, 2), nullptr) << "no waiting for job 1 to drain";
  EXPECT_EQ(Find(c, Kind::kGo, 2)->go.start_ns, 100u);
  // Job 1 does not run again while job 2 exists.
  s.Stopped(1, StoppedAt(150, 6 * kGiB, 10 * kGiB));
  const Commands again = s.SliceEnded(2, s.slice_end_ns());
  EXPECT_EQ(Find(again, Kind::kGo, 1), nullptr);
  EXPECT_NE(Find(again, Kind::kGo, 2), nullptr);
}

TEST(SchedulerTest, RaisingAPriorityPreempts) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  Result<Commands> c = s.SetPriority(2, 20);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Find(*c, Kind::kStop, 1), nullptr);
  EXPECT_NE(Find(*c, Kind::kGo, 2), nullptr);
}

TEST(SchedulerTest, PauseEvictsEverythingAndTheOthersGetTheMemory) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);  // two groups, job 1 running
  Result<Commands> c = s.Pause(2);
  ASSERT_TRUE(c.ok());
  const Command* stop = Find(*c, Kind::kStop, 2);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->stop.evict_bytes, proto::kNever);
  EXPECT_EQ(stop->stop.reason, proto::StopReason::kPause);
  const Commands after = s.Stopped(2, StoppedAt(50, 0, 0));
  EXPECT_EQ(s.slice_end_ns(), proto::kNever) << "job 1 alone: no more turns";
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
  EXPECT_EQ(s.Find(1)->budget, 16 * kGiB);
  EXPECT_EQ(s.Find(2)->state, JobState::kPaused);
  EXPECT_EQ(s.Find(2)->resident, 0u);

  ASSERT_TRUE(s.Resume(2).ok());
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "back to taking turns";
  EXPECT_EQ(s.Find(2)->state, JobState::kRunning);
}

TEST(SchedulerTest, ControlErrorsAreReported) {
  Scheduler s(Options());
  s.Submit(NewJob(1, kGiB), 0, 0);
  EXPECT_EQ(s.Pause(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.Resume(1).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Pause(1).ok());
  EXPECT_EQ(s.Pause(1).status().code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerTest, ADeadJobDuringASwitchDoesNotStallIt) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1}));
  const Commands c = s.Exited(1, 5100);  // killed mid-swap
  ASSERT_NE(Find(c, Kind::kGo, 2), nullptr);
  EXPECT_EQ(Find(c, Kind::kGo, 2)->go.slice_end_ns, proto::kNever);
}

TEST(SchedulerTest, AnUnresponsiveJobIsPassedOverUntilItIsHeardFrom) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 5 * kGiB), 0, 0);
  s.Submit(NewJob(2, 5 * kGiB), 0, 0);   // 1 and 2 run together
  s.Submit(NewJob(3, 10 * kGiB), 0, 0);  // groups {3, 1} and {2}: turns
  ASSERT_TRUE(s.Find(1)->active && s.Find(2)->active);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1, 2})) << "slices are in force: both owe their slice end";
  s.SliceEnded(1, 9000);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{2})) << "job 2 has not reported its slice end";
  const Commands c = s.Unresponsive(2);
  EXPECT_NE(Find(c, Kind::kStop, 2), nullptr) << "told to stop, should it wake";
  EXPECT_NE(Find(c, Kind::kGo, 3), nullptr) << "the others fit without it: they run";
  EXPECT_NE(Find(c, Kind::kGo, 1), nullptr);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
  EXPECT_TRUE(s.Awaiting().empty()) << "nobody waits for job 2";
  EXPECT_FALSE(s.MayRun(*s.Find(2)));
  // It wakes and answers the stop: back in the rotation.
  s.Stopped(2, StoppedAt(9500, 5 * kGiB, 5 * kGiB));
  EXPECT_FALSE(s.Find(2)->unresponsive);
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "turns again";
}

TEST(SchedulerTest, AnUnresponsiveJobOwingAStopDoesNotHoldUpTheSwitch) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);  // stop 1 is now owed
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1}));
  const Commands c = s.Unresponsive(1);
  ASSERT_NE(Find(c, Kind::kGo, 2), nullptr);
  EXPECT_EQ(Find(c, Kind::kGo, 2)->go.slice_end_ns, proto::kNever) << "job 1 is out of the rotation";
}

}  // namespace
}  // namespace msched

#include "coord/scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler_fixtures.h"

namespace msched {
namespace {

using testing_fixtures::Find;
using testing_fixtures::kGiB;
using testing_fixtures::NewJob;
using testing_fixtures::Options;
using testing_fixtures::StoppedAt;

TEST(SchedulerTest, AJobAloneRunsWithTheWholeGpuAndNoSliceEnd) {
  Scheduler s(Options());
  const Commands c = s.Submit(NewJob(1, 4 * kGiB), 0, 100);
  const proto::Go* go = Find<proto::Go>(c, 1);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->start_ns, 100u);
  EXPECT_EQ(go->budget, 16 * kGiB);
  EXPECT_EQ(go->slice_end_ns, proto::kNever);
  EXPECT_FALSE(go->load);
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
}

TEST(SchedulerTest, JobsThatFitTogetherRunTogetherWithBudgets) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 0);
  const Commands c = s.Submit(NewJob(2, 4 * kGiB), 0, 10);
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->budget, 8 * kGiB);
  ASSERT_NE(Find<proto::Budget>(c, 1), nullptr) << "job 1's budget shrinks to make room";
  EXPECT_EQ(Find<proto::Budget>(c, 1)->budget, 8 * kGiB);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
}

// Jobs 1 and 2, each showing 4 GiB after registering: together on 16 GiB.
void StartTwoJobsOf4GiB(Scheduler& s) {
  s.Submit(NewJob(1, 0), 0, 0);
  s.Allocated(1, 4 * kGiB, 10);
  s.Submit(NewJob(2, 0), 0, 20);
  s.Allocated(2, 4 * kGiB, 30);
}

// A usage report that asks (the job allocated beyond what the coordinator
// had seen) is answered once the grants are settled: after the orders the
// growth caused, and not while a switch it began is under way.
TEST(SchedulerTest, AnAskIsAnsweredOnceTheGrantsAreSettled) {
  Scheduler s(Options());
  StartTwoJobsOf4GiB(s);
  ASSERT_TRUE(s.MayRun(*s.Find(1)) && s.MayRun(*s.Find(2))) << "8 of 16 GiB: together";

  // The answer to an ask for `job` among `c`, and its place there.
  auto answer = [](const Commands& c, uint64_t job) -> std::pair<const proto::Budget*, size_t> {
    for (size_t i = 0; i < c.size(); ++i) {
      const auto* b = std::get_if<proto::Budget>(&c[i].order);
      if (b != nullptr && c[i].job == job && b->answers != 0) return {b, i};
    }
    return {nullptr, 0};
  };
  // Job 2 grows to 14 GiB: the two no longer fit, and one of them must leave.
  const Commands grown = s.Allocated(2, 14 * kGiB, 40, /*ask=*/3);
  const Command* stop = nullptr;
  for (const Command& c : grown) {
    if (std::holds_alternative<proto::Stop>(c.order)) stop = &c;
  }
  ASSERT_NE(stop, nullptr) << "the group no longer fits: a switch begins";
  EXPECT_EQ(answer(grown, 2).first, nullptr) << "no answer while the switch is under way";

  const Commands done = s.Stopped(stop->job, StoppedAt(50, 0, stop->job == 2 ? 14 * kGiB : 4 * kGiB));
  const auto [a, place] = answer(done, 2);
  ASSERT_NE(a, nullptr) << "answered once the switch is done";
  EXPECT_EQ(a->answers, 3u);
  EXPECT_EQ(place, done.size() - 1) << "after the orders the growth caused";
  if (stop->job == 2) {
    EXPECT_EQ(a->budget, 0u) << "off the GPU: its grant comes with its next Go";
  } else {
    EXPECT_EQ(a->budget, s.Find(2)->budget) << "its grant as it stands";
    EXPECT_GE(a->budget, 14 * kGiB);
  }
}

// Memory that cannot page (VMM memory, shared memory) must all be on the
// GPU whenever the job runs: a working set measured before the job made
// more of it does not make its estimate smaller than that memory.
TEST(SchedulerTest, MemoryThatCannotPageCountsWholeInTheWorkingSetEstimate) {
  Job j = NewJob(1, 0);
  j.allocated = 12 * kGiB;
  EXPECT_EQ(j.WorkingSetEstimate(), 12 * kGiB) << "not measured: its footprint";
  j.working_set = 4 * kGiB;
  EXPECT_EQ(j.WorkingSetEstimate(), 4 * kGiB) << "measured: what it used";
  j.unpaged = 10 * kGiB;
  EXPECT_EQ(j.WorkingSetEstimate(), 10 * kGiB) << "all of what cannot page";
}

TEST(SchedulerTest, AJobThatExitsIsNotAnsweredAndHoldsNobodysAnswerBack) {
  Scheduler s(Options());
  StartTwoJobsOf4GiB(s);
  const Commands grown = s.Allocated(2, 14 * kGiB, 40, /*ask=*/1);  // a switch begins
  uint64_t stopped = 0;
  for (const Command& c : grown) {
    if (std::holds_alternative<proto::Stop>(c.order)) stopped = c.job;
  }
  ASSERT_NE(stopped, 0u);
  // The asking job exits before the switch is done: nothing is sent to it.
  s.Exited(2, 45);
  const Commands after = s.Stopped(stopped, StoppedAt(50, 0, 4 * kGiB));
  for (const Command& c : after) EXPECT_FALSE(c.job == 2) << "an order for a job that is gone";
}

TEST(SchedulerTest, AnAskThatChangesNothingIsAnsweredAtOnce) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 0);
  const Commands c = s.Allocated(1, 6 * kGiB, 10, /*ask=*/1);
  ASSERT_EQ(c.size(), 1u);
  const auto* b = std::get_if<proto::Budget>(&c[0].order);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->answers, 1u);
  EXPECT_EQ(b->budget, 16 * kGiB) << "alone: the whole GPU";
  EXPECT_TRUE(s.Allocated(1, 5 * kGiB, 20).empty()) << "a report that asks nothing gets nothing";
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
  EXPECT_LE(static_cast<double>(t.slice_end_ns() - 100), 1.01 * worth(8 * kGiB))
      << "a short job waits one load's worth";
}

TEST(SchedulerTest, JobsThatDoNotFitTakeTurnsWithOneSwapPerSwitch) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  Commands c = s.Submit(NewJob(2, 10 * kGiB), 0, 100);
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr) << "job 2 waits for its turn";
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "job 1's turn now ends";
  EXPECT_EQ(s.group_count(), 2u);

  c = s.SliceEnded(1, 2000);
  const proto::Stop* stop = Find<proto::Stop>(c, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->reason, proto::StopReason::kSlice);
  EXPECT_EQ(stop->evict_bytes, 4 * kGiB) << "10 resident + 10 needed on 16: evict the 4 missing";
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr) << "job 2 goes once job 1 has stopped";
  EXPECT_FALSE(s.MayRun(*s.Find(1)));

  c = s.Stopped(1, StoppedAt(2100, 6 * kGiB, 9 * kGiB));
  const proto::Go* go = Find<proto::Go>(c, 2);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->start_ns, 2100u) << "from when job 1 had drained";
  EXPECT_GT(go->slice_end_ns, 2100u);
  EXPECT_EQ(s.switches(), 1u);
  const uint64_t job2_slice_end = go->slice_end_ns;  // c is reassigned below

  c = s.SliceEnded(2, job2_slice_end);
  ASSERT_NE(Find<proto::Stop>(c, 2), nullptr);
  c = s.Stopped(2, StoppedAt(job2_slice_end + 50, 8 * kGiB, 10 * kGiB));
  const proto::Go* back = Find<proto::Go>(c, 1);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(back->load) << "job 1 comes back with its working set";
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
  const proto::Go* go = Find<proto::Go>(c, 1);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->slice_end_ns, proto::kNever);
  EXPECT_EQ(go->start_ns, 6000u);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
}

TEST(SchedulerTest, AJobThatCanNeverFitIsRefusedAtOnce) {
  SchedulerOptions o = Options(2.0);
  o.host_bytes = 32 * kGiB;
  Scheduler s(o);
  const Commands c = s.Submit(NewJob(1, 40 * kGiB), 0, 0);
  const proto::Refused* r = Find<proto::Refused>(c, 1);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->reason.find("more than the host memory"), std::string::npos);
  EXPECT_EQ(s.Find(1)->state, JobState::kFinished);
}

TEST(SchedulerTest, AJobLargerThanTheGpuServesRunsAloneWhenTheOthersEnd) {
  Scheduler s(Options(2.0));
  s.Submit(NewJob(1, 8 * kGiB), 0, 0);
  EXPECT_EQ(Find<proto::Refused>(s.Submit(NewJob(2, 40 * kGiB), 0, 10), 2), nullptr) << "over 2 x 16 GiB";
  s.Submit(NewJob(3, 1 * kGiB), 0, 20);
  EXPECT_EQ(s.Find(3)->state, JobState::kRunning) << "a small job passes it";
  s.Exited(1, 500);
  EXPECT_EQ(s.Find(2)->state, JobState::kWaiting) << "not beside job 3";
  ASSERT_NE(Find<proto::Go>(s.Exited(3, 600), 2), nullptr) << "alone";
  EXPECT_EQ(s.Find(2)->state, JobState::kRunning);
}

TEST(SchedulerTest, WithoutOversubscriptionJobsQueueUntilMemoryFrees) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 12 * kGiB), 0, 0);
  Commands c = s.Submit(NewJob(2, 8 * kGiB), 0, 10);
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(s.Find(2)->state, JobState::kWaiting);
  c = s.Exited(1, 500);
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->start_ns, 500u);
  EXPECT_EQ(s.Find(2)->admitted_ns, 500u);
}

TEST(SchedulerTest, ShortJobsPassLongOnesInTheQueue) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 12 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB, 0, JobClass::kLong), 0, 10);
  s.Submit(NewJob(3, 10 * kGiB, 0, JobClass::kShort), 0, 20);
  const Commands c = s.Exited(1, 100);
  EXPECT_NE(Find<proto::Go>(c, 3), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr);
}

TEST(SchedulerTest, AHigherPriorityJobPreemptsAndItsWorkingSetMovesInAtOnce) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  const Commands c = s.Submit(NewJob(2, 10 * kGiB, 10), 0, 100);
  const proto::Stop* stop = Find<proto::Stop>(c, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->reason, proto::StopReason::kPreempt);
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr) << "no waiting for job 1 to drain";
  EXPECT_EQ(Find<proto::Go>(c, 2)->start_ns, 100u);
  // Job 1 does not run again while job 2 exists.
  s.Stopped(1, StoppedAt(150, 6 * kGiB, 10 * kGiB));
  const Commands again = s.SliceEnded(2, s.slice_end_ns());
  EXPECT_EQ(Find<proto::Go>(again, 1), nullptr);
  EXPECT_NE(Find<proto::Go>(again, 2), nullptr);
}

TEST(SchedulerTest, RaisingAPriorityPreempts) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  Result<Commands> c = s.SetPriority(2, 20);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(Find<proto::Stop>(*c, 1), nullptr);
  EXPECT_NE(Find<proto::Go>(*c, 2), nullptr);
}

TEST(SchedulerTest, ADeadJobDuringASwitchDoesNotStallIt) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1}));
  const Commands c = s.Exited(1, 5100);  // killed mid-swap
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->slice_end_ns, proto::kNever);
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
  EXPECT_NE(Find<proto::Stop>(c, 2), nullptr) << "told to stop, should it wake";
  EXPECT_NE(Find<proto::Go>(c, 3), nullptr) << "the others fit without it: they run";
  EXPECT_NE(Find<proto::Go>(c, 1), nullptr);
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
  EXPECT_TRUE(s.Awaiting().empty()) << "nobody waits for job 2";
  EXPECT_FALSE(s.MayRun(*s.Find(2)));
  // It wakes and answers the stop: back in the rotation.
  s.Stopped(2, StoppedAt(9500, 5 * kGiB, 5 * kGiB));
  EXPECT_FALSE(s.Find(2)->unresponsive);
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "turns again";
}

// A job that never answers its stop but keeps reporting its usage stays out
// of the rotation: only the answer it owes brings it back. Before, any
// message counted as "heard from", so such a job took the GPU again and
// stalled the others for another answer timeout, again and again.
TEST(SchedulerTest, UsageReportsDoNotBringBackAJobThatOwesItsStop) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);  // stop 1 is now owed
  s.Unresponsive(1);
  ASSERT_TRUE(s.Find(2)->active);
  for (uint64_t t = 6000; t < 10000; t += 1000) {
    s.Allocated(1, 10 * kGiB, t);
    s.Idle(1, t);
    s.Busy(1, t);
    s.SliceEnded(1, t);
    EXPECT_TRUE(s.Find(1)->unresponsive) << "at " << t;
    EXPECT_FALSE(s.Find(1)->active) << "at " << t;
  }
  EXPECT_EQ(s.slice_end_ns(), proto::kNever) << "job 2 runs on alone";
  s.Stopped(1, StoppedAt(10000, 0, 10 * kGiB));  // the answer it owed
  EXPECT_FALSE(s.Find(1)->unresponsive);
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "turns again";
}

// The link estimate that sizes every job's slices moves only with answers
// to stops, and within what a real link can be: unsolicited reports of
// 1.8e19 or 4.5e-7 GB/s once moved it there.
TEST(SchedulerTest, TheLinkEstimateTakesOnlyOwedAnswersWithinWhatALinkCanBe) {
  Scheduler s(Options());
  const double initial = s.link_bytes_per_ns();
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  proto::Stopped lie = StoppedAt(100, 0, 10 * kGiB);
  lie.loaded = 1ull << 40;
  lie.load_ns = 1;
  s.Stopped(2, lie);  // job 2 owes no stop
  EXPECT_EQ(s.link_bytes_per_ns(), initial);
  s.SliceEnded(1, 5000);  // job 1 owes a stop now
  s.Stopped(1, lie);
  EXPECT_LE(s.link_bytes_per_ns(), 1000.0) << "1 TB/s is the most any link can be";
  EXPECT_GT(s.link_bytes_per_ns(), initial);
  for (int i = 0; i < 50; ++i) {
    const uint64_t outgoing = s.Find(1)->active ? 1 : 2;
    s.SliceEnded(outgoing, 10000 + i * 1000);
    proto::Stopped slow = StoppedAt(10000 + i * 1000 + 500, 0, 10 * kGiB);
    slow.loaded = 1ull << 30;
    slow.load_ns = UINT64_MAX / 2;
    s.Stopped(outgoing, slow);
  }
  EXPECT_GE(s.link_bytes_per_ns(), 1.0) << "1 GB/s is the least";
}

TEST(SchedulerTest, AnUnresponsiveJobOwingAStopDoesNotHoldUpTheSwitch) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 5000);  // stop 1 is now owed
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1}));
  const Commands c = s.Unresponsive(1);
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->slice_end_ns, proto::kNever) << "job 1 is out of the rotation";
}

// An urgent job submitted while a long one holds 70% of HBM gets
// the GPU at once; the long job is stopped with one bulk eviction of just
// what the urgent one lacks room for, and once the urgent job is gone it
// comes back with its working set reloaded.
TEST(SchedulerTest, AnUrgentJobGetsTheGpuAtOnceAndTheLongJobComesBackWithItsWorkingSet) {
  Scheduler s(Options());
  const uint64_t long_ws = 16 * kGiB / 10 * 7;  // 70% of HBM
  s.Submit(NewJob(1, long_ws), 0, 0);
  s.Stopped(1, StoppedAt(0, 0, 0));  // an answer nobody waited for: nothing changes
  const Commands c = s.Submit(NewJob(2, 6 * kGiB, /*priority=*/10), 0, 1000);
  ASSERT_EQ(c.size(), 2u) << "one stop and one go, nothing else";
  const proto::Stop* stop = Find<proto::Stop>(c, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->reason, proto::StopReason::kPreempt);
  EXPECT_EQ(stop->evict_bytes, long_ws + 6 * kGiB - 16 * kGiB) << "one bulk eviction of what is missing";
  const proto::Go* go = Find<proto::Go>(c, 2);
  ASSERT_NE(go, nullptr) << "the urgent job does not wait for the long one to drain";
  EXPECT_EQ(go->start_ns, 1000u);
  EXPECT_FALSE(s.MayRun(*s.Find(1)));
  EXPECT_TRUE(s.MayRun(*s.Find(2)));

  EXPECT_TRUE(s.Stopped(1, StoppedAt(1200, long_ws - (long_ws + 6 * kGiB - 16 * kGiB), long_ws)).empty());
  const Commands again = s.SliceEnded(2, s.slice_end_ns());
  EXPECT_EQ(Find<proto::Go>(again, 1), nullptr) << "the long job waits while the urgent one lives";
  EXPECT_EQ(s.Find(1)->state, JobState::kRunning) << "stopped, not dropped";

  const uint64_t gone = s.now() + 1000;
  const Commands back = s.Exited(2, gone);
  const proto::Go* resume = Find<proto::Go>(back, 1);
  ASSERT_NE(resume, nullptr);
  EXPECT_TRUE(resume->load) << "its working set is brought back before its first launch";
  EXPECT_EQ(resume->start_ns, gone);
  EXPECT_EQ(resume->budget, 16 * kGiB);
  EXPECT_EQ(resume->slice_end_ns, proto::kNever);
  EXPECT_EQ(s.Find(1)->working_set, long_ws) << "the working set it reported is what it reloads";
  EXPECT_EQ(s.Find(1)->swaps_in, 1u);
}

// Jobs that arrive over time are admitted in arrival order as the
// memory of those that finish frees (no oversubscription here).
TEST(SchedulerTest, JobsArrivingOverTimeAreAdmittedInOrderAsMemoryFrees) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 8 * kGiB), 0, 0);
  s.Submit(NewJob(2, 8 * kGiB), 0, 10);
  EXPECT_EQ(s.Find(2)->state, JobState::kRunning) << "16 GiB: both fit";
  s.Submit(NewJob(3, 8 * kGiB), 0, 20);
  s.Submit(NewJob(4, 8 * kGiB), 0, 30);
  s.Submit(NewJob(5, 8 * kGiB), 0, 40);
  for (uint64_t id : {3, 4, 5}) EXPECT_EQ(s.Find(id)->state, JobState::kWaiting) << id;

  Commands c = s.Exited(1, 100);
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr) << "the first to arrive";
  EXPECT_EQ(Find<proto::Go>(c, 4), nullptr);
  EXPECT_EQ(s.Find(3)->admitted_ns, 100u);
  EXPECT_EQ(s.Find(4)->state, JobState::kWaiting);

  c = s.Exited(2, 200);
  ASSERT_NE(Find<proto::Go>(c, 4), nullptr);
  EXPECT_EQ(s.Find(4)->admitted_ns, 200u);
  EXPECT_EQ(s.Find(5)->state, JobState::kWaiting);

  c = s.Exited(4, 250);
  ASSERT_NE(Find<proto::Go>(c, 5), nullptr);
  EXPECT_EQ(s.Find(5)->admitted_ns, 250u);
  EXPECT_EQ(s.Find(5)->submitted_ns, 40u);
}

// ---- Idle yield --------------------------------------------------------------

// Jobs 1 and 2 of 10 GiB on 16: job 1 runs, job 2 waits for its turn, which
// began at 100 when job 2 arrived.
Scheduler TwoTakingTurns() {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 100);
  return s;
}

TEST(SchedulerTest, AnIdleJobGivesItsTurnUpAsOfWhenItWentIdle) {
  Scheduler s = TwoTakingTurns();
  ASSERT_TRUE(s.MayRun(*s.Find(1)));
  ASSERT_NE(s.slice_end_ns(), proto::kNever) << "job 2 waits";
  Commands c = s.Idle(1, 500);
  const proto::Stop* stop = Find<proto::Stop>(c, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->evict_bytes, 4 * kGiB) << "what job 2 lacks room for";
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr) << "job 2 goes once job 1 has evicted";
  EXPECT_FALSE(s.MayRun(*s.Find(1)));
  EXPECT_TRUE(s.Find(1)->idle);
  EXPECT_EQ(s.Find(1)->idle_yields, 1u);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{1}));

  // It answers when its clock is far past the moment it went idle.
  c = s.Stopped(1, StoppedAt(900, 6 * kGiB, 10 * kGiB));
  const proto::Go* go = Find<proto::Go>(c, 2);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->start_ns, 500u) << "the GPU was free from when job 1 went idle";
  EXPECT_EQ(go->slice_end_ns, proto::kNever) << "job 1 is out of the rotation: nobody waits";
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
  EXPECT_EQ(s.switches(), 1u);
  EXPECT_EQ(s.now(), 900u);
}

TEST(SchedulerTest, AnIdleJobsTurnNeverPassesOnBeforeItBegan) {
  Scheduler s = TwoTakingTurns();
  s.Idle(1, 50);  // idle since before job 2 arrived at 100
  const Commands c = s.Stopped(1, StoppedAt(900, 6 * kGiB, 10 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->start_ns, 100u) << "job 2 waited from 100";
}

TEST(SchedulerTest, AnIdleJobComesBackInTheRotationAtItsNextLaunch) {
  Scheduler s = TwoTakingTurns();
  s.Idle(1, 500);
  s.Stopped(1, StoppedAt(900, 6 * kGiB, 10 * kGiB));
  Commands c = s.Busy(1, 1000);
  EXPECT_TRUE(c.empty()) << "it waits for its turn like any other: " << c.size();
  EXPECT_FALSE(s.Find(1)->idle);
  ASSERT_NE(s.slice_end_ns(), proto::kNever) << "job 2's turn now ends";
  EXPECT_GT(s.slice_end_ns(), 1000u);
  EXPECT_FALSE(s.MayRun(*s.Find(1)));
  c = s.SliceEnded(2, s.slice_end_ns());
  ASSERT_NE(Find<proto::Stop>(c, 2), nullptr);
  c = s.Stopped(2, StoppedAt(s.slice_end_ns() + 10, 6 * kGiB, 10 * kGiB));
  const proto::Go* go = Find<proto::Go>(c, 1);
  ASSERT_NE(go, nullptr);
  EXPECT_TRUE(go->load) << "back with its working set";
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
}

// Job 1 gives its turn up at `idle`, is back at `back` and gets its next
// turn once job 2's has ended; returns that turn's Go.
proto::Go IdleAndBack(Scheduler& s, uint64_t idle, uint64_t back) {
  s.Idle(1, idle);
  s.Stopped(1, StoppedAt(idle + 10, 0, 10 * kGiB));
  s.Busy(1, back);
  const uint64_t end = std::max(s.slice_end_ns(), back);
  s.SliceEnded(2, end);
  const Commands c = s.Stopped(2, StoppedAt(end + 10, 0, 10 * kGiB));
  const proto::Go* go = Find<proto::Go>(c, 1);
  EXPECT_NE(go, nullptr);
  return go != nullptr ? *go : proto::Go{};
}

// Jobs that gave their turns up for want of work and have work again take
// the GPU in the order their work came (a service's requests, in the order
// they arrived), not in the order they last held it.
TEST(SchedulerTest, JobsBackFromIdleTakeTheirTurnsInTheOrderTheirWorkCame) {
  Scheduler s = TwoTakingTurns();
  s.Submit(NewJob(3, 10 * kGiB), 0, 200);
  s.Idle(1, 500);
  Commands c = s.Stopped(1, StoppedAt(510, 0, 10 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr) << "job 2 came before job 3";
  s.Idle(2, 1000);
  c = s.Stopped(2, StoppedAt(1010, 0, 10 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  ASSERT_EQ(s.slice_end_ns(), proto::kNever) << "jobs 1 and 2 are out of the rotation";
  s.Busy(2, 2000);
  s.Busy(1, 2100);
  ASSERT_LT(s.Find(1)->last_ran_ns, s.Find(2)->last_ran_ns) << "job 1 held the GPU longer ago";
  const uint64_t end = s.slice_end_ns();
  ASSERT_NE(end, proto::kNever);
  s.SliceEnded(3, end);
  c = s.Stopped(3, StoppedAt(end + 10, 0, 10 * kGiB));
  EXPECT_NE(Find<proto::Go>(c, 2), nullptr) << "job 2's work came at 2000, job 1's at 2100";
  EXPECT_EQ(Find<proto::Go>(c, 1), nullptr);
}

// A service (a job that has given its turn up for want of work twice) whose
// last pause was at least the idle yield gets the shorter serving idle yield
// with its turns: its pauses are the gaps between requests. One back sooner
// gets the idle yield, so a trainer's short pauses between steps are not
// taken for idleness after it evaluated twice.
TEST(SchedulerTest, AServiceBackFromALongPauseGetsTheServingIdleYield) {
  const SchedulerOptions o = Options();
  ASSERT_LT(o.serving_idle_yield_ns, o.idle_yield_ns);
  Scheduler s = TwoTakingTurns();
  proto::Go go = IdleAndBack(s, 1000, 1000 + o.idle_yield_ns);
  EXPECT_FALSE(s.Find(1)->Serves()) << "once, as a batch job may while the host sets it up";
  EXPECT_EQ(go.idle_yield_ns, o.idle_yield_ns);
  go = IdleAndBack(s, go.start_ns + 1000, go.start_ns + 1000 + o.idle_yield_ns);
  EXPECT_TRUE(s.Find(1)->Serves()) << "twice";
  EXPECT_EQ(go.idle_yield_ns, o.serving_idle_yield_ns);
  go = IdleAndBack(s, go.start_ns + 1000, go.start_ns + 1000 + o.serving_idle_yield_ns);
  EXPECT_EQ(go.idle_yield_ns, o.idle_yield_ns) << "back sooner than the idle yield";
  go = IdleAndBack(s, go.start_ns + 1000, go.start_ns + 1000 + 3 * o.idle_yield_ns);
  EXPECT_EQ(go.idle_yield_ns, o.serving_idle_yield_ns) << "a long pause again";
}

// A declared service gets the serving idle yield from its first turn,
// however short its pauses: none of a server's is a training step's.
TEST(SchedulerTest, ADeclaredServiceGetsTheServingIdleYieldFromItsFirstTurn) {
  const SchedulerOptions o = Options();
  Scheduler s(o);
  const Commands c = s.Submit(NewJob(1, 10 * kGiB, 0, JobClass::kService), 0, 0);
  ASSERT_NE(Find<proto::Go>(c, 1), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 1)->idle_yield_ns, o.serving_idle_yield_ns) << "alone on the GPU";
  s.Submit(NewJob(2, 10 * kGiB), 0, 100);
  EXPECT_TRUE(s.Find(1)->Serves()) << "before it gave any turn up";
  const proto::Go go = IdleAndBack(s, 1000, 1000 + o.serving_idle_yield_ns);
  EXPECT_EQ(go.idle_yield_ns, o.serving_idle_yield_ns) << "back sooner than the idle yield";
}

TEST(SchedulerTest, WithNobodyWaitingAnIdleJobKeepsTheGpu) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  const Commands c = s.Idle(1, 500);
  ASSERT_EQ(c.size(), 1u);
  const proto::Go* go = Find<proto::Go>(c, 1);
  ASSERT_NE(go, nullptr) << "told to carry on";
  EXPECT_EQ(go->start_ns, 500u) << "dated when it went idle: its clock does not move";
  EXPECT_EQ(go->slice_end_ns, proto::kNever);
  EXPECT_EQ(go->budget, 16 * kGiB);
  EXPECT_FALSE(go->load);
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
  EXPECT_FALSE(s.Find(1)->idle);
  EXPECT_EQ(s.Find(1)->idle_yields, 0u);
  EXPECT_EQ(s.switches(), 0u);
}

TEST(SchedulerTest, InAGroupAnIdleJobCarriesOnAndLeavesWhenTheOthersTurnsEnd) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 5 * kGiB), 0, 0);
  s.Submit(NewJob(2, 5 * kGiB), 0, 0);   // 1 and 2 run together
  s.Submit(NewJob(3, 10 * kGiB), 0, 0);  // groups {3, 1} and {2}: turns
  ASSERT_TRUE(s.Find(1)->active && s.Find(2)->active);
  Commands c = s.Idle(1, 300);
  ASSERT_NE(Find<proto::Go>(c, 1), nullptr) << "job 2 still runs: job 1 carries on";
  EXPECT_EQ(Find<proto::Stop>(c, 1), nullptr);
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
  EXPECT_TRUE(s.Find(1)->idle_in_turn);
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{2})) << "the turn waits on job 2 alone";
  const uint64_t end = s.slice_end_ns();
  // With job 2 at its slice end the group's turn is over: job 1, idle, is
  // stopped and leaves the rotation, which leaves room for jobs 3 and 2 to
  // run together.
  c = s.SliceEnded(2, end);
  EXPECT_NE(Find<proto::Stop>(c, 1), nullptr);
  EXPECT_EQ(Find<proto::Stop>(c, 2), nullptr) << "job 2 runs in the next group too";
  EXPECT_TRUE(s.Find(1)->idle);
  EXPECT_EQ(s.Find(1)->idle_yields, 1u);
  c = s.Stopped(1, StoppedAt(end + 100, 0, 5 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr) << "job 2 waited at its slice end";
  EXPECT_EQ(Find<proto::Go>(c, 3)->start_ns, end + 100) << "beside a job at its slice end, as at any switch";
  EXPECT_EQ(s.slice_end_ns(), proto::kNever);
}

// Two services sharing a turn, both without requests, while a third waits:
// the group gives its turn up when the second goes idle, dated then.
TEST(SchedulerTest, AGroupWhoseMembersAreAllIdleGivesItsTurnUpAsOfTheLastOnesIdleness) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 5 * kGiB), 0, 0);
  s.Submit(NewJob(2, 5 * kGiB), 0, 0);
  s.Submit(NewJob(3, 10 * kGiB), 0, 100);  // groups {1, 2} and {3}
  ASSERT_NE(s.slice_end_ns(), proto::kNever);
  ASSERT_NE(Find<proto::Go>(s.Idle(1, 300), 1), nullptr) << "job 2 still runs";
  Commands c = s.Idle(2, 450);
  EXPECT_NE(Find<proto::Stop>(c, 1), nullptr);
  EXPECT_NE(Find<proto::Stop>(c, 2), nullptr);
  EXPECT_TRUE(s.Find(1)->idle && s.Find(2)->idle) << "both out of the rotation";
  s.Stopped(1, StoppedAt(900, 0, 5 * kGiB));
  c = s.Stopped(2, StoppedAt(950, 0, 5 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 3)->start_ns, 450u) << "the GPU was idle from when the last member went idle";
  EXPECT_EQ(s.slice_end_ns(), proto::kNever) << "nobody else waits";
}

// Both went idle while nobody waited (they carried on): a job that comes to
// wait takes the GPU at once, not after a slice.
TEST(SchedulerTest, AJobThatComesWhileTheRunningGroupIsIdleRunsAtOnce) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 5 * kGiB), 0, 0);
  s.Submit(NewJob(2, 5 * kGiB), 0, 0);
  s.Idle(1, 300);
  s.Idle(2, 400);
  ASSERT_TRUE(s.Find(1)->idle_in_turn && s.Find(2)->idle_in_turn);
  ASSERT_TRUE(s.MayRun(*s.Find(1)) && s.MayRun(*s.Find(2))) << "nobody waits: they keep the GPU";
  Commands c = s.Submit(NewJob(3, 10 * kGiB), 0, 1000);
  EXPECT_NE(Find<proto::Stop>(c, 1), nullptr);
  EXPECT_NE(Find<proto::Stop>(c, 2), nullptr);
  s.Stopped(1, StoppedAt(1000, 0, 5 * kGiB));
  c = s.Stopped(2, StoppedAt(1000, 0, 5 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 3)->start_ns, 1000u) << "not before it came";
}

// Jobs 1 and 2 of 5 GiB run together while job 3, of 12 GiB, which fits
// beside neither, waits; job 1 goes idle at 300, is told to carry on, and
// has work again at 350, when it cedes its turn. Returns Busy's commands.
Commands CededTurn(Scheduler& s) {
  s.Submit(NewJob(1, 5 * kGiB), 0, 0);
  s.Submit(NewJob(2, 5 * kGiB), 0, 0);
  s.Submit(NewJob(3, 12 * kGiB), 0, 100);
  s.Idle(1, 300);
  return s.Busy(1, 350);
}

// A job carried on that launches again runs on while its group does, but
// the turn no longer waits for it: the jobs waiting had work first. When the
// rest of the group goes idle, the turn passes and it is stopped.
TEST(SchedulerTest, AnIdleJobBusyAgainInItsTurnRunsOnlyWhileItsGroupDoes) {
  Scheduler s(Options());
  EXPECT_TRUE(CededTurn(s).empty()) << "it goes on launching";
  EXPECT_FALSE(s.Find(1)->idle_in_turn);
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
  EXPECT_EQ(s.Awaiting(), (std::set<uint64_t>{2})) << "the turn waits for job 2 only";
  Commands c = s.Idle(2, 450);
  EXPECT_EQ(Find<proto::Go>(c, 2), nullptr) << "job 2 is not carried on: the turn is over";
  const proto::Stop* stop = Find<proto::Stop>(c, 1);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->reason, proto::StopReason::kSlice);
  ASSERT_NE(Find<proto::Stop>(c, 2), nullptr);
  s.Stopped(2, StoppedAt(460, 0, 5 * kGiB));
  c = s.Stopped(1, StoppedAt(470, 0, 5 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  EXPECT_FALSE(s.Find(1)->idle) << "it has work: it waits for its next turn";
  EXPECT_TRUE(s.Find(2)->idle);
}

// Such a job that goes idle again is told to carry on, as any member idle in
// its turn, and leaves with the others when the turn ends; its next turn
// waits for it again.
TEST(SchedulerTest, AJobThatCededItsTurnAndGoesIdleAgainCarriesOn) {
  Scheduler s(Options());
  CededTurn(s);
  Commands c = s.Idle(1, 400);
  ASSERT_NE(Find<proto::Go>(c, 1), nullptr) << "its idle report is answered at once";
  EXPECT_TRUE(s.Find(1)->idle_in_turn);
  c = s.Idle(2, 450);
  ASSERT_NE(Find<proto::Stop>(c, 1), nullptr);
  ASSERT_NE(Find<proto::Stop>(c, 2), nullptr);
  EXPECT_TRUE(s.Find(1)->idle && s.Find(2)->idle) << "both leave the rotation";
  s.Stopped(1, StoppedAt(460, 0, 5 * kGiB));
  c = s.Stopped(2, StoppedAt(470, 0, 5 * kGiB));
  const proto::Go* go = Find<proto::Go>(c, 3);
  ASSERT_NE(go, nullptr);
  EXPECT_EQ(go->start_ns, 450u) << "all were idle: the next turn starts when the last went idle";
  // Job 1 is back, and waits for job 3's turn; its own next turn waits for it.
  s.Busy(1, 500);
  const uint64_t end = s.slice_end_ns();
  ASSERT_NE(end, proto::kNever);
  s.SliceEnded(3, end);
  c = s.Stopped(3, StoppedAt(end + 10, 0, 12 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 1), nullptr);
  EXPECT_FALSE(s.Find(1)->ceded_turn);
  EXPECT_TRUE(s.Awaiting().count(1)) << "its turn waits for it";
}

// A job that gave its turn up keeps what the next group did not need; when
// another job joins the group now running, room for it is made first: an
// eviction order to the idle job, and the newcomer's Go once it is answered
// (otherwise the driver evicts behind everyone's back and the jobs fault).
TEST(SchedulerTest, AJobJoiningTheRunningGroupWaitsForRoomThatAnIdleJobHolds) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 9 * kGiB), 0, 0);
  s.Submit(NewJob(2, 9 * kGiB), 0, 100);  // 18 GiB on 16: they take turns
  Commands c = s.Idle(1, 200);
  ASSERT_NE(Find<proto::Stop>(c, 1), nullptr);
  c = s.Stopped(1, StoppedAt(300, 7 * kGiB, 9 * kGiB));  // it evicted what job 2 lacked room for
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  ASSERT_TRUE(s.Find(1)->idle);
  c = s.Submit(NewJob(3, 6 * kGiB), 0, 400);  // fits beside job 2, not beside job 1's memory too
  const proto::Stop* evict = Find<proto::Stop>(c, 1);
  ASSERT_NE(evict, nullptr) << "room is made first";
  EXPECT_EQ(evict->reason, proto::StopReason::kEvictOnly);
  EXPECT_GE(evict->evict_bytes, 6 * kGiB);
  EXPECT_EQ(Find<proto::Go>(c, 3), nullptr) << "not before the room is there";
  c = s.Stopped(1, StoppedAt(500, 1 * kGiB, 0));
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr);
  EXPECT_TRUE(s.MayRun(*s.Find(2)));
  EXPECT_EQ(s.switches(), 1u) << "an eviction is not a switch";
}

TEST(SchedulerTest, IdleReportsDuringASwitchOrFromStoppedOrPausedJobsAreHarmless) {
  // A switch under way: job 1's slice ended, its stop is owed.
  Scheduler s = TwoTakingTurns();
  s.SliceEnded(1, 5000);
  EXPECT_TRUE(s.Idle(1, 5000).empty()) << "its turn is already ending";
  EXPECT_TRUE(s.Idle(2, 5000).empty()) << "not on the GPU";
  EXPECT_FALSE(s.Find(1)->idle);
  EXPECT_FALSE(s.Find(2)->idle);
  Commands c = s.Stopped(1, StoppedAt(5100, 6 * kGiB, 10 * kGiB));
  ASSERT_NE(Find<proto::Go>(c, 2), nullptr);
  EXPECT_EQ(Find<proto::Go>(c, 2)->start_ns, 5100u) << "an ordinary switch";

  // A preemption under way: the urgent job runs while job 2's stop is owed.
  c = s.Submit(NewJob(3, 10 * kGiB, /*priority=*/5), 0, 6000);
  ASSERT_NE(Find<proto::Stop>(c, 2), nullptr);
  c = s.Idle(3, 6500);
  ASSERT_NE(Find<proto::Go>(c, 3), nullptr) << "no switch starts during one: it carries on";
  EXPECT_EQ(Find<proto::Stop>(c, 3), nullptr);
  EXPECT_FALSE(s.Find(3)->idle);

  // A paused job.
  ASSERT_TRUE(s.Pause(1).ok());
  EXPECT_TRUE(s.Idle(1, 7000).empty());
  EXPECT_TRUE(s.Busy(1, 7100).empty());
  EXPECT_EQ(s.Find(1)->state, JobState::kPaused);
  EXPECT_FALSE(s.Find(1)->idle);
  EXPECT_TRUE(s.Idle(42, 7200).empty()) << "no such job";
}

}  // namespace
}  // namespace msched

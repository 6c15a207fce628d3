// Pausing and resuming a job, and the control requests' errors: a pause
// gives everything back and is done only once its own stop is answered,
// whatever the job was doing (taking its turn, waiting for an answer to an
// ask, not admitted yet), and a job that exits while paused is finished.
#include <gtest/gtest.h>

#include <initializer_list>

#include "coord/scheduler.h"
#include "scheduler_fixtures.h"

namespace msched {
namespace {

using testing_fixtures::Find;
using testing_fixtures::kGiB;
using testing_fixtures::NewJob;
using testing_fixtures::Options;
using testing_fixtures::StoppedAt;

TEST(SchedulerTest, PauseEvictsEverythingAndTheOthersGetTheMemory) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);  // two groups, job 1 running
  Result<Commands> c = s.Pause(2);
  ASSERT_TRUE(c.ok());
  const proto::Stop* stop = Find<proto::Stop>(*c, 2);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->evict_bytes, proto::kNever);
  EXPECT_EQ(stop->reason, proto::StopReason::kPause);
  const Commands after = s.Stopped(2, StoppedAt(50, 0, 0));
  EXPECT_EQ(s.slice_end_ns(), proto::kNever) << "job 1 alone: no more turns";
  EXPECT_TRUE(s.MayRun(*s.Find(1)));
  EXPECT_EQ(s.Find(1)->budget, 16 * kGiB);
  EXPECT_EQ(s.Find(2)->state, JobState::kPaused);
  EXPECT_EQ(s.Find(2)->resident, 0u);
  EXPECT_EQ(s.Find(2)->budget, 0u) << "a paused job's budget is released";

  ASSERT_TRUE(s.Resume(2).ok());
  EXPECT_NE(s.slice_end_ns(), proto::kNever) << "back to taking turns";
  EXPECT_EQ(s.Find(2)->state, JobState::kRunning);
}

TEST(SchedulerTest, AResumedJobThatNoLongerFitsWaitsForAdmissionAgain) {
  Scheduler s(Options());  // admits up to 32 GiB
  s.Submit(NewJob(1, 20 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  ASSERT_TRUE(s.Pause(1).ok());
  s.Stopped(1, StoppedAt(100, 0, 0));
  s.Submit(NewJob(3, 20 * kGiB), 0, 200);
  ASSERT_EQ(s.Find(3)->state, JobState::kRunning) << "the pause made room for it";
  ASSERT_TRUE(s.Resume(1).ok());
  EXPECT_EQ(s.Find(1)->state, JobState::kWaiting) << "50 GiB would be admitted on a 32 GiB limit";
  s.Exited(3, 300);
  EXPECT_EQ(s.Find(1)->state, JobState::kRunning) << "admitted again once it fits";
  EXPECT_EQ(s.Find(1)->admitted_ns, 0u) << "its first admission is kept";

  ASSERT_TRUE(s.Pause(2).ok());
  s.Stopped(2, StoppedAt(400, 0, 0));
  ASSERT_TRUE(s.Resume(2).ok());
  EXPECT_EQ(s.Find(2)->state, JobState::kRunning) << "a job that still fits runs at once";
}

TEST(SchedulerTest, APauseDuringASwitchIsDoneOnlyOnceItsOwnStopIsAnswered) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  const Commands ended = s.SliceEnded(1, 5000);  // the switch to job 2 begins: job 1 stops
  ASSERT_NE(Find<proto::Stop>(ended, 1), nullptr);
  Result<Commands> c = s.Pause(1);
  ASSERT_TRUE(c.ok());
  const proto::Stop* stop = Find<proto::Stop>(*c, 1);
  ASSERT_NE(stop, nullptr) << "a stop that gives everything back follows the slice's";
  EXPECT_EQ(stop->evict_bytes, proto::kNever);
  EXPECT_TRUE(s.Find(1)->Pausing());
  const Commands after_slice_stop = s.Stopped(1, StoppedAt(5100, 4 * kGiB, 10 * kGiB));
  EXPECT_TRUE(s.Find(1)->Pausing()) << "the slice's stop left memory behind: the pause is not done";
  EXPECT_NE(Find<proto::Go>(after_slice_stop, 2), nullptr) << "the switch completes";
  s.Stopped(1, StoppedAt(5200, 0, 0));
  EXPECT_FALSE(s.Find(1)->Pausing());
  EXPECT_EQ(s.Find(1)->resident, 0u);
  EXPECT_EQ(s.Find(1)->state, JobState::kPaused);
}

TEST(SchedulerTest, AJobPausedWhileItsAskIsOpenIsAnsweredWithNoGrantAndRunsAfterResume) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 0);
  s.Submit(NewJob(2, 4 * kGiB), 0, 0);
  // Job 1 grew past what the coordinator knew and waits for the answer, but
  // the pause comes first.
  const Commands grew = s.Allocated(1, 6 * kGiB, 10, /*ask=*/1);
  Result<Commands> c = s.Pause(1);
  ASSERT_TRUE(c.ok());
  ASSERT_NE(Find<proto::Stop>(*c, 1), nullptr);
  const Commands answered = s.Stopped(1, StoppedAt(20, 0, 4 * kGiB));
  bool ask_answered = false;
  for (const Commands* cs : std::initializer_list<const Commands*>{&grew, &*c, &answered}) {
    for (const Command& cmd : *cs) {
      const auto* b = std::get_if<proto::Budget>(&cmd.order);
      ask_answered |= b != nullptr && cmd.job == 1 && b->answers == 1;
    }
  }
  EXPECT_TRUE(ask_answered) << "the ask is answered, so the job's launches do not wait on it for ever";
  EXPECT_FALSE(s.MayRun(*s.Find(1))) << "paused: its launches stay held";
  Result<Commands> r = s.Resume(1);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(Find<proto::Go>(*r, 1), nullptr) << "both fit: it runs again at once";
}

TEST(SchedulerTest, AJobPausedBeforeItsAdmissionHoldsNothingAndReturnsToTheQueue) {
  Scheduler s(Options(1.0));
  s.Submit(NewJob(1, 12 * kGiB), 0, 0);
  s.Submit(NewJob(2, 12 * kGiB), 0, 0);  // just allocated, and queued behind job 1
  ASSERT_EQ(s.Find(2)->state, JobState::kWaiting);
  Result<Commands> c = s.Pause(2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Find<proto::Stop>(*c, 2), nullptr) << "it holds nothing to give back";
  EXPECT_FALSE(s.Find(2)->Pausing());
  const Commands done = s.Exited(1, 100);
  EXPECT_EQ(Find<proto::Go>(done, 2), nullptr) << "paused: not admitted in its turn";
  ASSERT_TRUE(s.Resume(2).ok());
  EXPECT_TRUE(s.MayRun(*s.Find(2))) << "admitted on resume, the GPU being free";
}

TEST(SchedulerTest, AJobThatExitsWhilePausedIsFinishedAndCannotBeResumed) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  ASSERT_TRUE(s.Pause(1).ok());
  s.Exited(1, 100);  // killed before it answered the pause
  EXPECT_EQ(s.Find(1)->state, JobState::kFinished);
  EXPECT_FALSE(s.Find(1)->Pausing());
  EXPECT_TRUE(s.MayRun(*s.Find(2))) << "the other job has the GPU";
  EXPECT_FALSE(s.Resume(1).ok());
}

TEST(SchedulerTest, ControlErrorsAreReported) {
  Scheduler s(Options());
  s.Submit(NewJob(1, kGiB), 0, 0);
  EXPECT_EQ(s.Pause(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.Resume(1).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Pause(1).ok());
  EXPECT_EQ(s.Pause(1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace msched

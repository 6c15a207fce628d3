// The status document (coord/status_report.cc): each job's user,
// the state `msched status` shows, why it waits and for how long, as the
// scheduler's state says; and what a guest may not see.
#include "coord/status_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "scheduler_fixtures.h"

namespace msched {
namespace {

using testing_fixtures::kGiB;
using testing_fixtures::NewJob;
using testing_fixtures::Options;
using testing_fixtures::StoppedAt;

constexpr uint32_t kNobodysUid = 3999999;  // no user has it

// A job of `uid` (NewJob's are root's).
Job JobOf(uint64_t id, uint64_t mem, uint32_t uid) {
  Job j = NewJob(id, mem);
  j.uid = uid;
  return j;
}

nlohmann::json JobIn(const nlohmann::json& doc, uint64_t id) {
  for (const nlohmann::json& j : doc["jobs"]) {
    if (j["id"] == id) return j;
  }
  return nullptr;
}

TEST(StatusReportTest, EachWaitHasItsReason) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);  // runs
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);  // admitted: waits for its turn
  s.Submit(NewJob(3, 13 * kGiB), 0, 0);  // 33 GiB > 2 x 16: not admitted
  s.Submit(NewJob(4, 4 * kGiB), 0, 0);
  ASSERT_TRUE(s.Pause(4).ok());
  s.Stopped(4, StoppedAt(0, 0, 0));
  const auto& jobs = s.jobs();
  EXPECT_EQ(WaitReasonOf(jobs.at(1), jobs), WaitReason::kNone);
  EXPECT_EQ(WaitReasonOf(jobs.at(2), jobs), WaitReason::kTurn);
  EXPECT_EQ(WaitReasonOf(jobs.at(3), jobs), WaitReason::kAdmission);
  EXPECT_EQ(WaitReasonOf(jobs.at(4), jobs), WaitReason::kPaused);
  EXPECT_STREQ(RunStateOf(jobs.at(1)), "running");
  EXPECT_STREQ(RunStateOf(jobs.at(2)), "waiting") << "admitted, but it never ran: nothing to swap out";
  EXPECT_STREQ(RunStateOf(jobs.at(3)), "waiting");
  EXPECT_STREQ(RunStateOf(jobs.at(4)), "paused");

  // A job of higher priority takes the GPU: the others are passed by it.
  s.Submit(NewJob(5, 4 * kGiB, /*priority=*/5), 0, 10);
  EXPECT_EQ(WaitReasonOf(jobs.at(1), jobs), WaitReason::kPriority);
  EXPECT_EQ(WaitReasonOf(jobs.at(2), jobs), WaitReason::kPriority);
  s.Exited(5, 20);
  s.Exited(3, 20);
  EXPECT_EQ(WaitReasonOf(jobs.at(3), jobs), WaitReason::kNone) << "finished";
  EXPECT_STREQ(RunStateOf(jobs.at(3)), "finished");

  // A job that gave its turn up idle, and one passed over for not answering.
  Scheduler t(Options());
  t.Submit(NewJob(1, 10 * kGiB), 0, 0);
  t.Submit(NewJob(2, 10 * kGiB), 0, 0);
  t.Idle(1, 50);
  EXPECT_EQ(WaitReasonOf(t.jobs().at(1), t.jobs()), WaitReason::kIdle);
  t.Stopped(1, StoppedAt(60, 6 * kGiB, 10 * kGiB));
  t.Unresponsive(2);
  EXPECT_EQ(WaitReasonOf(t.jobs().at(2), t.jobs()), WaitReason::kUnresponsive);
  for (WaitReason r : {WaitReason::kAdmission, WaitReason::kTurn, WaitReason::kPriority, WaitReason::kPaused,
                       WaitReason::kIdle, WaitReason::kUnresponsive}) {
    EXPECT_STRNE(WaitReasonName(r), "") << static_cast<int>(r);
  }
  EXPECT_STREQ(WaitReasonName(WaitReason::kNone), "");
}

TEST(StatusReportTest, AJobOffTheGpuWithLittleOfItsWorkingSetThereIsSwappedOut) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 10 * kGiB), 0, 0);
  s.Submit(NewJob(2, 10 * kGiB), 0, 0);
  s.SliceEnded(1, 1000);
  s.Stopped(1, StoppedAt(1100, 6 * kGiB, 10 * kGiB));  // keeps 6 of its 10 GiB
  EXPECT_STREQ(RunStateOf(s.jobs().at(1)), "waiting");
  s.SliceEnded(2, s.slice_end_ns());
  s.Stopped(2, StoppedAt(s.slice_end_ns() + 10, kGiB / 2, 10 * kGiB));  // keeps half a GiB
  EXPECT_STREQ(RunStateOf(s.jobs().at(2)), "swapped out");
  EXPECT_STREQ(RunStateOf(s.jobs().at(1)), "running");
}

TEST(StatusReportTest, UsersAreNamedWhenTheSystemKnowsThem) {
  EXPECT_EQ(UserName(0), "root");
  EXPECT_EQ(UserName(kNobodysUid), std::to_string(kNobodysUid));
}

TEST(StatusReportTest, TheDocumentSaysWhoWaitsWhyAndForHowLong) {
  Scheduler s(Options());
  s.Submit(JobOf(1, 10 * kGiB, /*uid=*/0), 0, 1000);
  s.Submit(JobOf(2, 10 * kGiB, kNobodysUid), 0, 2000);
  s.SliceEnded(1, 50'000);
  s.Stopped(1, StoppedAt(60'000, 0, 10 * kGiB));  // job 2 runs from 60 us
  s.Allocated(2, 10 * kGiB, 90'000);              // the clock reaches 90 us
  const nlohmann::json doc =
      nlohmann::json::parse(StatusReport(s, {"/run/msched/gpu0.sock", /*requester=*/kNobodysUid}));
  EXPECT_EQ(doc["coordinator"]["idle_yield_ns"], 50'000'000u);
  EXPECT_EQ(doc["coordinator"]["serving_idle_yield_ns"], 2'000'000u);
  EXPECT_EQ(doc["coordinator"]["socket"], "/run/msched/gpu0.sock");
  const nlohmann::json one = JobIn(doc, 1), two = JobIn(doc, 2);
  ASSERT_TRUE(one.is_object() && two.is_object()) << doc.dump();
  EXPECT_EQ(one["user"], "root");
  EXPECT_EQ(two["user"], std::to_string(kNobodysUid));
  EXPECT_EQ(one["run_state"], "swapped out");
  EXPECT_EQ(one["wait_reason"], "turn");
  EXPECT_EQ(one["wait_ns"], 40'000u) << "off the GPU since its turn ended at 50 us, until 90 us";
  EXPECT_EQ(one["slices"], 1u);
  EXPECT_EQ(one["state"], "running") << "the older field keeps its meaning: admitted";
  EXPECT_EQ(two["run_state"], "running");
  EXPECT_EQ(two["wait_reason"], "");
  EXPECT_EQ(two["wait_ns"], 0u);
  EXPECT_EQ(two["waited_ns"], 0u) << "admitted as it joined";
  // A guest sees its own jobs in full and others' without name or pid.
  EXPECT_EQ(one["name"], "");
  EXPECT_EQ(one["pid"], 0);
  EXPECT_EQ(two["name"], "job2");
  EXPECT_EQ(two["pid"], 102);
}

TEST(StatusReportTest, ThePeakOverBudgetIsTheHighestAnyReportCarried) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 1000);
  auto peak = [&] { return JobIn(nlohmann::json::parse(StatusReport(s, {})), 1)["peak_over_budget_bytes"]; };
  EXPECT_EQ(peak(), 0u) << "a job that reported nothing kept to its budget";
  s.Counted(1, {.peak_over_budget = 25 << 20});
  EXPECT_EQ(peak(), 25u << 20);
  s.Counted(1, {.faults = 9, .peak_over_budget = 3 << 20});  // a later, lower figure
  EXPECT_EQ(peak(), 25u << 20) << "the peak never falls";
  s.Counted(99, {.peak_over_budget = 1});  // no such job: nothing happens
  EXPECT_EQ(s.jobs().size(), 1u);
}

TEST(StatusReportTest, MemorySharedWithAnotherProcessIsTheLatestReportsFigure) {
  Scheduler s(Options());
  s.Submit(NewJob(1, 4 * kGiB), 0, 1000);
  auto shared = [&] { return JobIn(nlohmann::json::parse(StatusReport(s, {})), 1)["shared_bytes"]; };
  EXPECT_EQ(shared(), 0u);
  s.Counted(1, {.shared = 6 << 20});
  EXPECT_EQ(shared(), 6u << 20);
  s.Counted(1, {.shared = 2 << 20});  // a handle no longer shared
  EXPECT_EQ(shared(), 2u << 20) << "what it shares now, not a peak";
}

}  // namespace
}  // namespace msched

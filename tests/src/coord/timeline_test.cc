#include "coord/timeline.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

Job Running(uint64_t id, uint64_t ws, int priority = 0, uint64_t last_ran = 0, uint64_t resident = 0) {
  Job j;
  j.id = id;
  j.declared = ws;
  j.state = JobState::kRunning;
  j.priority = priority;
  j.last_ran_ns = last_ran;
  j.resident = resident;
  return j;
}

TEST(FormGroupsTest, JobsThatFitTogetherShareOneGroup) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 4 * kGiB)}, {2, Running(2, 6 * kGiB)}};
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].working_set, 10 * kGiB);
}

TEST(FormGroupsTest, FirstFitDecreasingWithinPriority) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 9 * kGiB)},
                                  {2, Running(2, 5 * kGiB)},
                                  {3, Running(3, 7 * kGiB)},
                                  {4, Running(4, 6 * kGiB)},
                                  {5, Running(5, 1 * kGiB, 10)}};
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].jobs, (std::vector<uint64_t>{5}));     // priority 10 alone
  EXPECT_EQ(g[1].jobs, (std::vector<uint64_t>{1, 3}));  // 9 + 7
  EXPECT_EQ(g[2].jobs, (std::vector<uint64_t>{4, 2}));  // 6 + 5
  EXPECT_EQ(g[0].priority, 10);
}

// Services (jobs that gave turns up for want of work more than once) take
// turns rather than answer at half speed each; each still shares with a
// batch job.
TEST(FormGroupsTest, TwoServicesNeverShareAGroup) {
  std::map<uint64_t, Job> jobs = {
      {1, Running(1, 5 * kGiB)}, {2, Running(2, 4 * kGiB)}, {3, Running(3, 3 * kGiB)}, {4, Running(4, 2 * kGiB)}};
  ASSERT_EQ(FormGroups(jobs, 16 * kGiB).size(), 1u) << "all four fit together";
  jobs[1].idle_yields = 2;
  jobs[2].idle_yields = 3;
  jobs[3].idle_yields = 1;  // once, as a batch job can while the host sets it up: not yet a service
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].jobs, (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(g[1].jobs, (std::vector<uint64_t>{2}));
}

// A declared service (MSCHED_CLASS=service) is one from the start, before
// it has given any turn up.
TEST(FormGroupsTest, DeclaredServicesNeverShareAGroupFromTheStart) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 5 * kGiB)}, {2, Running(2, 4 * kGiB)}, {3, Running(3, 3 * kGiB)}};
  jobs[1].job_class = JobClass::kService;
  jobs[2].job_class = JobClass::kService;
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].jobs, (std::vector<uint64_t>{1, 3})) << "a service still shares with a batch job";
  EXPECT_EQ(g[1].jobs, (std::vector<uint64_t>{2}));
}

TEST(FormGroupsTest, PausedAndWaitingJobsAreLeftOut) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 4 * kGiB)}, {2, Running(2, 4 * kGiB)}};
  jobs[2].state = JobState::kPaused;
  EXPECT_EQ(FormGroups(jobs, 16 * kGiB)[0].jobs, (std::vector<uint64_t>{1}));
}

TEST(GroupBudgetsTest, EachGetsItsWorkingSetAndAShareOfTheRoomLeft) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 2 * kGiB)}, {2, Running(2, 6 * kGiB)}};
  const Group g = FormGroups(jobs, 16 * kGiB)[0];
  const std::map<uint64_t, uint64_t> b = GroupBudgets(g, jobs, 16 * kGiB);
  EXPECT_EQ(b.at(1), 4 * kGiB);   // 2 + 8 * 1/4
  EXPECT_EQ(b.at(2), 12 * kGiB);  // 6 + 8 * 3/4
}

TEST(GroupBudgetsTest, AGroupLargerThanHbmSplitsItInProportion) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 24 * kGiB)}};
  const Group g = FormGroups(jobs, 16 * kGiB)[0];
  EXPECT_EQ(GroupBudgets(g, jobs, 16 * kGiB).at(1), 16 * kGiB);
}

// Jobs that hold nothing yet share the room equally: two of them on 64 MiB
// get 32 MiB each (the share was once the room itself, usable squared over N:
// 3696.6 TiB on a 64 MiB GPU in status and the metrics).
TEST(GroupBudgetsTest, JobsHoldingNothingSplitTheRoomEqually) {
  constexpr uint64_t kMiB = 1ull << 20;
  std::map<uint64_t, Job> jobs = {{1, Running(1, 0)}, {2, Running(2, 0)}};
  const Group g = FormGroups(jobs, 64 * kMiB)[0];
  ASSERT_EQ(g.jobs.size(), 2u);
  const std::map<uint64_t, uint64_t> b = GroupBudgets(g, jobs, 64 * kMiB);
  EXPECT_EQ(b.at(1), 32 * kMiB);
  EXPECT_EQ(b.at(2), 32 * kMiB);
}

TEST(SliceLengthTest, SwapTimeStaysAFractionOfTheSlice) {
  SchedulerOptions o;
  o.hbm_bytes = 16 * kGiB;
  o.usable_fraction = 1.0;
  o.swap_fraction = 0.1;
  o.min_slice_ns = 1'000'000;
  o.max_slice_ns = 10'000'000'000;
  std::map<uint64_t, Job> jobs = {{1, Running(1, 10'000'000'000)}};  // 10 GB to bring in
  const Group g = FormGroups(jobs, 16 * kGiB)[0];
  // 10 GB at 10 GB/s = 1 s of swapping -> a 10 s slice.
  EXPECT_EQ(SliceLength(g, jobs, o, 10.0), 10'000'000'000u);
  jobs[1].resident = 10'000'000'000;  // all there already: the minimum
  EXPECT_EQ(SliceLength(g, jobs, o, 10.0), 1'000'000u);
  o.fixed_slice_ns = 50'000'000;
  EXPECT_EQ(SliceLength(g, jobs, o, 10.0), 50'000'000u);
}

TEST(PickNextGroupTest, TheGroupServedLeastRecentlyAmongTheHighestPriority) {
  std::map<uint64_t, Job> jobs = {
      {1, Running(1, 10 * kGiB, 0, 300)}, {2, Running(2, 10 * kGiB, 0, 100)}, {3, Running(3, 10 * kGiB, 0, 200)}};
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[PickNextGroup(g, jobs)].jobs[0], 2u);
  jobs[1].priority = 5;  // now only job 1's group may run
  const std::vector<Group> g2 = FormGroups(jobs, 16 * kGiB);
  EXPECT_EQ(g2[PickNextGroup(g2, jobs)].jobs[0], 1u);
}

// Services that gave their turns up queue from when their requests came:
// the one whose request came first is answered first, whichever of them
// held the GPU last.
TEST(PickNextGroupTest, AJobBackFromGivingItsTurnUpQueuesFromWhenItHadWorkAgain) {
  std::map<uint64_t, Job> jobs = {{1, Running(1, 10 * kGiB, 0, 100)}, {2, Running(2, 10 * kGiB, 0, 300)}};
  jobs[1].back_ns = 5000;
  jobs[2].back_ns = 4000;
  const std::vector<Group> g = FormGroups(jobs, 16 * kGiB);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[PickNextGroup(g, jobs)].jobs[0], 2u) << "its request came first, though job 1 ran less recently";
  jobs[2].back_ns = 0;  // job 2 has not given a turn up since its last began
  EXPECT_EQ(g[PickNextGroup(g, jobs)].jobs[0], 2u) << "queued since its turn began, at 300";
  jobs[1].back_ns = 200;
  EXPECT_EQ(g[PickNextGroup(g, jobs)].jobs[0], 1u) << "back at 200, before job 2's turn began";
}

TEST(PlanSwitchEvictionsTest, EvictsOnlyTheDeficitFromJobsNeededLast) {
  // 16 GiB usable: job 1 (ran at 300) holds 8, job 2 (ran at 200) holds 6;
  // job 3 needs 6 and holds nothing: 2 free, so 4 must go, from job 1.
  std::map<uint64_t, Job> jobs = {{1, Running(1, 8 * kGiB, 0, 300, 8 * kGiB)},
                                  {2, Running(2, 6 * kGiB, 0, 200, 6 * kGiB)},
                                  {3, Running(3, 6 * kGiB, 0, 100, 0)}};
  Group next{{3}, 0, 6 * kGiB};
  auto plan = PlanSwitchEvictions(next, jobs, 16 * kGiB);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (std::pair<uint64_t, uint64_t>{1, 4 * kGiB}));
  // A paused job's leftovers go before anyone's.
  jobs[2].state = JobState::kPaused;
  plan = PlanSwitchEvictions(next, jobs, 16 * kGiB);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (std::pair<uint64_t, uint64_t>{2, 4 * kGiB}));
}

// Declared services without a request give way first, the one served least
// recently first, as a model-swapping server unloads the model used least
// lately; jobs with work, and services known only from their idleness, go
// by the rotation (served most recently first).
TEST(PlanSwitchEvictionsTest, IdleDeclaredServicesGoFirstTheOneServedLeastRecently) {
  // 16 GiB usable, all held: jobs 1-3 hold 4 GiB each, job 4 holds 4 and
  // needs 8: 4 must go.
  std::map<uint64_t, Job> jobs = {{1, Running(1, 4 * kGiB, 0, 400, 4 * kGiB)},
                                  {2, Running(2, 4 * kGiB, 0, 300, 4 * kGiB)},
                                  {3, Running(3, 4 * kGiB, 0, 200, 4 * kGiB)},
                                  {4, Running(4, 8 * kGiB, 0, 100, 4 * kGiB)}};
  const Group next{{4}, 0, 8 * kGiB};
  const auto first_victim = [&] {
    const auto plan = PlanSwitchEvictions(next, jobs, 16 * kGiB);
    EXPECT_EQ(plan.size(), 1u);
    return plan.empty() ? 0 : plan[0].first;
  };
  EXPECT_EQ(first_victim(), 1u) << "served most recently";
  for (uint64_t id : {2, 3}) jobs[id].job_class = JobClass::kService;
  EXPECT_EQ(first_victim(), 1u) << "services with a request wait in the rotation like any job";
  for (uint64_t id : {2, 3}) jobs[id].idle = true;
  EXPECT_EQ(first_victim(), 3u) << "idle services go first, the one served longest ago";
  jobs[3].job_class = JobClass::kUnset;
  jobs[3].idle_yields = 5;  // a service only by its idleness
  EXPECT_EQ(first_victim(), 2u);
  jobs[2].job_class = JobClass::kUnset;
  jobs[2].idle_yields = 5;
  EXPECT_EQ(first_victim(), 1u) << "neither declared: the rotation's order";
}

}  // namespace
}  // namespace msched

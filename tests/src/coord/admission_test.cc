#include "coord/admission.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

Job MakeJob(uint64_t id, uint64_t mem, uint64_t submitted, int priority = 0, JobClass c = JobClass::kUnset,
            const std::string& name = "job") {
  Job j;
  j.id = id;
  j.declared = mem;
  j.submitted_ns = submitted;
  j.priority = priority;
  j.job_class = c;
  j.name = name;
  return j;
}

SchedulerOptions Options(double ratio = 1.0) {
  SchedulerOptions o;
  o.hbm_bytes = 16 * kGiB;
  o.oversubscribe = ratio;
  o.aging_ns = 1000;
  o.reserve_after_ns = 1'000'000;
  return o;
}

std::vector<uint64_t> Ids(const std::vector<Job*>& jobs) {
  std::vector<uint64_t> out;
  for (const Job* j : jobs) out.push_back(j->id);
  return out;
}

TEST(RankWaitingTest, PriorityThenShortThenArrival) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, kGiB, 10, 0, JobClass::kLong);
  jobs[2] = MakeJob(2, kGiB, 20, 0, JobClass::kShort);
  jobs[3] = MakeJob(3, kGiB, 30, 5, JobClass::kLong);
  jobs[4] = MakeJob(4, kGiB, 5, 0, JobClass::kLong);
  EXPECT_EQ(Ids(RankWaiting(jobs, 40, Options(), JobHistory())), (std::vector<uint64_t>{3, 2, 4, 1}));
}

TEST(RankWaitingTest, WaitingRaisesPrioritySoNothingStarves) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, kGiB, 0, -2, JobClass::kLong);  // low priority, waiting since 0
  jobs[2] = MakeJob(2, kGiB, 2900, 0, JobClass::kShort);
  // At 3000 the old job has aged three steps (aging 1000): -2 + 3 = 1 > 0 + 0.
  EXPECT_EQ(Ids(RankWaiting(jobs, 3000, Options(), JobHistory())), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Ids(RankWaiting(jobs, 2950, Options(), JobHistory())), (std::vector<uint64_t>{2, 1}));
}

TEST(JobHistoryTest, UndeclaredJobsAreShortWhenTheirNameRanShort) {
  JobHistory h;
  Job j = MakeJob(1, kGiB, 0, 0, JobClass::kUnset, "eval.py");
  EXPECT_FALSE(h.IsShort(j, 100)) << "unknown: long";
  h.Record("eval.py", 50);
  EXPECT_TRUE(h.IsShort(j, 100));
  j.job_class = JobClass::kLong;
  EXPECT_FALSE(h.IsShort(j, 100)) << "a declaration wins";
  h.Record("train.py", 500);
  j.job_class = JobClass::kUnset;
  j.name = "train.py";
  EXPECT_FALSE(h.IsShort(j, 100));
}

TEST(AdmitWaitingTest, AdmitsWhatFitsAndLetsSmallJobsPassBigOnes) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, 10 * kGiB, 0);
  jobs[1].state = JobState::kRunning;
  jobs[2] = MakeJob(2, 8 * kGiB, 10);  // does not fit beside job 1
  jobs[3] = MakeJob(3, 4 * kGiB, 20);  // fits
  jobs[4] = MakeJob(4, 4 * kGiB, 30);  // no longer fits after job 3
  EXPECT_EQ(AdmitWaiting(jobs, 100, Options(), JobHistory()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(jobs[3].state, JobState::kRunning);
  EXPECT_EQ(jobs[3].admitted_ns, 100u);
  EXPECT_EQ(jobs[2].state, JobState::kWaiting);
}

TEST(AdmitWaitingTest, AJobThatWaitedLongEnoughReservesTheMemory) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, 10 * kGiB, 0);
  jobs[1].state = JobState::kRunning;
  jobs[2] = MakeJob(2, 8 * kGiB, 0);
  jobs[3] = MakeJob(3, 4 * kGiB, 10);
  EXPECT_TRUE(AdmitWaiting(jobs, 2'000'000, Options(), JobHistory()).empty()) << "job 3 may not pass job 2 now";
}

TEST(AdmitWaitingTest, OversubscriptionAndHostMemoryBoundAdmission) {
  std::map<uint64_t, Job> jobs;
  for (uint64_t i = 1; i <= 4; ++i) jobs[i] = MakeJob(i, 12 * kGiB, i);
  SchedulerOptions o = Options(3.0);  // 48 GiB of footprints on a 16 GiB GPU
  o.host_bytes = 40 * kGiB;           // but the host holds only 40
  EXPECT_EQ(AdmitWaiting(jobs, 10, o, JobHistory()), (std::vector<uint64_t>{1, 2, 3}));
  jobs[1].state = JobState::kPaused;  // a paused job's data still lives on the host
  EXPECT_TRUE(AdmitWaiting(jobs, 20, o, JobHistory()).empty());
}

TEST(AdmitWaitingTest, UntilTheGpuSizeIsKnownJobsRunOneAtATime) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, kGiB, 0);
  jobs[2] = MakeJob(2, kGiB, 1);
  SchedulerOptions o = Options();
  o.hbm_bytes = 0;
  EXPECT_EQ(AdmitWaiting(jobs, 10, o, JobHistory()), (std::vector<uint64_t>{1}));
}

TEST(NeverFitsTest, OnlyHostMemoryMakesAJobNeverFit) {
  const Job big = MakeJob(1, 40 * kGiB, 0);
  EXPECT_EQ(NeverFits(big, Options(2.0)), "") << "larger than the GPU serves time-sliced: it runs alone";
  SchedulerOptions o = Options(3.0);
  o.host_bytes = 32 * kGiB;
  EXPECT_NE(NeverFits(big, o).find("more than the host memory msched may use"), std::string::npos);
}

// A job declared larger than oversubscribe x HBM waits until it can run
// alone, then keeps the others out while it runs.
TEST(AdmitWaitingTest, AJobLargerThanTheGpuServesRunsAlone) {
  std::map<uint64_t, Job> jobs;
  jobs[1] = MakeJob(1, 8 * kGiB, 0);
  jobs[1].state = JobState::kRunning;
  jobs[2] = MakeJob(2, 40 * kGiB, 1);  // over 2 x 16 GiB
  jobs[3] = MakeJob(3, 1 * kGiB, 2);
  const SchedulerOptions o = Options(2.0);
  EXPECT_EQ(AdmitWaiting(jobs, 10, o, JobHistory()), (std::vector<uint64_t>{3})) << "not beside job 1";
  jobs.erase(1);
  jobs.erase(3);
  jobs[4] = MakeJob(4, 1 * kGiB, 3);
  EXPECT_EQ(AdmitWaiting(jobs, 20, o, JobHistory()), (std::vector<uint64_t>{2})) << "alone, and nothing beside it";
}

}  // namespace
}  // namespace msched

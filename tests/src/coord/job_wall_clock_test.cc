#include "coord/job_wall_clock.h"

#include <gtest/gtest.h>

#include <map>

namespace msched {
namespace {

constexpr uint64_t kSecond = 1000000000;

Job Waiting(uint64_t id) {
  Job j;
  j.id = id;
  return j;
}

// The waits status shows come from the wall clock at each change, whatever
// the device's clock did meanwhile (on the simulator it can stand still).
TEST(JobWallClockTest, WaitsAreCountedInWallTimeFromEachChange) {
  JobWallClock clock;
  std::map<uint64_t, Job> jobs = {{1, Waiting(1)}};
  clock.Sync(jobs, 10 * kSecond);  // registered, queued
  EXPECT_EQ(clock.Of(1, 13 * kSecond).waited_ns, 3 * kSecond);
  EXPECT_EQ(clock.Of(1, 13 * kSecond).wait_ns, 3 * kSecond);

  jobs[1].state = JobState::kRunning;  // admitted and on the GPU at 14 s
  jobs[1].was_admitted = true;
  jobs[1].active = true;
  clock.Sync(jobs, 14 * kSecond);
  EXPECT_EQ(clock.Of(1, 20 * kSecond).waited_ns, 4 * kSecond) << "the wait for admission stops at admission";
  EXPECT_EQ(clock.Of(1, 20 * kSecond).wait_ns, 0u) << "on the GPU";

  jobs[1].active = false;  // its turn ends at 21 s
  clock.Sync(jobs, 21 * kSecond);
  EXPECT_EQ(clock.Of(1, 26 * kSecond).wait_ns, 5 * kSecond);
  EXPECT_EQ(clock.Of(1, 26 * kSecond).waited_ns, 4 * kSecond);

  jobs[1].state = JobState::kFinished;  // gone: forgotten
  clock.Sync(jobs, 30 * kSecond);
  EXPECT_EQ(clock.Of(1, 31 * kSecond).waited_ns, 0u);
  EXPECT_EQ(clock.Of(7, 31 * kSecond).wait_ns, 0u) << "a job never seen";
}

}  // namespace
}  // namespace msched

#include "coord/job_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace msched {
namespace {

using std::chrono::milliseconds;

// What a JobProgress wrote, read back from its stream.
class JobProgressTest : public ::testing::Test {
 protected:
  void SetUp() override { out_ = std::tmpfile(); }
  void TearDown() override { std::fclose(out_); }
  std::string Written() {
    std::rewind(out_);
    std::string text;
    for (int c; (c = std::fgetc(out_)) != EOF;) text += static_cast<char>(c);
    return text;
  }
  std::FILE* out_ = nullptr;
};

TEST_F(JobProgressTest, AQueuedJobIsToldEachWaitAndHowLongItTook) {
  JobProgress p(true, "train", out_);
  const auto t0 = JobProgress::Clock::now();
  p.Welcomed(3, /*admitted=*/false, t0);
  p.TurnBegan(t0 + milliseconds(2500));
  p.TurnBegan(t0 + milliseconds(2600));  // a later turn: nothing was awaited
  p.Paused(t0 + milliseconds(3000));
  p.TurnBegan(t0 + milliseconds(4200));
  p.Done();
  EXPECT_EQ(Written(),
            "msched: job 3 (train) is queued: it waits until the GPU's memory allows it (msched status shows why)\n"
            "msched: job 3 (train) is admitted after 2.5 s in the queue\n"
            "msched: job 3 (train) is paused: its memory is on the host until msched resume\n"
            "msched: job 3 (train) is resumed after 1.2 s paused\n"
            "msched: job 3 (train) is done\n");
}

TEST_F(JobProgressTest, AnAdmittedJobSaysSoOnceAndTurnsAreSilent) {
  JobProgress p(true, "infer", out_);
  p.Welcomed(1, /*admitted=*/true);
  p.TurnBegan();
  p.TurnBegan();
  EXPECT_EQ(Written(), "msched: job 1 (infer) joined the coordinator and is admitted\n");
}

TEST_F(JobProgressTest, NothingIsWrittenUnlessEnabled) {
  JobProgress p(false, "quiet", out_);
  p.Welcomed(1, false);
  p.TurnBegan();
  p.Paused();
  p.Done();
  EXPECT_EQ(Written(), "");
}

}  // namespace
}  // namespace msched

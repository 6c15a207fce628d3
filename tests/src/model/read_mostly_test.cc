#include "model/read_mostly.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

const ByteRange kWhole{0x10000000, 0x10800000};
const std::vector<ByteRange> kJustWhole = {kWhole};

// Notes `n` accesses in `mode`; what the advisor asked for.
MemoryActions Note(const ReadMostlyAdvisor& advisor, ReadMostlyState& s, AccessMode mode, int n = 1) {
  MemoryActions out;
  for (int i = 0; i < n; ++i) advisor.NoteAccess(mode, kWhole, s, &out);
  return out;
}

TEST(ReadMostlyAdvisorTest, TheFourthReadInARowAdvisesTheWholeAllocationOnce) {
  ReadMostlyAdvisor advisor;
  ReadMostlyState s;
  EXPECT_TRUE(Note(advisor, s, AccessMode::kRead, ReadMostlyAdvisor::kReadsBeforeAdvice - 1).empty());
  EXPECT_FALSE(s.advised);
  EXPECT_EQ(Note(advisor, s, AccessMode::kRead).read_mostly_on, kJustWhole);
  EXPECT_TRUE(s.advised);
  EXPECT_TRUE(Note(advisor, s, AccessMode::kRead, 10).empty()) << "advised once";
}

TEST(ReadMostlyAdvisorTest, AWriteTakesTheAdviceBackAndStartsTheCountAgain) {
  ReadMostlyAdvisor advisor;
  ReadMostlyState s;
  Note(advisor, s, AccessMode::kRead, 4);
  const MemoryActions write = Note(advisor, s, AccessMode::kReadWrite);
  EXPECT_EQ(write.read_mostly_off, kJustWhole);
  EXPECT_TRUE(write.read_mostly_on.empty());
  EXPECT_FALSE(s.advised);
  EXPECT_TRUE(Note(advisor, s, AccessMode::kRead, 3).empty()) << "three reads since the write";
  EXPECT_TRUE(Note(advisor, s, AccessMode::kWrite).empty()) << "not advised: nothing to take back";
  EXPECT_TRUE(Note(advisor, s, AccessMode::kRead, 3).empty()) << "the write started the count again";
  EXPECT_EQ(Note(advisor, s, AccessMode::kRead).read_mostly_on, kJustWhole);
}

TEST(ReadMostlyAdvisorTest, BuffersWrittenAndReadInTurnAreNeverAdvised) {
  ReadMostlyAdvisor advisor;
  ReadMostlyState s;
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(Note(advisor, s, AccessMode::kRead).empty());
    EXPECT_TRUE(Note(advisor, s, AccessMode::kWrite).empty());
  }
}

TEST(ReadMostlyAdvisorTest, ForgoneAdviceIsNeverGivenAgain) {
  ReadMostlyAdvisor advisor;
  ReadMostlyState s;
  ASSERT_TRUE(advisor.allowed());
  advisor.Forgo();
  EXPECT_FALSE(advisor.allowed());
  EXPECT_TRUE(Note(advisor, s, AccessMode::kRead, 20).empty());
  EXPECT_FALSE(s.advised);
}

TEST(ReadMostlyAdvisorTest, TakeOffSaysWhetherThereWasAdviceToTake) {
  ReadMostlyState s;
  MemoryActions out;
  EXPECT_FALSE(ReadMostlyAdvisor::TakeOff(kWhole, s, &out));
  EXPECT_TRUE(out.empty());
  s.advised = true;
  EXPECT_TRUE(ReadMostlyAdvisor::TakeOff(kWhole, s, &out));
  EXPECT_EQ(out.read_mostly_off, kJustWhole);
  EXPECT_FALSE(s.advised);
}

}  // namespace
}  // namespace msched

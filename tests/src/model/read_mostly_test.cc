#include "model/read_mostly.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint32_t kAll = ~0u;

// Launch `seq` reads (or writes) the chunk; whether the advisor then asks
// for advice to be taken off, and whether the chunk qualifies for it.
struct Noted {
  bool off;
  bool qualifies;
};
Noted Note(const ReadMostlyAdvisor& advisor, ChunkState& c, AccessMode mode, uint64_t seq, uint64_t loop = 0) {
  const bool off = advisor.NoteAccess(mode, seq, kAll, c);
  return {off, advisor.Qualifies(seq, loop, c)};
}

// Launches first..first+n-1 read the chunk; the advisor advises it where it
// qualifies, as the memory manager does. Whether any launch advised it.
bool Reads(const ReadMostlyAdvisor& advisor, ChunkState& c, uint64_t first, int n) {
  bool advised = false;
  for (int i = 0; i < n; ++i) {
    if (Note(advisor, c, AccessMode::kRead, first + i).qualifies) {
      ReadMostlyAdvisor::Advise(c);
      advised = true;
    }
  }
  return advised;
}

TEST(ReadMostlyAdvisorTest, AChunkNoLaunchWroteQualifiesAtItsFirstRead) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  EXPECT_TRUE(Reads(advisor, c, 1, 1));
  EXPECT_TRUE(c.advised);
  EXPECT_FALSE(Reads(advisor, c, 2, 10)) << "advised once";
}

TEST(ReadMostlyAdvisorTest, AfterAWriteTheFourthLaunchInARowToReadAChunkQualifiesIt) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  EXPECT_FALSE(Note(advisor, c, AccessMode::kWrite, 1).qualifies);
  EXPECT_FALSE(Reads(advisor, c, 2, ReadMostlyAdvisor::kReadsBeforeAdvice - 1));
  EXPECT_TRUE(Reads(advisor, c, 5, 1));
}

TEST(ReadMostlyAdvisorTest, AChunkNotWrittenForLongerThanTheLoopQualifiesAtItsNextRead) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  Note(advisor, c, AccessMode::kWrite, 1);  // a weight, initialised
  EXPECT_FALSE(Note(advisor, c, AccessMode::kRead, 5, /*loop=*/10).qualifies) << "within a loop of the write";
  EXPECT_TRUE(Note(advisor, c, AccessMode::kRead, 12, /*loop=*/10).qualifies) << "a whole loop without a write";
  ChunkState written_each_pass;
  for (uint64_t seq = 1; seq < 60; seq += 10) {
    Note(advisor, written_each_pass, AccessMode::kWrite, seq);
    EXPECT_FALSE(Note(advisor, written_each_pass, AccessMode::kRead, seq + 5, /*loop=*/10).qualifies) << seq;
  }
}

TEST(ReadMostlyAdvisorTest, AnAllocationReadByFourLaunchesInARowQualifiesOnce) {
  // Weights in one buffer, written by an optimizer step (launch 1), then
  // read layer by layer by launches 2-5.
  ReadMostlyAdvisor advisor;
  AllocationReads weights;
  advisor.NoteAllocation(AccessMode::kWrite, 1, weights);
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    advisor.NoteAllocation(AccessMode::kRead, seq, weights);
    advisor.NoteAllocation(AccessMode::kRead, seq, weights);  // a second region: the launch counts once
    EXPECT_FALSE(advisor.AllocationQualifies(seq, weights)) << seq;
  }
  advisor.NoteAllocation(AccessMode::kRead, 5, weights);
  EXPECT_TRUE(advisor.AllocationQualifies(5, weights));
  advisor.NoteAllocation(AccessMode::kRead, 6, weights);
  EXPECT_FALSE(advisor.AllocationQualifies(6, weights)) << "once";
  advisor.NoteAllocation(AccessMode::kWrite, 7, weights);
  EXPECT_EQ(weights.since_write, 0u) << "a write to any of it starts the count again";
  for (uint64_t seq = 8; seq <= 10; ++seq) advisor.NoteAllocation(AccessMode::kRead, seq, weights);
  advisor.NoteAllocation(AccessMode::kRead, 11, weights);
  advisor.NoteAllocation(AccessMode::kWrite, 11, weights);  // the fourth read's launch also writes it
  EXPECT_FALSE(advisor.AllocationQualifies(11, weights));
}

TEST(ReadMostlyAdvisorTest, ALaunchCountsOnceHoweverManyOfItsRegionsReadTheChunk) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  Note(advisor, c, AccessMode::kWrite, 1);
  for (int region = 0; region < 8; ++region) EXPECT_FALSE(Note(advisor, c, AccessMode::kRead, 2).qualifies);
  EXPECT_EQ(c.reads_since_write, 1u);
}

TEST(ReadMostlyAdvisorTest, ALaunchThatReadsAndWritesAChunkNeverQualifiesIt) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  // Launch 1 reads the fresh chunk through one region, which would qualify
  // it, then writes it through another.
  EXPECT_TRUE(Note(advisor, c, AccessMode::kRead, 1).qualifies);
  EXPECT_FALSE(Note(advisor, c, AccessMode::kWrite, 1).qualifies);
  EXPECT_FALSE(advisor.Qualifies(1, 0, c)) << "checked again once every region is seen";
}

TEST(ReadMostlyAdvisorTest, AWriteTakesTheAdviceOffLosesTheHostCopyAndStartsTheCountAgain) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  Reads(advisor, c, 1, 1);
  ASSERT_TRUE(c.advised);
  c.resident = 0x0f;
  c.host_copy = 0xff;
  const Noted write = Note(advisor, c, AccessMode::kReadWrite, 5);
  EXPECT_TRUE(write.off);
  EXPECT_FALSE(c.advised);
  EXPECT_EQ(c.host_copy, 0u) << "written units and collapsed duplicates hold no host copy";
  EXPECT_FALSE(Reads(advisor, c, 6, 3)) << "three reads since the write";
  EXPECT_FALSE(Note(advisor, c, AccessMode::kWrite, 9).off) << "not advised: nothing to take off";
  EXPECT_FALSE(Reads(advisor, c, 10, 3)) << "the write started the count again";
  EXPECT_TRUE(Reads(advisor, c, 13, 1));
}

TEST(ReadMostlyAdvisorTest, AWriteLosesTheHostCopyOfTheUnitsItWritesOnly) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  c.host_copy = 0xff;
  advisor.NoteAccess(AccessMode::kWrite, 1, 0x0f, c);
  EXPECT_EQ(c.host_copy, 0xf0u);
}

TEST(ReadMostlyAdvisorTest, BuffersWrittenAndReadInTurnAreNeverAdvised) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  for (uint64_t seq = 1; seq < 40; seq += 2) {
    EXPECT_FALSE(Note(advisor, c, AccessMode::kWrite, seq).qualifies);
    EXPECT_FALSE(Note(advisor, c, AccessMode::kRead, seq + 1).qualifies);
  }
}

TEST(ReadMostlyAdvisorTest, ForgoneAdviceIsNeverGivenAgain) {
  ReadMostlyAdvisor advisor;
  ChunkState c;
  ASSERT_TRUE(advisor.allowed());
  advisor.Forgo();
  EXPECT_FALSE(advisor.allowed());
  EXPECT_FALSE(Reads(advisor, c, 1, 20));
  EXPECT_FALSE(c.advised);
}

TEST(ReadMostlyAdvisorTest, TakeOffSaysWhetherThereWasAdviceAndCollapsesTheResidentDuplicates) {
  ChunkState c;
  EXPECT_FALSE(ReadMostlyAdvisor::TakeOff(c));
  c.advised = true;
  c.resident = 0x3;
  c.host_copy = 0x7;
  EXPECT_TRUE(ReadMostlyAdvisor::TakeOff(c));
  EXPECT_FALSE(c.advised);
  EXPECT_EQ(c.host_copy, 0x4u) << "the host keeps only what was not on the device";
}

}  // namespace
}  // namespace msched

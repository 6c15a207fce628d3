#include "model/next_use.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

UseHistory Used(std::initializer_list<uint64_t> seqs) {
  UseHistory h;
  for (uint64_t s : seqs) h.Record(s);
  return h;
}

TEST(UseHistoryTest, KeepsTheLastFourUsesNewestFirstAndWhatFellOut) {
  UseHistory h = Used({3, 5, 5, 8, 13});
  EXPECT_EQ(h.uses, (std::array<uint64_t, 4>{13, 8, 5, 3})) << "a launch counts once";
  EXPECT_EQ(h.forgotten_use, 0u);
  h.Record(21);
  EXPECT_EQ(h.uses, (std::array<uint64_t, 4>{21, 13, 8, 5}));
  EXPECT_EQ(h.forgotten_use, 3u);
  EXPECT_EQ(h.last(), 21u);
  EXPECT_EQ(h.prev(), 13u);
}

TEST(LaunchSignatureTest, SignsTheSameAccessesAlikeAndOthersApart) {
  auto sign = [](std::initializer_list<uint64_t> values) {
    LaunchSignature s;
    for (uint64_t v : values) s.Mix(v);
    return s.value();
  };
  EXPECT_EQ(LaunchSignature().value(), 0xcbf29ce484222325ull) << "FNV-1a's offset basis";
  EXPECT_EQ(sign({1, 7, 0xffffffff}), sign({1, 7, 0xffffffff}));
  EXPECT_NE(sign({1, 7, 0xffffffff}), sign({1, 7, 0xfffffffe}));
  EXPECT_NE(sign({1, 7}), sign({7, 1})) << "order matters";
}

TEST(NextUsePredictorTest, ALoopIsKnownOnceTwoRepeatsAgreeOnItsLength) {
  NextUsePredictor p;
  uint64_t seq = 0;
  // Three launches a step: A B C A B C A ...
  const uint64_t step[] = {0xa, 0xb, 0xc};
  for (uint64_t sig : step) p.NoteLaunch(sig, ++seq);
  EXPECT_EQ(p.loop_interval(), 0u) << "a first pass votes for nothing";
  p.NoteLaunch(0xa, ++seq);
  EXPECT_EQ(p.loop_interval(), 0u) << "one vote is not enough";
  p.NoteLaunch(0xb, ++seq);
  EXPECT_EQ(p.loop_interval(), 3u);
  EXPECT_EQ(p.latest(), 5u);
  // A launch repeating at another distance (a buffer reused within the
  // step) disagrees: the loop is unknown until two agree again.
  p.NoteLaunch(0xb, ++seq);
  EXPECT_EQ(p.loop_interval(), 0u);
  p.NoteLaunch(0xb, ++seq);
  EXPECT_EQ(p.loop_interval(), 1u) << "two repeats in a row set a loop, however short";
}

TEST(NextUsePredictorTest, ALaunchNumberedNoLaterThanItsLastSightingDoesNotVote) {
  NextUsePredictor p;
  uint64_t seq = 0;
  for (uint64_t sig : {0xa, 0xb, 0xc, 0xa, 0xb}) p.NoteLaunch(sig, ++seq);
  ASSERT_EQ(p.loop_interval(), 3u);
  p.NoteLaunch(0xb, 5);  // the same launch noted again
  p.NoteLaunch(0xa, 2);  // an older number
  EXPECT_EQ(p.loop_interval(), 3u) << "neither is a repeat";
  EXPECT_EQ(p.latest(), 5u) << "the latest launch only moves forward";
}

TEST(NextUsePredictorTest, WithoutALoopTheChunksOwnIntervalPredicts) {
  NextUsePredictor p;
  p.NoteLaunch(0x1, 20);
  EXPECT_EQ(p.NextUse(Used({}), 0), 0u) << "never used: no prediction";
  EXPECT_EQ(p.NextUse(Used({12}), 0), 0u) << "used once: no interval yet";
  EXPECT_EQ(p.NextUse(Used({12, 17}), 0), 22u) << "comes back 5 launches after its last use";
  EXPECT_EQ(p.NextUse(Used({2, 7}), 0), 12u) << "even when already past";
}

TEST(NextUsePredictorTest, WithALoopEachUseComesBackOneLoopLater) {
  NextUsePredictor p;
  p.NoteLaunch(0x1, 20);
  // Used at 12 and 17 in a loop of 10: back at 22 (17 is at 27, later).
  EXPECT_EQ(p.NextUse(Used({12, 17}), 10), 22u);
  EXPECT_EQ(p.NextUse(Used({8, 14}), 10), 24u) << "18 is past: the next of the loop's uses";
  // The loop misses the chunk (its uses lie more than a loop back): its own
  // interval predicts while it lies ahead, else nothing does.
  EXPECT_EQ(p.NextUse(Used({1, 8}), 10), 0u) << "own interval (15) past, loop silent";
  EXPECT_EQ(p.NextUse(Used({4, 9}), 4), 0u);
  p.NoteLaunch(0x1, 21);
  EXPECT_EQ(p.NextUse(Used({5, 13}), 5), 0u) << "13 + 5 = 18 is past; own 21 is not ahead of 21";
  EXPECT_EQ(p.NextUse(Used({10, 16}), 5), 22u) << "16 + 5 = 21 is past; own 22 ahead";
}

TEST(NextUsePredictorTest, AChunkThatLostAUseWithinTheLoopRanksByItsOwnInterval) {
  // Used every other launch: five uses in a loop of 12 push the oldest out
  // of the history while it still lies within the loop. Its own interval
  // (2) brings it near, even though the loop places the remembered uses
  // further ahead.
  NextUsePredictor p;
  p.NoteLaunch(0x1, 10);
  const UseHistory h = Used({2, 4, 6, 8, 10});
  ASSERT_EQ(h.forgotten_use, 2u);
  EXPECT_EQ(p.NextUse(h, 12), 12u) << "min(4 + 12, own 12)";
  // Only a use lost within the last loop counts so.
  EXPECT_EQ(p.NextUse(Used({1, 4, 6, 9, 10}), 8), 12u) << "lost 1 + 8 = 9 is past: the loop's 4 + 8 stands";
  EXPECT_EQ(p.NextUse(Used({3, 4, 6, 9, 10}), 8), 11u) << "lost 3 + 8 = 11 lies ahead: own interval, 11";
}

}  // namespace
}  // namespace msched

#include "model/address_range.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

TEST(AlignTest, RoundsToPowersOfTwo) {
  EXPECT_EQ(AlignDown(4097, kPageSize), 4096u);
  EXPECT_EQ(AlignUp(4097, kPageSize), 8192u);
  EXPECT_EQ(AlignUp(4096, kPageSize), 4096u);
  EXPECT_EQ(AlignUp(1, kChunkSize), kChunkSize);
  EXPECT_EQ(AlignDown(kChunkSize + 5, kBigPageSize), kChunkSize);
}

TEST(AlignTest, AlignUpSaturatesInsteadOfWrapping) {
  EXPECT_EQ(AlignUp(UINT64_MAX, kPageSize), AlignDown(UINT64_MAX, kPageSize));
}

TEST(ByteRangeTest, ChunksOfCoversTouchedChunks) {
  ChunkSpan s = ChunksOf({kChunkSize - 1, kChunkSize + 1});
  EXPECT_EQ(s.first, 0u);
  EXPECT_EQ(s.last, 1u);
  EXPECT_EQ(s.count(), 2u);
  EXPECT_EQ(ChunksOf({0, kChunkSize}).count(), 1u);
}

TEST(RangeSetTest, AddMergesOverlappingAndTouchingRanges) {
  RangeSet s;
  s.Add({100, 200});
  s.Add({300, 400});
  s.Add({200, 250});  // touches the first
  ASSERT_EQ(s.ranges().size(), 2u);
  EXPECT_EQ(s.ranges()[0], (ByteRange{100, 250}));
  s.Add({50, 350});  // swallows both
  ASSERT_EQ(s.ranges().size(), 1u);
  EXPECT_EQ(s.ranges()[0], (ByteRange{50, 400}));
  EXPECT_EQ(s.TotalBytes(), 350u);
}

TEST(RangeSetTest, SubtractSplitsRanges) {
  RangeSet s;
  s.Add({0, 100});
  s.Subtract({40, 60});
  ASSERT_EQ(s.ranges().size(), 2u);
  EXPECT_EQ(s.ranges()[0], (ByteRange{0, 40}));
  EXPECT_EQ(s.ranges()[1], (ByteRange{60, 100}));
  EXPECT_FALSE(s.Contains(50));
  EXPECT_TRUE(s.Contains(99));
}

TEST(RangeSetTest, OverlapBytesCountsIntersection) {
  RangeSet a;
  a.Add({0, 100});
  a.Add({200, 300});
  EXPECT_EQ(a.OverlapBytes(ByteRange{50, 250}), 100u);
  RangeSet b;
  b.Add({90, 210});
  EXPECT_EQ(a.OverlapBytes(b), 20u);
  EXPECT_TRUE(a.ContainsRange({210, 290}));
  EXPECT_FALSE(a.ContainsRange({90, 110}));
}

TEST(RangeSetTest, EmptyRangesAreIgnored) {
  RangeSet s;
  s.Add({10, 10});
  s.Add({20, 5});
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace msched

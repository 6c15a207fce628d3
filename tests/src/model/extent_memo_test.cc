#include "model/extent_memo.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

TEST(ExtentMemoTest, APointerIsKnownInTheAllocationItWasLearnedIn) {
  ExtentMemo memo;
  EXPECT_EQ(memo.Find(0x100000, 1), std::nullopt) << "nothing learned yet";
  memo.Learn(0x100000, 1, 0x140000);
  EXPECT_EQ(memo.Find(0x100000, 1), 0x140000u);
  EXPECT_EQ(memo.Find(0x100100, 1), std::nullopt) << "another pointer in the same tensor";
  EXPECT_EQ(memo.Find(0x100000, 2), std::nullopt) << "the address, freed and allocated again";
}

TEST(ExtentMemoTest, TheLargestExtentWinsWithinOneAllocation) {
  ExtentMemo memo;
  memo.Learn(0x100000, 1, 0x200000);
  memo.Learn(0x100000, 1, 0x110000);  // a kernel on a slice at the tensor's pointer
  EXPECT_EQ(memo.Find(0x100000, 1), 0x200000u);
  memo.Learn(0x100000, 1, 0x300000);  // the caching allocator gave the block to a larger tensor
  EXPECT_EQ(memo.Find(0x100000, 1), 0x300000u);
  memo.Learn(0x100000, 2, 0x101000);  // freed, and allocated again at the same address
  EXPECT_EQ(memo.Find(0x100000, 2), 0x101000u);
  EXPECT_EQ(memo.Find(0x100000, 1), std::nullopt);
}

TEST(ExtentMemoTest, ManyPointersAreKeptAndOneThatLostItsSlotIsUnknownNeverWrong) {
  ExtentMemo memo;
  constexpr uint64_t kPointers = 2000;  // about what a training step passes
  for (uint64_t i = 0; i < kPointers; ++i)
    memo.Learn(0x7f0000000000 + i * 0x40000, 7, 0x7f0000000000 + i * 0x40000 + i + 1);
  uint64_t known = 0;
  for (uint64_t i = 0; i < kPointers; ++i) {
    const std::optional<uint64_t> end = memo.Find(0x7f0000000000 + i * 0x40000, 7);
    if (!end) continue;
    ++known;
    EXPECT_EQ(*end, 0x7f0000000000 + i * 0x40000 + i + 1) << "a slot shared by two pointers answers only the last";
  }
  EXPECT_GE(known, kPointers * 8 / 10);
}

}  // namespace
}  // namespace msched

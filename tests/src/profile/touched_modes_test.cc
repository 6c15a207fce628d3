#include "profile/touched_modes.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr AccessMode R = AccessMode::kRead, W = AccessMode::kWrite, RW = AccessMode::kReadWrite;

TEST(TouchedByModeTest, AMigratedRangeWithoutAWriteFaultWasOnlyRead) {
  // A weight migrated in 2 MiB, read-faulted on two pages.
  const std::vector<TouchedRange> records = {{{0, 2048 * kKiB}, R}, {{0, 4 * kKiB}, R}, {{64 * kKiB, 68 * kKiB}, R}};
  EXPECT_EQ(TouchedByMode(records, true), (std::vector<TouchedRange>{{{0, 2048 * kKiB}, R}}));
}

TEST(TouchedByModeTest, WriteFaultsMarkTheirPagesAndSplitTheRange) {
  // An output page written in the middle of a migrated range, and one read
  // and then written (both faults).
  const std::vector<TouchedRange> records = {
      {{0, 256 * kKiB}, R}, {{64 * kKiB, 68 * kKiB}, W}, {{128 * kKiB, 132 * kKiB}, R}, {{128 * kKiB, 132 * kKiB}, W}};
  const std::vector<TouchedRange> expected = {{{0, 64 * kKiB}, R},
                                              {{64 * kKiB, 68 * kKiB}, RW},
                                              {{68 * kKiB, 128 * kKiB}, R},
                                              {{128 * kKiB, 132 * kKiB}, RW},
                                              {{132 * kKiB, 256 * kKiB}, R}};
  EXPECT_EQ(TouchedByMode(records, true), expected)
      << "a write fault on a migrated page: the page was migrated for it, so read-write";
}

TEST(TouchedByModeTest, AFreshPageWrittenWithoutAMigrationIsWriteOnly) {
  // A first write to a page no one wrote populates it on the device: a
  // fault and no migration.
  const std::vector<TouchedRange> records = {{{4 * kKiB, 8 * kKiB}, W}, {{8 * kKiB, 12 * kKiB}, W}};
  EXPECT_EQ(TouchedByMode(records, true), (std::vector<TouchedRange>{{{4 * kKiB, 12 * kKiB}, W}}));
}

TEST(TouchedByModeTest, RangesApartStayApartAndTheOrderOfRecordsDoesNotMatter) {
  const std::vector<TouchedRange> records = {{{1024 * kKiB, 1088 * kKiB}, R}, {{0, 64 * kKiB}, R}};
  EXPECT_EQ(TouchedByMode(records, true),
            (std::vector<TouchedRange>{{{0, 64 * kKiB}, R}, {{1024 * kKiB, 1088 * kKiB}, R}}));
}

TEST(TouchedByModeTest, WithoutTheAdviceEveryRangeIsReadWrite) {
  const std::vector<TouchedRange> records = {{{0, 64 * kKiB}, R}, {{64 * kKiB, 128 * kKiB}, R}};
  EXPECT_EQ(TouchedByMode(records, false), (std::vector<TouchedRange>{{{0, 128 * kKiB}, RW}}));
}

TEST(TouchedByModeTest, NothingTouchedAndEmptyRecordsGiveNothing) {
  EXPECT_TRUE(TouchedByMode({}, true).empty());
  EXPECT_TRUE(TouchedByMode({{{64, 64}, R}}, true).empty());
}

}  // namespace
}  // namespace msched

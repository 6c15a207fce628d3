#include "model/chunk_table.h"

#include <gtest/gtest.h>

#include <tuple>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kUnit = ChunkTable::kUnit;

// What ForEachChunk reports: (allocation base, chunk index, units).
using Visit = std::tuple<uint64_t, size_t, uint32_t>;
std::vector<Visit> Visits(ChunkTable& t, const ByteRange& r) {
  std::vector<Visit> out;
  t.ForEachChunk(r, [&](ChunkId id, ChunkState&, uint32_t units) {
    ChunkTable::ChunkRef ref;
    EXPECT_TRUE(t.Lookup(id, &ref));
    out.emplace_back(ref.alloc->base, ref.index, units);
  });
  return out;
}

// The sum the table must keep as resident_bytes().
uint64_t SumResident(ChunkTable& t) {
  uint64_t sum = 0;
  t.ForEachAllocation([&](const Extent& a) {
    for (size_t i = 0; i < a.chunks.size(); ++i) sum += ChunkTable::UnitBytes(a, i, a.chunks[i].resident);
  });
  return sum;
}

TEST(ChunkTableTest, FindsTheAllocationOfAnInteriorPointerAndNothingOutside) {
  ChunkTable t;
  EXPECT_TRUE(t.Add(0x1000, 0x3000).ok());
  EXPECT_TRUE(t.Add(0x10000000, 5 * kMiB).ok());
  EXPECT_FALSE(t.Add(0x20000000, 0).ok()) << "empty: refused";
  ASSERT_NE(t.Find(0x3fff), nullptr);
  EXPECT_EQ(t.Find(0x3fff)->base, 0x1000u);
  EXPECT_EQ(t.Find(0x4000), nullptr) << "one past the end";
  EXPECT_EQ(t.Find(0xfff), nullptr);
  EXPECT_EQ(t.Find(0x10000000 + 5 * kMiB - 1)->chunks.size(), 3u) << "two chunks and a 1 MiB tail";
  EXPECT_EQ(t.Find(0x20000000), nullptr);
  EXPECT_EQ(t.managed_bytes(), 0x3000 + 5 * kMiB);
}

TEST(ChunkTableTest, WalksChunksInAddressOrderWithTheUnitsEachRangeTouches) {
  ChunkTable t;
  const uint64_t a = 0x10000000, b = a + 4 * kMiB + 0x1000;  // b unaligned, past a gap
  EXPECT_TRUE(t.Add(a, 4 * kMiB).ok());
  EXPECT_TRUE(t.Add(b, 3 * kMiB).ok());
  // From a's last byte to b's end (1 MiB into its second chunk), across the gap.
  const std::vector<Visit> visits = Visits(t, {a + 4 * kMiB - 1, b + 3 * kMiB});
  const std::vector<Visit> expected = {{a, 1, 1u << 31}, {b, 0, ~0u}, {b, 1, 0xffffu}};
  EXPECT_EQ(visits, expected);
  EXPECT_EQ(Visits(t, {a + kUnit + 1, a + 3 * kUnit}), (std::vector<Visit>{{a, 0, 0b110u}}));
  EXPECT_TRUE(Visits(t, {a - kMiB, a}).empty());
  EXPECT_TRUE(Visits(t, {a + 4 * kMiB, b}).empty()) << "the gap alone";
}

TEST(ChunkTableTest, AppendChunkRangeMergesTouchingChunksButNeverAcrossAnAllocationsStart) {
  ChunkTable t;
  ASSERT_TRUE(t.Add(0x200000, 0x400000).ok());  // two chunks
  ASSERT_TRUE(t.Add(0x600000, 0x500000).ok());  // starts where the first ends; three chunks
  const Extent& a = *t.Find(0x200000);
  const Extent& b = *t.Find(0x600000);
  std::vector<ByteRange> ranges;
  ChunkTable::AppendChunkRange(a, 0, &ranges);
  ChunkTable::AppendChunkRange(a, 1, &ranges);
  EXPECT_EQ(ranges, (std::vector<ByteRange>{{0x200000, 0x600000}}));
  ChunkTable::AppendChunkRange(b, 0, &ranges);  // the next allocation
  ChunkTable::AppendChunkRange(b, 2, &ranges);  // a gap; its last chunk, clipped to the allocation
  EXPECT_EQ(ranges, (std::vector<ByteRange>{{0x200000, 0x600000}, {0x600000, 0x800000}, {0xa00000, 0xb00000}}));
}

TEST(ChunkTableTest, CountsBytesToTheEndOfTheAllocation) {
  ChunkTable t;
  EXPECT_TRUE(t.Add(0x1000, 2 * kMiB + 100 * 1024).ok());  // chunk 1 ends inside its second unit
  const Extent& a = *t.Find(0x1000);
  EXPECT_EQ(ChunkTable::AllUnits(a, 0), ~0u);
  EXPECT_EQ(ChunkTable::AllUnits(a, 1), 0b11u);
  EXPECT_EQ(ChunkTable::UnitBytes(a, 1, 0b11u), 100 * 1024u) << "the tail unit is partial";
  EXPECT_EQ(ChunkTable::UnitBytes(a, 1, 0b01u), kUnit);
  EXPECT_EQ(ChunkTable::UnitBytes(a, 0, 0b1011u), 3 * kUnit);
  EXPECT_EQ(ChunkTable::UnitBytes(a, 0, 0), 0u);
  std::vector<ByteRange> ranges;
  ChunkTable::UnitRanges(a, 0, 0b1011u | 1u << 31, &ranges);
  ChunkTable::UnitRanges(a, 1, 0b11u, &ranges);
  const uint64_t c1 = 0x1000 + 2 * kMiB;
  const std::vector<ByteRange> expected = {
      {0x1000, 0x1000 + 2 * kUnit}, {0x1000 + 3 * kUnit, 0x1000 + 4 * kUnit}, {c1 - kUnit, c1}, {c1, c1 + 100 * 1024}};
  EXPECT_EQ(ranges, expected);
  EXPECT_EQ(ChunkTable::ChunkRange(a, 1), (ByteRange{c1, c1 + 100 * 1024}));
}

TEST(ChunkTableTest, KeepsResidentBytesTheSumOfItsChunks) {
  ChunkTable t;
  const uint64_t a = 0x10000000, b = 0x20000000;
  EXPECT_TRUE(t.Add(a, 4 * kMiB).ok());
  EXPECT_TRUE(t.Add(b, 100 * 1024).ok());
  ChunkTable::ChunkRef ra, rb;
  ASSERT_TRUE(t.Lookup(ChunkTable::IdOf(*t.Find(a), 1), &ra));
  ASSERT_TRUE(t.Lookup(ChunkTable::IdOf(*t.Find(b), 0), &rb));
  EXPECT_EQ(t.MarkResident(ra, 0b111u), 3 * kUnit);
  EXPECT_EQ(t.MarkResident(ra, 0b1100u), kUnit) << "only what was not resident yet";
  EXPECT_EQ(t.MarkResident(rb, 0b11u), 100 * 1024u);
  EXPECT_EQ(t.resident_bytes(), 4 * kUnit + 100 * 1024);
  EXPECT_EQ(t.MarkEvicted(ra, 0b10001u), kUnit) << "only what was resident";
  EXPECT_EQ(t.resident_bytes(), SumResident(t));
  t.SetResidency({{a, a + kMiB}, {b, b + 1}}, true);
  EXPECT_EQ(t.resident_bytes(), SumResident(t));
  t.SetResidency({{a + 2 * kMiB + kUnit, a + 2 * kMiB + kUnit + 1}}, false);
  EXPECT_EQ(t.resident_bytes(), kMiB + 100 * 1024 + 2 * kUnit);
  EXPECT_EQ(t.resident_bytes(), SumResident(t));
  EXPECT_TRUE(t.Remove(b).ok());
  EXPECT_EQ(t.resident_bytes(), kMiB + 2 * kUnit) << "removing forgets what it held";
  t.ForgetResidency();
  EXPECT_EQ(t.resident_bytes(), 0u);
  EXPECT_EQ(SumResident(t), 0u);
}

TEST(ChunkTableTest, ChunkIdsOfAFreedAllocationNameNothingEvenWhenItsBaseIsReused) {
  ChunkTable t;
  EXPECT_TRUE(t.Add(0x10000000, 4 * kMiB).ok());
  const ChunkId old_id = ChunkTable::IdOf(*t.Find(0x10000000), 1);
  EXPECT_TRUE(t.Add(0x10000000, 4 * kMiB).ok());  // replaced: a new allocation at the same base
  ChunkTable::ChunkRef ref;
  EXPECT_FALSE(t.Lookup(old_id, &ref));
  const ChunkId new_id = ChunkTable::IdOf(*t.Find(0x10000000), 1);
  EXPECT_NE(new_id, old_id);
  EXPECT_TRUE(t.Lookup(new_id, &ref));
  EXPECT_EQ(ref.index, 1u);
  EXPECT_FALSE(t.Lookup(new_id + 1, &ref)) << "past its last chunk";
  EXPECT_TRUE(t.Remove(0x10000000).ok());
  EXPECT_FALSE(t.Lookup(new_id, &ref));
  EXPECT_EQ(t.managed_bytes(), 0u);
}

TEST(ChunkTableTest, MergesTouchingRangesButNeverAcrossAnAllocationsStart) {
  ChunkTable t;
  const uint64_t a = 0x10000000, b = a + 4 * kMiB;  // b starts where a ends
  EXPECT_TRUE(t.Add(a, 4 * kMiB).ok());
  EXPECT_TRUE(t.Add(b, 4 * kMiB).ok());
  const std::vector<ByteRange> merged =
      t.MergeWithinAllocations({{a, a + 2 * kMiB}, {a + 2 * kMiB, b}, {b, b + kMiB}, {b + 2 * kMiB, b + 3 * kMiB}});
  const std::vector<ByteRange> expected = {{a, b}, {b, b + kMiB}, {b + 2 * kMiB, b + 3 * kMiB}};
  EXPECT_EQ(merged, expected);
}

// Issue 29: one map. What the table chunks is the allocation map's own
// entry, so recording an allocation once makes it seen by both lookups, and
// forgetting it takes its chunks and their residency with it.
TEST(ChunkTableTest, ItsEntriesAreTheAllocationMapsOwn) {
  ChunkTable t;
  const uint64_t a = 0x10000000, dev = 0x20000000, chunk = 0x30000000;
  ASSERT_TRUE(t.Add(a, 4 * kMiB).ok());
  ASSERT_TRUE(t.Add(dev, 4 * kMiB, AllocKind::kDevice).ok());
  ASSERT_TRUE(t.Add(chunk, 4 * kMiB, AllocKind::kPoolChunk).ok());
  ASSERT_TRUE(t.Add(chunk + kMiB, kUnit, AllocKind::kPooled).ok());
  EXPECT_FALSE(t.Add(a + kMiB, kMiB).ok()) << "overlaps: refused by the one map";

  EXPECT_EQ(t.allocations().Find(a + 5), static_cast<const Allocation*>(t.Find(a + 5))) << "the same entry";
  EXPECT_EQ(t.Find(dev), nullptr) << "device memory is mapped, not chunked";
  EXPECT_EQ(t.allocations().Find(dev)->kind, AllocKind::kDevice);
  EXPECT_EQ(t.Find(chunk + kMiB)->base, chunk) << "a block's memory is its chunk's";
  EXPECT_EQ(t.allocations().Find(chunk + kMiB)->base, chunk + kMiB) << "the program sees the block";
  EXPECT_EQ(t.managed_bytes(), 8 * kMiB);
  EXPECT_EQ(t.allocations().count(), 3u);

  t.SetResidency({{a, a + kMiB}, {chunk, chunk + 2 * kMiB}}, true);
  EXPECT_EQ(t.resident_bytes(), 3 * kMiB);
  ASSERT_TRUE(t.Remove(chunk + kMiB).ok());
  EXPECT_EQ(t.resident_bytes(), 3 * kMiB) << "a freed block's memory stays where its chunk has it";
  ASSERT_TRUE(t.Remove(a).ok());
  EXPECT_EQ(t.allocations().Find(a), nullptr);
  EXPECT_EQ(t.Find(a), nullptr);
  EXPECT_EQ(t.resident_bytes(), 2 * kMiB) << "forgetting an allocation forgets its chunks";
  ASSERT_TRUE(t.Add(chunk + kMiB, kUnit, AllocKind::kPooled).ok());
  ASSERT_TRUE(t.RemovePoolChunk(chunk).ok());
  EXPECT_EQ(t.allocations().Find(chunk + kMiB), nullptr) << "its blocks went with it";
  EXPECT_EQ(t.resident_bytes(), 0u);
  EXPECT_EQ(t.managed_bytes(), 0u);
  EXPECT_EQ(SumResident(t), 0u);
  EXPECT_EQ(t.allocations().count(), 1u) << "the device allocation";
}

}  // namespace
}  // namespace msched

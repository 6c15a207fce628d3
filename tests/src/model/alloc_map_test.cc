#include "model/alloc_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace msched {
namespace {

TEST(AllocationMapTest, FindsInteriorPointers) {
  AllocationMap m;
  ASSERT_TRUE(m.Insert(0x1000, 0x1000, AllocKind::kManaged).ok());
  ASSERT_TRUE(m.Insert(0x4000, 0x100, AllocKind::kPinned).ok());
  ASSERT_NE(m.Find(0x1000), nullptr);
  EXPECT_EQ(m.Find(0x1fff)->base, 0x1000u);  // last byte
  EXPECT_EQ(m.Find(0x2000), nullptr);        // one past the end
  EXPECT_EQ(m.Find(0xfff), nullptr);
  EXPECT_EQ(m.Find(0x4050)->kind, AllocKind::kPinned);
}

TEST(AllocationMapTest, RejectsOverlapsAndEmptyAllocations) {
  AllocationMap m;
  ASSERT_TRUE(m.Insert(0x1000, 0x1000, AllocKind::kManaged).ok());
  EXPECT_FALSE(m.Insert(0x1800, 0x1000, AllocKind::kManaged).ok());
  EXPECT_FALSE(m.Insert(0x800, 0x1000, AllocKind::kManaged).ok());
  EXPECT_FALSE(m.Insert(0x3000, 0, AllocKind::kManaged).ok());
  EXPECT_FALSE(m.Insert(UINT64_MAX - 10, 100, AllocKind::kManaged).ok());
  EXPECT_TRUE(m.Insert(0x2000, 0x10, AllocKind::kManaged).ok());  // adjacent is fine
  EXPECT_EQ(m.count(), 2u);
  EXPECT_EQ(m.total_bytes(), 0x1010u);
}

TEST(AllocationMapTest, EraseForgetsAndIdsAreNotReused) {
  AllocationMap m;
  Result<uint64_t> a = m.Insert(0x1000, 0x10, AllocKind::kManaged);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(m.Erase(0x1000).ok());
  EXPECT_FALSE(m.Erase(0x1000).ok());
  EXPECT_EQ(m.Find(0x1004), nullptr);
  Result<uint64_t> b = m.Insert(0x1000, 0x10, AllocKind::kManaged);
  ASSERT_TRUE(b.ok());
  EXPECT_GT(*b, *a);
}

TEST(AllocationMapTest, ForEachOverlappingVisitsInOrder) {
  AllocationMap m;
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(m.Insert(i * 0x100, 0x80, AllocKind::kManaged).ok());
  std::vector<uint64_t> seen;
  // [0x100, 0x180) overlaps 0x150; [0x400, ...) starts past the end.
  m.ForEachOverlapping({0x150, 0x310}, [&](const Allocation& a) { seen.push_back(a.base); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{0x100, 0x200, 0x300}));
  seen.clear();
  m.ForEachOverlapping({0x180, 0x200}, [&](const Allocation& a) { seen.push_back(a.base); });
  EXPECT_TRUE(seen.empty());  // the gap between two allocations
  seen.clear();
  m.ForEachOverlapping({0x40, 0x41}, [&](const Allocation& a) { seen.push_back(a.base); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{0x0}));
}

TEST(AllocationMapTest, AgreesWithLinearScanOnRandomLayouts) {
  std::mt19937_64 rng(7);
  AllocationMap m;
  std::vector<std::pair<uint64_t, uint64_t>> allocs;
  uint64_t addr = 0x10000;
  for (int i = 0; i < 200; ++i) {
    addr += rng() % 0x1000;
    const uint64_t size = 1 + rng() % 0x3000;
    ASSERT_TRUE(m.Insert(addr, size, AllocKind::kManaged).ok());
    allocs.push_back({addr, size});
    addr += size;
  }
  for (int i = 0; i < 2000; ++i) {
    const uint64_t p = 0x10000 + rng() % (addr - 0x10000 + 0x100);
    const Allocation* found = m.Find(p);
    const std::pair<uint64_t, uint64_t>* expect = nullptr;
    for (const auto& a : allocs) {
      if (p >= a.first && p < a.first + a.second) expect = &a;
    }
    if (expect == nullptr) {
      EXPECT_EQ(found, nullptr);
    } else {
      ASSERT_NE(found, nullptr);
      EXPECT_EQ(found->base, expect->first);
    }
  }
}

// Lookups go through an index kept beside the allocations: it must follow
// every insert, refused insert and erase.
TEST(AllocationMapTest, AgreesWithLinearScanThroughInsertsAndErases) {
  std::mt19937_64 rng(11);
  AllocationMap m;
  std::map<uint64_t, uint64_t> live;  // base -> size
  const uint64_t lo = 0x100000, hi = 0x200000;
  const auto containing = [&](uint64_t p) -> const std::pair<const uint64_t, uint64_t>* {
    for (const auto& a : live) {
      if (p >= a.first && p < a.first + a.second) return &a;
    }
    return nullptr;
  };
  for (int round = 0; round < 300; ++round) {
    const uint64_t base = lo + rng() % (hi - lo), size = 1 + rng() % 0x4000;
    bool clear = true;
    for (const auto& a : live) clear = clear && (base + size <= a.first || a.first + a.second <= base);
    EXPECT_EQ(m.Insert(base, size, AllocKind::kManaged).ok(), clear) << "at " << base;
    if (clear) live[base] = size;
    if (!live.empty() && rng() % 3 == 0) {  // erase one, at random
      auto victim = live.begin();
      std::advance(victim, static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(m.Erase(victim->first).ok());
      live.erase(victim);
    }
    for (int probe = 0; probe < 20; ++probe) {
      const uint64_t p = lo + rng() % (hi - lo + 0x4000);
      const Allocation* found = m.FindExtent(p);
      const auto* expect = containing(p);
      ASSERT_EQ(found == nullptr, expect == nullptr) << "at " << p;
      if (found != nullptr) {
        EXPECT_EQ(found->base, expect->first);
      }
    }
    const uint64_t begin = lo + rng() % (hi - lo), end = begin + 1 + rng() % 0x10000;
    std::vector<uint64_t> seen, expect;
    m.ForEachExtent({begin, end}, [&](const Extent& e) { seen.push_back(e.base); });
    for (const auto& a : live) {
      if (a.first < end && begin < a.first + a.second) expect.push_back(a.first);
    }
    EXPECT_EQ(seen, expect) << "over [" << begin << ", " << end << ")";
  }
  EXPECT_EQ(m.count(), live.size());
}

TEST(AllocationMapTest, APoolChunkHoldsItsBlocksWhichAreTheProgramsAllocations) {
  AllocationMap m;
  const uint64_t chunk = 0x200000;
  EXPECT_FALSE(m.Insert(chunk, 0x100, AllocKind::kPooled).ok()) << "a block needs its chunk";
  ASSERT_TRUE(m.Insert(chunk, 0x200000, AllocKind::kPoolChunk).ok());
  ASSERT_TRUE(m.Insert(chunk, 0x100, AllocKind::kPooled).ok()) << "a block may start where its chunk does";
  ASSERT_TRUE(m.Insert(chunk + 0x1000, 0x1000, AllocKind::kPooled).ok());
  ASSERT_TRUE(m.Insert(0x100000, 0x1000, AllocKind::kManaged).ok());
  EXPECT_FALSE(m.Insert(chunk + 0x1800, 0x100, AllocKind::kPooled).ok()) << "blocks never overlap";
  EXPECT_FALSE(m.Insert(chunk + 0x1ff000, 0x2000, AllocKind::kPooled).ok()) << "nor leave their chunk";
  EXPECT_FALSE(m.Insert(chunk + 0x8000, 0x100, AllocKind::kManaged).ok()) << "extents never overlap";
  EXPECT_EQ(m.count(), 3u) << "the blocks and the managed allocation, not the chunk";
  EXPECT_EQ(m.total_bytes(), 0x2100u);

  EXPECT_EQ(m.Find(chunk + 0x10)->kind, AllocKind::kPooled);
  EXPECT_EQ(m.Find(chunk + 0x1fff)->base, chunk + 0x1000);
  EXPECT_EQ(m.Find(chunk + 0x800), nullptr) << "inside the chunk but in no block";
  EXPECT_EQ(m.FindExtent(chunk + 0x800)->kind, AllocKind::kPoolChunk);
  std::vector<uint64_t> seen;
  m.ForEach([&](const Allocation& a) { seen.push_back(a.base); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{0x100000, chunk, chunk + 0x1000}));
  EXPECT_EQ(m.span(), (ByteRange{0x100000, chunk + 0x200000}));

  Result<Allocation> block = m.Erase(chunk);
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->kind, AllocKind::kPooled) << "at a chunk's base, Erase forgets the block";
  EXPECT_NE(m.ExtentAt(chunk), nullptr);
  EXPECT_FALSE(m.Erase(chunk).ok());
  ASSERT_TRUE(m.ErasePoolChunk(chunk).ok());
  EXPECT_EQ(m.Find(chunk + 0x1000), nullptr) << "its blocks went with it";
  EXPECT_EQ(m.count(), 1u);
  EXPECT_EQ(m.total_bytes(), 0x1000u);
  EXPECT_FALSE(m.ErasePoolChunk(0x100000).ok()) << "not a pool chunk";
}

}  // namespace
}  // namespace msched

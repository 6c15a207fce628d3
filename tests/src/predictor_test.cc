#include "model/predictor.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

TEST(PredictAllocationsTest, FindsEveryManagedAllocationArgumentWordsPointInto) {
  AllocationMap allocs;
  ASSERT_TRUE(allocs.Insert(0x100000, 0x10000, AllocKind::kManaged).ok());
  ASSERT_TRUE(allocs.Insert(0x200000, 0x10000, AllocKind::kPooled).ok());  // a block of the pool: managed too
  ASSERT_TRUE(allocs.Insert(0x300000, 0x10000, AllocKind::kPinned).ok());
  // (ptr interior to A, struct {ptr to B, ptr to A again, ptr to pinned}, int)
  struct S {
    uint64_t b, a, pinned;
  } s{0x200100, 0x100000, 0x300000};
  uint64_t a_interior = 0x104000;
  int n = 5;
  const ParamLayout layout = {{0, 8}, {8, 24}, {32, 4}};
  void* params[] = {&a_interior, &s, &n};
  Prediction p;
  PredictAllocations(ArgView::FromKernelParams(layout, params), allocs, &p);
  ASSERT_EQ(p.regions().size(), 2u);
  EXPECT_EQ(p.regions()[0].range, (ByteRange{0x100000, 0x110000}));
  EXPECT_EQ(p.regions()[1].range, (ByteRange{0x200000, 0x210000})) << "the block, not its chunk";
}

}  // namespace
}  // namespace msched

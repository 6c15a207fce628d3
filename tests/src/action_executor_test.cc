#include "model/action_executor.h"

#include <gtest/gtest.h>

#include "fake_device_ops.h"

#include <string>
#include <vector>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(ActionExecutorTest, EvictsThenLoadsThenOrdersTheLaunchStream) {
  MemoryManager mm(4 * kMiB);
  mm.AddAllocation(0, 8 * kMiB);
  MemoryActions warm;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kRead}}, 1, &warm);
  MemoryActions act;
  mm.PlanAccess({{{4 * kMiB, 8 * kMiB}, AccessMode::kRead}}, 2, &act);
  FakeDeviceOps ops;
  ASSERT_TRUE(ExecuteActions(act, 7, ops, mm).ok());
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"loads after evictions", "after 7", "out 0", "in 4", "wait 7"}));
}

TEST(ActionExecutorTest, AdviceComesBeforeAnyTransfer) {
  MemoryManager mm(4 * kMiB);
  MemoryActions act;
  act.read_mostly_off.push_back({2 * kMiB, 4 * kMiB});
  act.read_mostly_on.push_back({8 * kMiB, 16 * kMiB});
  act.evict.push_back({0, 2 * kMiB});
  act.load.push_back({4 * kMiB, 6 * kMiB});
  FakeDeviceOps ops;
  ASSERT_TRUE(ExecuteActions(act, 7, ops, mm).ok());
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"not read-mostly 2", "read-mostly 8", "loads after evictions", "out 0",
                                                 "in 4", "wait 7"}));
}

TEST(ActionExecutorTest, CommonPathCallsNothing) {
  MemoryManager mm(4 * kMiB);
  FakeDeviceOps ops;
  EXPECT_TRUE(ExecuteActions(MemoryActions{}, 1, ops, mm).ok());
  EXPECT_TRUE(ops.calls.empty());
}

TEST(ActionExecutorTest, AFailedLoadIsForgottenSoItIsTriedAgain) {
  MemoryManager mm(8 * kMiB);
  mm.AddAllocation(0, 4 * kMiB);
  MemoryActions act;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kRead}}, 1, &act);
  FakeDeviceOps ops;
  ops.fail_at = 2;  // the load (after "loads after evictions")
  EXPECT_FALSE(ExecuteActions(act, 1, ops, mm).ok());
  EXPECT_EQ(mm.resident_bytes(), 0u);
  MemoryActions again;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kRead}}, 2, &again);
  EXPECT_EQ(again.load_bytes, 4 * kMiB);
}

TEST(ActionExecutorTest, NoEvictionWhenTheQueueCannotBeWaitedFor) {
  MemoryManager mm(4 * kMiB);
  mm.AddAllocation(0, 8 * kMiB);
  MemoryActions warm, act;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kRead}}, 1, &warm);
  mm.PlanAccess({{{4 * kMiB, 8 * kMiB}, AccessMode::kRead}}, 2, &act);
  FakeDeviceOps ops;
  ops.fail_at = 2;  // TransfersAfter fails
  EXPECT_FALSE(ExecuteActions(act, 3, ops, mm).ok());
  EXPECT_EQ(ops.calls[2], "in 4") << "the eviction was skipped, the load still attempted";
  EXPECT_EQ(mm.resident_bytes(), 8 * kMiB) << "the victim is still known to be resident";
}

}  // namespace
}  // namespace msched

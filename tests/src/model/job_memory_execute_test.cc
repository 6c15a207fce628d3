// JobMemory::Execute, the one executor of the memory manager's plans.
#include "model/job_memory.h"

#include <gtest/gtest.h>

#include "fake_device_ops.h"

#include <string>
#include <vector>

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(JobMemoryExecuteTest, EvictsThenLoadsThenOrdersTheLaunchStream) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  MemoryManager& mm = jm.mutable_manager_for_tests();
  EXPECT_TRUE(mm.AddAllocation(0, 8 * kMiB).ok());
  MemoryActions warm;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kReadWrite}}, 1, &warm);
  MemoryActions act;
  mm.PlanAccess({{{4 * kMiB, 8 * kMiB}, AccessMode::kReadWrite}}, 2, &act);
  FakeDeviceOps ops;
  ASSERT_TRUE(jm.Execute(act, 7, ops).ok());
  EXPECT_EQ(ops.calls,
            (std::vector<std::string>{"mark 7 2", "loads after evictions", "after 7 1", "out 0", "in 4", "wait 7"}))
      << "the plan marks its place in the queue; the eviction waits for launch 1, which used its victim";
}

TEST(JobMemoryExecuteTest, EvictionsWaitForTheirVictimsLastLaunchNotTheWholeQueue) {
  // Launch 1 uses a, launches 2 and 3 use b; the manager then must evict a
  // for c (a is needed furthest ahead: launch 5 uses b again).
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  MemoryManager& mm = jm.mutable_manager_for_tests();
  const ByteRange a{0, 4 * kMiB}, b{4 * kMiB, 8 * kMiB}, c{8 * kMiB, 12 * kMiB};
  for (const ByteRange& r : {a, b, c}) EXPECT_TRUE(mm.AddAllocation(r.begin, r.size()).ok());
  MemoryActions act;
  mm.PlanAccess({{a, AccessMode::kReadWrite}}, 1, &act);
  mm.PlanAccess({{b, AccessMode::kReadWrite}}, 2, &act);
  mm.PlanAccess({{b, AccessMode::kReadWrite}}, 3, &act);
  mm.SetFuture({{b}});
  MemoryActions evict_a;
  mm.PlanAccess({{c, AccessMode::kReadWrite}}, 4, &evict_a);
  ASSERT_EQ(evict_a.evict, std::vector<ByteRange>{a});
  EXPECT_EQ(evict_a.evict_after, 1u) << "a's last use was launch 1; launches 2 and 3 need not have run";
  EXPECT_EQ(evict_a.op, 4u);
  FakeDeviceOps ops;
  ASSERT_TRUE(jm.Execute(evict_a, 5, ops).ok());
  EXPECT_EQ(ops.calls,
            (std::vector<std::string>{"mark 5 4", "loads after evictions", "after 5 1", "out 0", "in 8", "wait 5"}));
}

TEST(JobMemoryExecuteTest, LoadsGoFirstWhereTheDeviceHasRoomForThemBesideTheBudget) {
  // The budget leaves the device 4 MiB: a 4 MiB load goes before the
  // eviction that makes room for it within the budget; a larger one after.
  for (const uint64_t device : {8 * kMiB, 7 * kMiB}) {
    JobMemory jm(EvictionPolicy::kOpt);
    jm.SetConfigured(4 * kMiB);
    jm.SetDevice(device);
    MemoryManager& mm = jm.mutable_manager_for_tests();
    EXPECT_TRUE(mm.AddAllocation(0, 8 * kMiB).ok());
    MemoryActions warm, act;
    mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kReadWrite}}, 1, &warm);
    mm.PlanAccess({{{4 * kMiB, 8 * kMiB}, AccessMode::kReadWrite}}, 2, &act);
    ASSERT_EQ(act.load_bytes, 4 * kMiB);
    FakeDeviceOps ops;
    ASSERT_TRUE(jm.Execute(act, 7, ops).ok());
    const std::vector<std::string> loads_first = {"mark 7 2", "loads after evictions", "in 4", "after 7 1", "out 0",
                                                  "wait 7"};
    const std::vector<std::string> evictions_first = {"mark 7 2", "loads after evictions", "after 7 1", "out 0", "in 4",
                                                      "wait 7"};
    EXPECT_EQ(ops.calls, device == 8 * kMiB ? loads_first : evictions_first) << device;
  }
}

// Streams 2 MiB layers through a 4 MiB budget, each launch reading one;
// the drop preference the manager ends with.
uint64_t DropPreferenceAfterStreaming(uint64_t ns_per_eviction) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  MemoryManager& mm = jm.mutable_manager_for_tests();
  constexpr uint64_t kLayers = 48;  // 96 MiB: past JobMemory::kMinEvictionSample
  EXPECT_TRUE(mm.AddAllocation(0, kLayers * 2 * kMiB).ok());
  FakeDeviceOps ops;
  ops.ns_per_eviction = ns_per_eviction;
  for (uint64_t seq = 1; seq <= kLayers; ++seq) {
    MemoryActions act;
    const uint64_t at = (seq - 1) * 2 * kMiB;
    mm.PlanAccess({{{at, at + 2 * kMiB}, AccessMode::kReadWrite}}, seq, &act, MemoryManager::Granularity::kPredicted);
    EXPECT_TRUE(jm.Execute(act, 7, ops).ok());
  }
  return mm.drop_preference();
}

TEST(JobMemoryExecuteTest, VictimsArePricedOnceEvictionsHoldTheCaller) {
  // 2 MiB held for 200 us: about 10 GB/s, an H200's copy back.
  EXPECT_EQ(DropPreferenceAfterStreaming(200'000), ResidencyPlanner::kDropPreference);
  // Queued evictions that return at once (the paper's testbed).
  EXPECT_EQ(DropPreferenceAfterStreaming(2'000), 1u);
}

TEST(JobMemoryExecuteTest, APlanWithAdviceAloneMarksItsPlaceUnderPressure) {
  // Under pressure every launch marks its place in the queue, so that an
  // eviction waits for its victim's last launch, not a later one; a plan
  // whose only action is advice moves nothing, and marks it all the same.
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  const std::vector<PredictedRegion> first = {{{0, 4 * kMiB}, AccessMode::kReadWrite}};
  const std::vector<PredictedRegion> second = {{{4 * kMiB, 8 * kMiB}, AccessMode::kReadWrite}};
  (void)jm.MakeResident(first, 1, 7, ops);
  (void)jm.MakeResident(second, 2, 7, ops);  // evicts the first: under pressure from now on
  ops.calls.clear();
  // Launch 3 reads what is resident, never written before by a read-only
  // launch: its plan is the advice alone.
  (void)jm.MakeResident({{{4 * kMiB, 6 * kMiB}, AccessMode::kRead}}, 3, 7, ops);
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"mark 7 3"}));
}

TEST(JobMemoryExecuteTest, AdviceComesBeforeAnyTransfer) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  MemoryActions act;
  act.read_mostly_off.push_back({2 * kMiB, 4 * kMiB});
  act.read_mostly_on.push_back({8 * kMiB, 16 * kMiB});
  act.evict.push_back({0, 2 * kMiB});
  act.load.push_back({4 * kMiB, 6 * kMiB});
  act.load_bytes = 2 * kMiB;
  FakeDeviceOps ops;
  ASSERT_TRUE(jm.Execute(act, 7, ops).ok());
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"not read-mostly 2", "read-mostly 8", "loads after evictions", "out 0",
                                                 "in 4", "wait 7"}));
}

TEST(JobMemoryExecuteTest, CommonPathCallsNothing) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  FakeDeviceOps ops;
  EXPECT_TRUE(jm.Execute(MemoryActions{}, 1, ops).ok());
  EXPECT_TRUE(ops.calls.empty());
}

TEST(JobMemoryExecuteTest, AFailedLoadIsForgottenSoItIsTriedAgain) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  MemoryManager& mm = jm.mutable_manager_for_tests();
  EXPECT_TRUE(mm.AddAllocation(0, 4 * kMiB).ok());
  MemoryActions act;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kReadWrite}}, 1, &act);
  FakeDeviceOps ops;
  ops.fail_at = 3;  // the load (after the mark and "loads after evictions")
  EXPECT_FALSE(jm.Execute(act, 1, ops).ok());
  EXPECT_EQ(mm.resident_bytes(), 0u);
  MemoryActions again;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kReadWrite}}, 2, &again);
  EXPECT_EQ(again.load_bytes, 4 * kMiB);
}

TEST(JobMemoryExecuteTest, NoEvictionWhenTheQueueCannotBeWaitedFor) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  MemoryManager& mm = jm.mutable_manager_for_tests();
  EXPECT_TRUE(mm.AddAllocation(0, 8 * kMiB).ok());
  MemoryActions warm, act;
  mm.PlanAccess({{{0, 4 * kMiB}, AccessMode::kReadWrite}}, 1, &warm);
  mm.PlanAccess({{{4 * kMiB, 8 * kMiB}, AccessMode::kReadWrite}}, 2, &act);
  FakeDeviceOps ops;
  ops.fail_at = 3;  // EvictionsAfter fails
  EXPECT_FALSE(jm.Execute(act, 3, ops).ok());
  EXPECT_EQ(ops.calls[3], "in 4") << "the eviction was skipped, the load still attempted";
  EXPECT_EQ(mm.resident_bytes(), 8 * kMiB) << "the victim is still known to be resident";
}

}  // namespace
}  // namespace msched

#include "model/job_memory.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fake_device_ops.h"
#include "model/predictor.h"

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::vector<PredictedRegion> Read(uint64_t begin_mib, uint64_t end_mib) {
  return {{{begin_mib * kMiB, end_mib * kMiB}, AccessMode::kRead}};
}

TEST(JobMemoryTest, TheBudgetIsTheGrantElseTheConfiguredSizeElseTheDevicesLessWhatIsPinned) {
  JobMemory jm(EvictionPolicy::kOpt);
  EXPECT_EQ(jm.budget().Total(), 0u) << "unknown until something says";
  jm.SetDevice(16 * kMiB);
  EXPECT_EQ(jm.budget().Total(), 16 * kMiB);
  jm.SetConfigured(8 * kMiB);
  EXPECT_EQ(jm.budget().Total(), 8 * kMiB) << "MSCHED_GPU_MEMORY beats the device";
  jm.SetGranted(4 * kMiB);
  EXPECT_EQ(jm.budget().Total(), 4 * kMiB) << "the coordinator's grant beats both";
  jm.AddPinned(1 * kMiB);
  EXPECT_EQ(jm.manager().budget(), 3 * kMiB) << "pinned memory counts against the budget";
  jm.AddPinned(-5 * static_cast<int64_t>(kMiB));
  EXPECT_EQ(jm.budget().pinned, 0u) << "never below zero";
  jm.SetGranted(0);
  EXPECT_EQ(jm.manager().budget(), 8 * kMiB) << "without a coordinator, back to its own budget";
}

TEST(JobMemoryTest, NothingMovesWhileTheBudgetIsUnknown) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  const MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_TRUE(ops.calls.empty());
  EXPECT_EQ(out.loaded, 0u);
}

TEST(JobMemoryTest, MakeResidentLoadsWhatIsMissingAndEvictsWhatIsNeededLast) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"mark 7 1", "loads after evictions", "in 0", "wait 7"}));
  ops.calls.clear();
  out = jm.MakeResident(Read(0, 4), 2, 7, ops);
  EXPECT_TRUE(ops.calls.empty()) << "resident already: the common path moves nothing";
  out = jm.MakeResident(Read(4, 8), 3, 7, ops);
  EXPECT_EQ(out.evicted, 4 * kMiB);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  EXPECT_TRUE(out.status.ok());
}

TEST(JobMemoryTest, LeftToFaultsNothingIsLoadedButRoomIsMadeWithinTheBudget) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops, JobMemory::Load::kLeaveToFaults);
  EXPECT_EQ(out.loaded, 0u);
  for (const std::string& call : ops.calls) EXPECT_EQ(call.rfind("in ", 0), std::string::npos) << call;
  EXPECT_EQ(jm.manager().resident_bytes(), 4 * kMiB) << "what the launch faults in is the job's";
  ops.calls.clear();
  out = jm.MakeResident(Read(4, 8), 2, 7, ops, JobMemory::Load::kLeaveToFaults);
  EXPECT_EQ(out.evicted, 4 * kMiB) << "room for the next faults, so they stay within the budget";
  EXPECT_EQ(out.loaded, 0u);
  EXPECT_EQ(jm.manager().resident_bytes(), 4 * kMiB);
}

TEST(JobMemoryTest, AJobThatFaultsBeyondItsGrantIsBackWithinItAtItsNextPlannedLaunch) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetDevice(64 * kMiB);
  jm.SetGranted(8 * kMiB);
  jm.manager().AddAllocation(0, 32 * kMiB);
  FakeDeviceOps ops;
  // One kernel needs 16 MiB: 8 load, 8 fault in over the grant.
  const MoveOutcome big = jm.MakeResident(Read(0, 16), 1, 7, ops);
  EXPECT_EQ(big.unserved, 8 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 16 * kMiB);
  const MoveOutcome next = jm.MakeResident(Read(0, 2), 2, 7, ops);
  EXPECT_EQ(next.evicted, 8 * kMiB);
  EXPECT_LE(jm.manager().resident_bytes(), jm.budget().Total());
}

TEST(JobMemoryTest, EvictAllTakesBackEveryAllocationAndDropsReadMostlyDuplicates) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(64 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  jm.manager().AddAllocation(16 * kMiB, 8 * kMiB);  // never planned: its kernels faulted it in
  FakeDeviceOps ops;
  for (uint64_t seq = 1; seq <= 5; ++seq) (void)jm.MakeResident(Read(0, 4), seq, 7, ops);  // read-mostly by now
  ASSERT_NE(std::find(ops.calls.begin(), ops.calls.end(), "read-mostly 0"), ops.calls.end());
  ops.calls.clear();
  jm.manager().MarkCompleted(5);  // a stop drains the queue first
  const MoveOutcome out = jm.EvictAll(ops, /*wait=*/true);
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.evicted, 4 * kMiB) << "what it knew to be there";
  // Every allocation to the host first (a read duplicate is dropped there),
  // then the advice off and the read-mostly one again (what the driver
  // kept), then the wait.
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"out 0", "out 16", "not read-mostly 0", "out 0", "sync"}));
  EXPECT_EQ(jm.manager().resident_bytes(), 0u);
}

TEST(JobMemoryTest, OnlyBytesThatMovedAreCounted) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  ops.fail_at = 3;  // the load (after the mark and "loads after evictions")
  const MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_FALSE(out.status.ok());
  EXPECT_EQ(out.loaded, 0u) << "a failed prefetch is not counted as prefetched";
  ops.calls.clear();
  ops.fail_at = 0;
  EXPECT_EQ(jm.MakeResident(Read(0, 4), 2, 7, ops).loaded, 4 * kMiB) << "and is tried again";
}

TEST(JobMemoryTest, AReturningSliceReloadsItsWholeWorkingSetAndWaitsForIt) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  (void)jm.MakeResident(Read(0, 4), 1, 7, ops);
  ops.calls.clear();
  // Believed resident, but other jobs ran: it is asked for all the same.
  const MoveOutcome out = jm.Reload({{0, 4 * kMiB}}, ops);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"loads after evictions", "in 0", "wait 0", "sync"}));
}

TEST(JobMemoryTest, AStopEvictsAndASmallerGrantEvictsDownToIt) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  jm.manager().AddAllocation(0, 8 * kMiB);
  FakeDeviceOps ops;
  (void)jm.MakeResident(Read(0, 8), 1, 7, ops);
  ASSERT_EQ(jm.manager().resident_bytes(), 8 * kMiB);
  EXPECT_EQ(jm.Evict(2 * kMiB, ops).evicted, 2 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 6 * kMiB);
  jm.SetGranted(4 * kMiB);
  EXPECT_EQ(jm.FitBudget(ops).evicted, 2 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 4 * kMiB);
  EXPECT_EQ(jm.FitBudget(ops).evicted, 0u) << "within budget: nothing to do";
  EXPECT_EQ(jm.Evict(UINT64_MAX, ops).evicted, 4 * kMiB) << "a pause gives back everything";
}

TEST(PredictionChoiceTest, EachModeAndPolicyPicksItsSource) {
  using P = PredictionSource;
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kFault, true, true), P::kTemplate);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kFault, false, true), P::kNone);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kAlloc, false, true), P::kWholeAllocations);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kAlloc, true, true), P::kTemplate);
  EXPECT_EQ(ChoosePrediction(Mode::kAlloc, UnknownPolicy::kFault, true, true), P::kWholeAllocations);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kPointers, false, true), P::kPointers);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kPointers, true, true), P::kTemplate);
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kAlloc, true, false), P::kNone) << "arguments unreadable";
  EXPECT_EQ(ChoosePrediction(Mode::kMsched, UnknownPolicy::kPointers, false, false), P::kNone);
}

}  // namespace
}  // namespace msched

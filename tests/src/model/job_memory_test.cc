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
  jm.AddShared(1 * kMiB);
  EXPECT_EQ(jm.manager().budget(), 3 * kMiB) << "pinned memory counts against the budget";
  jm.AddShared(-5 * static_cast<int64_t>(kMiB));
  EXPECT_EQ(jm.budget().pinned, 0u) << "never below zero";
  jm.SetGranted(0);
  EXPECT_EQ(jm.manager().budget(), 8 * kMiB) << "without a coordinator, back to its own budget";
}

TEST(JobMemoryTest, WhatIsHeldBeyondTheBudgetCountsPinnedMemoryAndNothingWhileTheBudgetIsUnknown) {
  JobBudget b;
  EXPECT_EQ(b.Over(64 * kMiB), 0u) << "no budget known: nothing to exceed";
  b.configured = 16 * kMiB;
  EXPECT_EQ(b.Over(16 * kMiB), 0u);
  EXPECT_EQ(b.Over(41 * kMiB), 25 * kMiB);
  b.pinned = 4 * kMiB;
  EXPECT_EQ(b.Over(14 * kMiB), 2 * kMiB) << "pinned memory is held beside the managed";
  b.granted = 64 * kMiB;
  EXPECT_EQ(b.Over(41 * kMiB), 0u) << "under a coordinator, its grant is the budget";
}

TEST(JobMemoryTest, NothingMovesWhileTheBudgetIsUnknown) {
  JobMemory jm(EvictionPolicy::kOpt);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  const MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_TRUE(ops.calls.empty());
  EXPECT_EQ(out.loaded, 0u);
}

TEST(JobMemoryTest, MakeResidentLoadsWhatIsMissingAndEvictsWhatIsNeededLast) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  MoveOutcome out = jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  EXPECT_EQ(ops.calls,
            (std::vector<std::string>{"read-mostly 0", "mark 7 1", "loads after evictions", "in 0", "wait 7"}))
      << "read and never written: advised before it loads";
  ops.calls.clear();
  out = jm.MakeResident(Read(0, 4), 2, 7, ops);
  EXPECT_TRUE(ops.calls.empty()) << "resident already: the common path moves nothing";
  out = jm.MakeResident(Read(4, 8), 3, 7, ops);
  EXPECT_EQ(out.evicted, 4 * kMiB);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  EXPECT_TRUE(out.status.ok());
}

// Once the job has had to evict, a launch that needs no plan still marks its
// place in the queue while memory is near the budget: a later eviction of
// what it used then waits for it, not for the next plan that moved memory.
// A job that fits never pays the mark.
TEST(JobMemoryTest, UnderPressureEveryLaunchMarksItsPlaceAJobThatFitsNone) {
  for (const uint64_t budget_mib : {8, 16}) {
    SCOPED_TRACE(budget_mib);
    JobMemory jm(EvictionPolicy::kOpt);
    jm.SetConfigured(budget_mib * kMiB);
    ASSERT_TRUE(jm.RecordAllocation(0, 12 * kMiB, AllocKind::kManaged).ok());
    FakeDeviceOps ops;
    uint64_t seq = 0;
    for (const auto& [begin, end] : std::vector<std::pair<uint64_t, uint64_t>>{{0, 4}, {4, 8}}) {
      (void)jm.MakeResident(Read(begin, end), ++seq, 7, ops);
    }
    ops.calls.clear();
    (void)jm.MakeResident(Read(0, 4), ++seq, 7, ops);
    EXPECT_TRUE(ops.calls.empty()) << "full, but nothing was ever evicted: launch " << seq;
    (void)jm.MakeResident(Read(8, 12), ++seq, 7, ops);  // evicts when the budget is 8 MiB
    ops.calls.clear();
    (void)jm.MakeResident(Read(8, 12), ++seq, 7, ops);
    if (budget_mib == 8) {
      EXPECT_EQ(ops.calls, std::vector<std::string>{"mark 7 5"}) << "launch 5 needed no plan, but marks its place";
    } else {
      EXPECT_TRUE(ops.calls.empty()) << "a job that fits never marks";
    }
  }
}

TEST(JobMemoryTest, LeftToFaultsNothingIsLoadedButRoomIsMadeWithinTheBudget) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(4 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
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

// A prefetch with room brings an untouched allocation in whole; left to
// faults, only what the regions touch counts as held (nothing else came in).
TEST(JobMemoryTest, OnlyAPrefetchWidens) {
  for (const JobMemory::Load load : {JobMemory::Load::kPrefetch, JobMemory::Load::kLeaveToFaults}) {
    JobMemory jm(EvictionPolicy::kOpt);
    jm.SetDevice(64 * kMiB);
    ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
    FakeDeviceOps ops;
    const MoveOutcome out = jm.MakeResident({{{0, 64 * 1024}, AccessMode::kRead}}, 1, 7, ops, load);
    const bool prefetch = load == JobMemory::Load::kPrefetch;
    EXPECT_EQ(out.loaded, prefetch ? 8 * kMiB : 0u);
    EXPECT_EQ(jm.manager().resident_bytes(), prefetch ? 8 * kMiB : 64 * 1024u);
  }
}

TEST(JobMemoryTest, AJobThatFaultsBeyondItsGrantIsBackWithinItAtItsNextPlannedLaunch) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetDevice(64 * kMiB);
  jm.SetGranted(8 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 32 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  // One kernel needs 16 MiB: 8 load, 8 fault in over the grant.
  const MoveOutcome big = jm.MakeResident(Read(0, 16), 1, 7, ops);
  EXPECT_EQ(big.unserved, 8 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 16 * kMiB);
  const MoveOutcome next = jm.MakeResident(Read(0, 2), 2, 7, ops);
  EXPECT_EQ(next.evicted, 8 * kMiB);
  EXPECT_LE(jm.manager().resident_bytes(), jm.budget().Total());
}

TEST(JobMemoryTest, APauseTakesBackEveryAllocationAndDropsReadMostlyDuplicates) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(64 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  ASSERT_TRUE(jm.RecordPoolChunk(16 * kMiB, 8 * kMiB).ok());  // never planned: its kernels faulted it in
  FakeDeviceOps ops;
  for (uint64_t seq = 1; seq <= 5; ++seq) (void)jm.MakeResident(Read(0, 4), seq, 7, ops);  // read-mostly by now
  ASSERT_NE(std::find(ops.calls.begin(), ops.calls.end(), "read-mostly 0"), ops.calls.end());
  ops.calls.clear();
  // A pause: the queue drained (operations up to 5 ran), everything asked for.
  const JobMemory::SliceEnd end = jm.EndSlice(5, UINT64_MAX, /*wait=*/true, ops);
  const MoveOutcome& out = end.moved;
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.evicted, 8 * kMiB) << "what it knew to be there: the allocation came in whole at its first launch";
  EXPECT_EQ(end.working_set, 4 * kMiB) << "what the launches used";
  // Every allocation to the host first (a read duplicate is dropped there),
  // then the advice off and the read-mostly one again (what the driver
  // kept), then the wait.
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"out 0", "out 16", "not read-mostly 0", "out 0", "sync"}));
  EXPECT_EQ(jm.manager().resident_bytes(), 0u);
}

TEST(JobMemoryTest, OnlyBytesThatMovedAreCounted) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  ops.fail_at = 4;  // the load (after the advice, the mark and "loads after evictions")
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
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  EXPECT_EQ(jm.StartSlice(/*load=*/true, ops).loaded, 0u) << "no slice has ended yet: nothing to bring back";
  (void)jm.MakeResident(Read(0, 4), 1, 7, ops);
  EXPECT_EQ(jm.EndSlice(1, 0, /*wait=*/false, ops).working_set, 4 * kMiB) << "a stop that evicts nothing";
  ops.calls.clear();
  // Believed resident, but other jobs ran: it is asked for all the same,
  // and counted as loaded only beyond what the job held by its own account
  // (a load of resident pages moves nothing, and the coordinator times it).
  MoveOutcome out = jm.StartSlice(/*load=*/true, ops);
  EXPECT_EQ(out.loaded, 0u);
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"loads after evictions", "in 0", "wait 0", "sync"}));
  // Evicted at the stop: all of it crosses the link again.
  EXPECT_EQ(jm.EndSlice(2, 8 * kMiB, /*wait=*/false, ops).working_set, 4 * kMiB);
  ops.calls.clear();
  out = jm.StartSlice(/*load=*/true, ops);
  EXPECT_EQ(out.loaded, 4 * kMiB);
  ops.calls.clear();
  EXPECT_EQ(jm.StartSlice(/*load=*/false, ops).loaded, 0u);
  EXPECT_TRUE(ops.calls.empty()) << "a turn that keeps its memory loads nothing";
}

TEST(JobMemoryTest, AStopEvictsWhatTheNextSliceNeedsLastAndASmallerGrantEvictsDownToIt) {
  JobMemory jm(EvictionPolicy::kOpt);
  jm.SetConfigured(8 * kMiB);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  FakeDeviceOps ops;
  (void)jm.MakeResident(Read(0, 8), 1, 7, ops);
  ASSERT_EQ(jm.manager().resident_bytes(), 8 * kMiB);
  EXPECT_EQ(jm.EndSlice(1, 2 * kMiB, /*wait=*/false, ops).moved.evicted, 2 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 6 * kMiB);
  jm.SetGranted(4 * kMiB);
  EXPECT_EQ(jm.FitBudget(ops).evicted, 2 * kMiB);
  EXPECT_EQ(jm.manager().resident_bytes(), 4 * kMiB);
  EXPECT_EQ(jm.FitBudget(ops).evicted, 0u) << "within budget: nothing to do";
  EXPECT_EQ(jm.EndSlice(1, UINT64_MAX, /*wait=*/false, ops).moved.evicted, 4 * kMiB) << "a pause gives back everything";
}

TEST(JobMemoryTest, EachAllocationIsRecordedOnceForTheMapAndTheManager) {
  JobMemory jm(EvictionPolicy::kOpt);
  ASSERT_TRUE(jm.RecordAllocation(0, 8 * kMiB, AllocKind::kManaged).ok());
  ASSERT_TRUE(jm.RecordAllocation(16 * kMiB, 4 * kMiB, AllocKind::kDevice).ok());
  EXPECT_EQ(jm.allocations().count(), 2u);
  EXPECT_EQ(&jm.allocations(), &jm.manager().allocations()) << "one map";
  EXPECT_EQ(jm.manager().managed_bytes(), 8 * kMiB) << "only managed memory is the manager's";
  EXPECT_FALSE(jm.RecordAllocation(4 * kMiB, 8 * kMiB, AllocKind::kManaged).ok()) << "overlaps";
  EXPECT_EQ(jm.manager().managed_bytes(), 8 * kMiB) << "a refused allocation changes nothing";
  // An allocation freed behind msched's back and made again at the same place.
  ASSERT_TRUE(jm.RecordAllocation(0, 2 * kMiB, AllocKind::kManaged).ok());
  EXPECT_EQ(jm.manager().managed_bytes(), 2 * kMiB);
  jm.SetConfigured(64 * kMiB);
  FakeDeviceOps ops;
  EXPECT_EQ(jm.MakeResident(Read(0, 2), 1, 7, ops).loaded, 2 * kMiB);
  ASSERT_TRUE(jm.ForgetAllocation(0).ok());
  EXPECT_EQ(jm.manager().managed_bytes(), 0u);
  EXPECT_EQ(jm.manager().resident_bytes(), 0u) << "its chunks went with it";
  EXPECT_EQ(jm.allocations().count(), 1u);
  EXPECT_EQ(jm.ForgetAllocation(0).status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(jm.RecordPoolChunk(32 * kMiB, 2 * kMiB).ok());
  EXPECT_EQ(jm.manager().managed_bytes(), 2 * kMiB) << "a pool chunk is managed memory";
  EXPECT_EQ(jm.allocations().count(), 1u) << "but its blocks, not it, are the program's allocations";
  ASSERT_TRUE(jm.RecordAllocation(32 * kMiB, kMiB, AllocKind::kPooled).ok());
  EXPECT_EQ(jm.allocations().Find(32 * kMiB + 5)->kind, AllocKind::kPooled);
  EXPECT_EQ(jm.MakeResident(Read(32, 33), 2, 7, ops).loaded, 2 * kMiB) << "the block's chunk comes in whole";
  ASSERT_TRUE(jm.ForgetAllocation(32 * kMiB).ok());
  EXPECT_EQ(jm.manager().resident_bytes(), 2 * kMiB) << "freeing a block leaves its chunk's memory in place";
  ASSERT_TRUE(jm.RecordAllocation(32 * kMiB, kMiB, AllocKind::kPooled).ok());
  ASSERT_TRUE(jm.ForgetPoolChunk(32 * kMiB).ok());
  EXPECT_EQ(jm.allocations().Find(32 * kMiB), nullptr) << "its blocks went with it";
  EXPECT_EQ(jm.manager().managed_bytes(), 0u);
  EXPECT_EQ(jm.manager().resident_bytes(), 0u);
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

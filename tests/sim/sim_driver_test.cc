// Tests of the simulated driver in one process: allocation limits and the
// unified-memory model against hand-computed expectations (faults, LRU of
// migration time, bulk prefetch, full-duplex swaps, advice, the chunks a
// move out leaves allocated). The driver API's other semantics are in
// sim_driver_api_test.cc.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sim_driver_fixture.h"
#include "sim_test_util.h"

namespace msim_test {
namespace {

// rtx5080-pcie5 numbers, as in templates/devices/rtx5080-pcie5.json.
constexpr double kFaultControlNs = 30440;
constexpr double kLinkBytesPerNs = 41.7;
constexpr double kHbmBytesPerNs = 960;
constexpr double kPrefetchCallNs = 10000;
// A batch holds 256 fault entries: 16 densely touched 64 KiB big pages.
constexpr uint64_t kBatchBytes = 1 * kMiB;
// Fault entries of densely touching `bytes` (one per 4 KiB page).
constexpr uint64_t FaultEntries(uint64_t bytes) { return bytes / 4096; }

// The device memory cuMemGetInfo reports free.
uint64_t FreeBytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  return free;
}

using msim_test::SimDriverTest;

TEST_F(SimDriverTest, DeviceAllocationsFailWithOutOfMemoryWhenHbmIsFull) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 48 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&b, 32 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free = 0, total = 0;
  CU_ASSERT(cuMemGetInfo(&free, &total));
  EXPECT_EQ(total, kDeviceBytes);
  EXPECT_EQ(free, 16 * kMiB);
  CU_ASSERT(cuMemFree(a));
  ASSERT_EQ(cuMemAlloc(&b, 32 * kMiB), CUDA_SUCCESS);
  CU_ASSERT(cuMemFree(b));
  EXPECT_EQ(cuMemAlloc(&b, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(0x1234), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, DeviceAllocationEvictsManagedMemoryButNeverDeviceMemory) {
  CUdeviceptr m = Managed(48 * kMiB);
  Touch(m, 48 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 40 * kMiB), CUDA_SUCCESS);  // evicts managed chunks to fit
  const auto s = Stats();
  EXPECT_GE(s["evictions"].get<uint64_t>(), 12u);
  CUdeviceptr d2 = 0;
  EXPECT_EQ(cuMemAlloc(&d2, 32 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // d itself is never evicted
  CU_ASSERT(cuMemFree(d));
}

// As driver 580 on an H100: one prefetch never spans two allocations, even
// two that touch; each alone is fine.
TEST_F(SimDriverTest, APrefetchOverTwoAllocationsThatTouchIsRefused) {
  const CUdeviceptr x = Managed(2 * kMiB), y = Managed(2 * kMiB);
  ASSERT_EQ(y, x + 2 * kMiB) << "the simulator packs allocations next to each other, as the driver does";
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemPrefetchAsync(x, 4 * kMiB, dev, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(x, 2 * kMiB, dev, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemPrefetchAsync(y, 2 * kMiB, dev, 0, nullptr), CUDA_SUCCESS);
}

TEST_F(SimDriverTest, FaultsAreServicedInBatchesAtTheProfilesCost) {
  CUdeviceptr m = HostWritten(4 * kMiB);
  const auto before = Stats();
  const uint64_t elapsed = Timed([&] { Touch(m, 4 * kMiB); });
  const auto after = Stats();
  // A dense sweep faults on every 4 KiB page; each batch of 256 entries (16
  // big pages) costs one round trip plus its transfer at link speed. Half a
  // block resident is not more than 51%, so the density prefetcher adds
  // nothing: two batches per 2 MiB block.
  EXPECT_EQ(Delta(after["faults"], before["faults"]), FaultEntries(4 * kMiB));
  EXPECT_EQ(Delta(after["fault_batches"], before["fault_batches"]), 4 * kMiB / kBatchBytes);
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["fault"], before["bytes"]["h2d"]["fault"]), 4 * kMiB);
  const double expected_stall = 4 * kFaultControlNs + 4.0 * kMiB / kLinkBytesPerNs;
  const double stall = after["fault_stall_ns"].get<double>() - before["fault_stall_ns"].get<double>();
  EXPECT_NEAR(stall, expected_stall, expected_stall * 0.01);
  EXPECT_GT(elapsed, static_cast<uint64_t>(expected_stall));
  // Touching it again costs no fault.
  Touch(m, 4 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Stats()["faults"], after["faults"]);
}

TEST_F(SimDriverTest, FirstTouchPopulatesTheDeviceWithoutATransfer) {
  // Faulting in memory nothing wrote costs the batches' round trips but no
  // transfer.
  CUdeviceptr faulted = Managed(4 * kMiB);
  auto before = Stats();
  Touch(faulted, 4 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  auto after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["fault"], before["bytes"]["h2d"]["fault"]), 0u);
  EXPECT_EQ(Delta(after["bytes"]["first_touch"], before["bytes"]["first_touch"]), 4 * kMiB);
  const double stall = 4 * kFaultControlNs + 4.0 * kMiB / kHbmBytesPerNs;
  EXPECT_NEAR(after["fault_stall_ns"].get<double>() - before["fault_stall_ns"].get<double>(), stall, stall * 0.01);
  CU_ASSERT(cuMemFree(faulted));
  allocs_.erase(std::find(allocs_.begin(), allocs_.end(), faulted));
  // Prefetching memory nothing wrote zero-fills it on the device at HBM
  // speed, block after block.
  CUdeviceptr fresh = Managed(32 * kMiB);
  before = Stats();
  const uint64_t prefetch = Timed([&] { Prefetch(fresh, 32 * kMiB, true); });
  after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["prefetch"], before["bytes"]["h2d"]["prefetch"]), 0u);
  EXPECT_EQ(Delta(after["bytes"]["first_touch"], before["bytes"]["first_touch"]), 32 * kMiB);
  const double expected = kPrefetchCallNs + 32.0 * kMiB / kHbmBytesPerNs;
  EXPECT_NEAR(static_cast<double>(prefetch), expected, expected * 0.02);
  // Plain host stores make host copies (the simulator learns of them from
  // the host's page tables): only the big pages written are copied.
  Prefetch(fresh, 32 * kMiB, false);
  CUdeviceptr stored = Managed(2 * kMiB);
  std::memset(reinterpret_cast<void*>(stored + 64 * 1024), 1, 100);  // inside big page 1
  before = Stats();
  Prefetch(stored, 2 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["prefetch"], before["bytes"]["h2d"]["prefetch"]), 64 * 1024u);
  EXPECT_EQ(Delta(after["bytes"]["first_touch"], before["bytes"]["first_touch"]), 2 * kMiB - 64 * 1024);
  // Once evicted, populated memory has a host copy and comes back by copy.
  Prefetch(stored, 2 * kMiB, false);
  before = Stats();
  Prefetch(fresh, 32 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["prefetch"], before["bytes"]["h2d"]["prefetch"]), 32 * kMiB);
}

TEST_F(SimDriverTest, EvictsLeastRecentlyMigratedChunksNotLeastRecentlyUsed) {
  CUdeviceptr a = Managed(32 * kMiB), b = Managed(32 * kMiB), c = Managed(32 * kMiB);
  Touch(a, 32 * kMiB);
  Touch(b, 32 * kMiB);  // the device is now full
  Touch(a, 32 * kMiB);  // a is the most recently *used*, but was migrated first
  CU_ASSERT(cuCtxSynchronize());
  const uint64_t f0 = Stats()["faults"];
  Touch(c, 32 * kMiB);  // needs 32 MiB: evicts a's 16 chunks
  CU_ASSERT(cuCtxSynchronize());
  const auto s1 = Stats();
  EXPECT_EQ(s1["faults"].get<uint64_t>() - f0, FaultEntries(32 * kMiB));
  Touch(b, 32 * kMiB);  // still resident
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Stats()["faults"], s1["faults"]);
  Touch(a, 32 * kMiB);  // was evicted
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Stats()["faults"].get<uint64_t>() - s1["faults"].get<uint64_t>(), FaultEntries(32 * kMiB));
}

TEST_F(SimDriverTest, PrefetchMovesRangesInBulkAtCopyEngineBandwidth) {
  CUdeviceptr m = HostWritten(32 * kMiB);
  const uint64_t f0 = Stats()["faults"];
  const uint64_t elapsed = Timed([&] { Prefetch(m, 32 * kMiB, true); });
  const double expected = kPrefetchCallNs + 32.0 * kMiB / kLinkBytesPerNs;
  EXPECT_NEAR(static_cast<double>(elapsed), expected, expected * 0.02);
  Touch(m, 32 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Stats()["faults"].get<uint64_t>(), f0);  // nothing left to fault
  // Back to the host, then faulting in again costs faults.
  Prefetch(m, 32 * kMiB, false);
  Touch(m, 2 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Stats()["faults"].get<uint64_t>() - f0, FaultEntries(2 * kMiB));
}

TEST_F(SimDriverTest, PrefetchOverlapsComputeOnAnotherStream) {
  CUdeviceptr m = HostWritten(32 * kMiB), small = Managed(4096);
  Prefetch(small, 4096, true);
  CUstream s0, s1;
  CU_ASSERT(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  const uint64_t kernel = Timed([&] { Spin(small, 56'300'000'000, s0); });  // 1 ms at 56.3 TFLOPS
  const uint64_t prefetch = Timed([&] { Prefetch(m, 32 * kMiB, true, s1); });
  Prefetch(m, 32 * kMiB, false, s1);
  const uint64_t both = Timed([&] {
    Spin(small, 56'300'000'000, s0);
    Prefetch(m, 32 * kMiB, true, s1);
  });
  EXPECT_LT(both, (kernel + prefetch) * 0.8) << "kernel " << kernel << " prefetch " << prefetch;
  EXPECT_GE(both, std::max(kernel, prefetch));
  CU_ASSERT(cuStreamDestroy(s0));
  CU_ASSERT(cuStreamDestroy(s1));
}

TEST_F(SimDriverTest, SwapUsesBothLinkDirectionsAtOnce) {
  CUdeviceptr a = Managed(32 * kMiB), b = Managed(32 * kMiB), c = HostWritten(32 * kMiB);
  Prefetch(a, 32 * kMiB, true);
  Prefetch(b, 32 * kMiB, true);
  const uint64_t one_way = Timed([] {}) + static_cast<uint64_t>(32.0 * kMiB / kLinkBytesPerNs);
  // Bringing c in evicts a: D2H of a and H2D of c proceed chunk by chunk on
  // the two copy engines, so the swap takes about one transfer, not two.
  const uint64_t swap = Timed([&] { Prefetch(c, 32 * kMiB, true); });
  EXPECT_LT(swap, one_way * 1.25) << "swap " << swap << " one way " << one_way;
  EXPECT_GT(swap, one_way);
  EXPECT_EQ(Stats()["bytes"]["d2h"]["eviction"].get<uint64_t>() % (2 * kMiB), 0u);
}

TEST_F(SimDriverTest, ReadMostlyMemoryIsDuplicatedUntilTheGpuWritesIt) {
  CUdeviceptr a = HostWritten(32 * kMiB), b = Managed(32 * kMiB), c = Managed(32 * kMiB);
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU_ASSERT(cuMemAdvise(a, 32 * kMiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
  int read_mostly = 0;
  CU_ASSERT(cuMemRangeGetAttribute(&read_mostly, sizeof read_mostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, 32 * kMiB));
  EXPECT_EQ(read_mostly, 1);
  // Prefetching copies it and the host keeps its copy: evicting it (to make
  // room for c) drops the device copy with no transfer.
  auto before = Stats();
  Prefetch(a, 32 * kMiB, true);
  Prefetch(b, 32 * kMiB, true);
  Prefetch(c, 32 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  auto after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["prefetch"], before["bytes"]["h2d"]["prefetch"]), 32 * kMiB);
  EXPECT_EQ(Delta(after["bytes"]["d2h"]["eviction"], before["bytes"]["d2h"]["eviction"]), 0u);
  // Brought back, then written by the GPU: the copies collapse (a fault per
  // page, no data moved), and evicting it now needs a copy back.
  Prefetch(a, 32 * kMiB, true);  // evicts b (zero-filled, device-only: copied back)
  CU_ASSERT(cuCtxSynchronize());
  before = Stats();
  Scribble(a, 32 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  after = Stats();
  EXPECT_EQ(Delta(after["collapses"], before["collapses"]), 32 * kMiB / (64 * 1024));
  EXPECT_EQ(Delta(after["faults"], before["faults"]), FaultEntries(32 * kMiB));
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["fault"], before["bytes"]["h2d"]["fault"]), 0u);
  before = Stats();
  Prefetch(b, 32 * kMiB, true);  // evicts c (device-only), then a (written: no valid host copy)
  CU_ASSERT(cuCtxSynchronize());
  after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["d2h"]["eviction"], before["bytes"]["d2h"]["eviction"]), 32 * kMiB);
}

// Unsetting the advice collapses the duplicates at once, as the driver
// documents: later GPU writes fault nothing, and evicting now copies back.
TEST_F(SimDriverTest, UnsettingReadMostlyCollapsesTheCopiesAtOnce) {
  CUdeviceptr a = HostWritten(16 * kMiB);
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU_ASSERT(cuMemAdvise(a, 16 * kMiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
  Prefetch(a, 16 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(cuMemAdvise(a, 16 * kMiB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev));
  auto before = Stats();
  Scribble(a, 16 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  auto after = Stats();
  EXPECT_EQ(Delta(after["collapses"], before["collapses"]), 0u);
  EXPECT_EQ(Delta(after["faults"], before["faults"]), 0u);
  before = Stats();
  Prefetch(a, 16 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["d2h"]["prefetch"], before["bytes"]["d2h"]["prefetch"]), 16 * kMiB)
      << "one copy now: the device's, which goes back";
}

// The driver's read-mostly advice is per page: advising half an allocation
// duplicates that half only.
TEST_F(SimDriverTest, ReadMostlyAdviceHoldsForTheRangeAdvisedNotTheWholeAllocation) {
  CUdeviceptr a = HostWritten(16 * kMiB);
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU_ASSERT(cuMemAdvise(a, 8 * kMiB, CU_MEM_ADVISE_SET_READ_MOSTLY, dev));
  int read_mostly = -1;
  CU_ASSERT(cuMemRangeGetAttribute(&read_mostly, sizeof read_mostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, 8 * kMiB));
  EXPECT_EQ(read_mostly, 1);
  CU_ASSERT(cuMemRangeGetAttribute(&read_mostly, sizeof read_mostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, 16 * kMiB));
  EXPECT_EQ(read_mostly, 0) << "not all of the range is advised";
  Prefetch(a, 16 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  const auto before = Stats();
  Prefetch(a, 16 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  const auto after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["duplicate_dropped"], before["bytes"]["duplicate_dropped"]), 8 * kMiB);
  EXPECT_EQ(Delta(after["bytes"]["d2h"]["prefetch"], before["bytes"]["d2h"]["prefetch"]), 8 * kMiB)
      << "the half not advised was moved in, so it goes back";
  // Taking the advice off the advised half alone leaves nothing advised.
  CU_ASSERT(cuMemAdvise(a, 8 * kMiB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev));
  CU_ASSERT(cuMemRangeGetAttribute(&read_mostly, sizeof read_mostly, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a, 4 * kMiB));
  EXPECT_EQ(read_mostly, 0);
}

TEST_F(SimDriverTest, PreferredHostLocationIsReadInPlaceWithoutFaults) {
  CUdeviceptr a = Managed(8 * kMiB);
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  CU_ASSERT(cuMemAdvise(a, 8 * kMiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  const auto before = Stats();
  Touch(a, 8 * kMiB);
  CU_ASSERT(cuCtxSynchronize());
  const auto after = Stats();
  EXPECT_EQ(after["faults"], before["faults"]);
  EXPECT_EQ(after["bytes"]["remote"].get<uint64_t>() - before["bytes"]["remote"].get<uint64_t>(), 8 * kMiB);
  int loc = 0;
  CU_ASSERT(cuMemRangeGetAttribute(&loc, sizeof loc, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, a, 4096));
  EXPECT_EQ(loc, CU_DEVICE_CPU);
}

TEST_F(SimDriverTest, DiscardMakesContentsVisiblyUndefined) {
  CUdeviceptr a = Managed(2 * kMiB);
  std::vector<uint8_t> data(2 * kMiB, 7);
  CU_ASSERT(cuMemcpyHtoD(a, data.data(), data.size()));
  CUstream s;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t size = 2 * kMiB;
  CU_ASSERT(cuMemDiscardBatchAsync(&a, &size, 1, 0, s));
  CU_ASSERT(cuStreamSynchronize(s));
  CU_ASSERT(cuMemcpyDtoH(data.data(), a, data.size()));
  EXPECT_EQ(data[0], 0xCD);
  EXPECT_EQ(cuMemDiscardBatchAsync(&a, &size, 1, 0, nullptr), CUDA_ERROR_INVALID_VALUE);  // legacy stream refused
  CU_ASSERT(cuStreamDestroy(s));
}

// As the driver does (measured on an H200, 2026-11-28): moving managed data
// to the host leaves its emptied chunks allocated to it, still reported
// used, until its allocation is freed.
TEST_F(SimDriverTest, PrefetchingToTheHostLeavesTheEmptiedChunksReportedUsedUntilFreed) {
  CUdeviceptr m = HostWritten(32 * kMiB);
  Prefetch(m, 32 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(FreeBytes(), 32 * kMiB);
  const auto before = Stats();
  Prefetch(m, 32 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(Delta(Stats()["bytes"]["d2h"]["prefetch"], before["bytes"]["d2h"]["prefetch"]), 32 * kMiB);
  EXPECT_EQ(FreeBytes(), 32 * kMiB) << "the emptied chunks are still the allocation's";
  CU_ASSERT(cuMemFree(m));
  allocs_.erase(std::find(allocs_.begin(), allocs_.end(), m));
  EXPECT_EQ(FreeBytes(), kDeviceBytes) << "freeing the allocation frees them";
}

// An allocation that does not fit in the free memory takes the emptied
// chunks first, copying nothing and evicting nothing; what it does not need
// stays reported used.
TEST_F(SimDriverTest, AnAllocationReclaimsEmptiedChunksWithoutEvictingOrCopying) {
  CUdeviceptr m = HostWritten(48 * kMiB);
  Prefetch(m, 48 * kMiB, true);
  Prefetch(m, 48 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(FreeBytes(), 16 * kMiB);
  const auto before = Stats();
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 48 * kMiB), CUDA_SUCCESS);
  const auto after = Stats();
  EXPECT_EQ(Delta(after["evictions"], before["evictions"]), 0u);
  EXPECT_EQ(Delta(after["bytes"]["d2h"]["eviction"], before["bytes"]["d2h"]["eviction"]), 0u);
  EXPECT_EQ(FreeBytes(), 0u) << "16 MiB of the emptied chunks were not needed: still m's";
  std::vector<uint8_t> back(48 * kMiB);
  CU_ASSERT(cuMemcpyDtoH(back.data(), m, back.size()));
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x5A), static_cast<ptrdiff_t>(back.size())) << "m's data is intact";
  CU_ASSERT(cuMemFree(d));
  EXPECT_EQ(FreeBytes(), 48 * kMiB);
}

// The block migrating back in reuses its own emptied chunks: the free
// memory stays free.
TEST_F(SimDriverTest, MigratingBackInReusesTheEmptiedChunksNotTheFreeMemory) {
  CUdeviceptr m = HostWritten(32 * kMiB);
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 16 * kMiB), CUDA_SUCCESS);
  Prefetch(m, 32 * kMiB, true);
  Prefetch(m, 32 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(FreeBytes(), 16 * kMiB);
  const auto before = Stats();
  Prefetch(m, 32 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  const auto after = Stats();
  EXPECT_EQ(Delta(after["bytes"]["h2d"]["prefetch"], before["bytes"]["h2d"]["prefetch"]), 32 * kMiB);
  EXPECT_EQ(Delta(after["evictions"], before["evictions"]), 0u);
  EXPECT_EQ(FreeBytes(), 16 * kMiB);
  CU_ASSERT(cuMemFree(d));
}

// Chunks the driver evicts to make room are freed for what needed them:
// none stays allocated to their owner.
TEST_F(SimDriverTest, EvictingToMakeRoomLeavesNoChunkAllocatedToTheOwner) {
  CUdeviceptr a = HostWritten(48 * kMiB), b = Managed(32 * kMiB);
  Prefetch(a, 48 * kMiB, true);
  CU_ASSERT(cuCtxSynchronize());
  const auto before = Stats();
  Prefetch(b, 32 * kMiB, true);  // evicts 16 MiB of a
  CU_ASSERT(cuCtxSynchronize());
  const auto after = Stats();
  EXPECT_EQ(Delta(after["evictions"], before["evictions"]), 8u);
  EXPECT_EQ(FreeBytes(), 0u);
  CU_ASSERT(cuMemFree(b));
  allocs_.erase(std::find(allocs_.begin(), allocs_.end(), b));
  EXPECT_EQ(FreeBytes(), 32 * kMiB) << "only a's 32 MiB still resident";
}

// A discard empties chunks as a prefetch to the host does (the driver
// clears the block's residency, keeping its chunk, on both paths).
TEST_F(SimDriverTest, DiscardingLeavesTheEmptiedChunksReportedUsedAndReclaimable) {
  CUdeviceptr a = HostWritten(32 * kMiB);
  Prefetch(a, 32 * kMiB, true);
  CUstream s;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t size = 32 * kMiB;
  CU_ASSERT(cuMemDiscardBatchAsync(&a, &size, 1, 0, s));
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(FreeBytes(), 32 * kMiB);
  const auto before = Stats();
  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc(&d, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Delta(Stats()["evictions"], before["evictions"]), 0u);
  CU_ASSERT(cuMemFree(d));
  CU_ASSERT(cuStreamDestroy(s));
}

}  // namespace
}  // namespace msim_test

int main(int argc, char** argv) {
  msim_test::ConfigureSimulator();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

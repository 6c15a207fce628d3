// Tests of the simulated driver in one process: allocation limits, the
// unified-memory model against hand-computed expectations (faults, LRU of
// migration time, bulk prefetch, full-duplex swaps, advice), the virtual
// timeline, host kernels, capture, VMM, and cuGetProcAddress semantics.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

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

class SimDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice dev;
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleLoadData(&module_, kTestModule), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&touch_, module_, "touch"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&scribble_, module_, "scribble"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&spin_, module_, "spin"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&vadd_, module_, "vadd"), CUDA_SUCCESS);
  }
  void SetUp() override { ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS); }
  void TearDown() override {
    for (CUdeviceptr p : allocs_) cuMemFree(p);
    cuCtxSynchronize();
    size_t free = 0, total = 0;
    cuMemGetInfo(&free, &total);
    EXPECT_EQ(free, total) << "a test leaked device memory";
  }

  CUdeviceptr Managed(uint64_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    allocs_.push_back(p);
    return p;
  }
  // Managed memory the host has written: moving it to the device is a copy.
  CUdeviceptr HostWritten(uint64_t bytes) {
    CUdeviceptr p = Managed(bytes);
    std::vector<uint8_t> data(bytes, 0x5A);
    EXPECT_EQ(cuMemcpyHtoD(p, data.data(), bytes), CUDA_SUCCESS);
    return p;
  }
  static uint64_t Delta(const nlohmann::json& after, const nlohmann::json& before) {
    return after.get<uint64_t>() - before.get<uint64_t>();
  }
  void Touch(CUdeviceptr p, uint64_t bytes, CUstream s = nullptr) {
    void* params[] = {&p, &bytes};
    ASSERT_EQ(cuLaunchKernel(touch_, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr), CUDA_SUCCESS);
  }
  void Scribble(CUdeviceptr p, uint64_t bytes) {
    void* params[] = {&p, &bytes};
    ASSERT_EQ(cuLaunchKernel(scribble_, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  }
  void Spin(CUdeviceptr p, uint64_t flops, CUstream s) {
    void* params[] = {&p, &flops};
    ASSERT_EQ(cuLaunchKernel(spin_, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr), CUDA_SUCCESS);
  }
  void Prefetch(CUdeviceptr p, uint64_t bytes, bool to_device, CUstream s = nullptr) {
    CUmemLocation loc{to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST, 0};
    ASSERT_EQ(cuMemPrefetchAsync(p, bytes, loc, 0, s), CUDA_SUCCESS);
  }
  // Runs fn, synchronises, and returns the virtual time it took.
  template <typename Fn>
  uint64_t Timed(Fn&& fn) {
    cuCtxSynchronize();
    const uint64_t t0 = Now();
    fn();
    cuCtxSynchronize();
    return Now() - t0;
  }

  static CUcontext ctx_;
  static CUmodule module_;
  static CUfunction touch_, scribble_, spin_, vadd_;
  std::vector<CUdeviceptr> allocs_;
};

CUcontext SimDriverTest::ctx_;
CUmodule SimDriverTest::module_;
CUfunction SimDriverTest::touch_, SimDriverTest::scribble_, SimDriverTest::spin_, SimDriverTest::vadd_;

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

TEST_F(SimDriverTest, HostKernelsComputeOnTheData) {
  const uint64_t n = 1 << 16;
  CUdeviceptr a = Managed(4 * n), b = Managed(4 * n), c = Managed(4 * n);
  std::vector<float> x(n), y(n), z(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 2.0f * static_cast<float>(i);
  CU_ASSERT(cuMemcpyHtoD(a, x.data(), 4 * n));
  CU_ASSERT(cuMemcpyHtoD(b, y.data(), 4 * n));
  uint64_t nn = n;
  void* params[] = {&a, &b, &c, &nn};
  CU_ASSERT(cuLaunchKernel(vadd_, n / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  CU_ASSERT(cuMemcpyDtoH(z.data(), c, 4 * n));
  for (uint64_t i = 0; i < n; i += 997) EXPECT_EQ(z[i], 3.0f * static_cast<float>(i));
}

TEST_F(SimDriverTest, ExtraFormAndLaunchExReachTheSameKernel) {
  const uint64_t n = 1024;
  CUdeviceptr a = Managed(4 * n), b = Managed(4 * n), c = Managed(4 * n);
  CU_ASSERT(cuMemsetD32(a, 0x3f800000, n));  // 1.0f
  CU_ASSERT(cuMemsetD32(b, 0x40000000, n));  // 2.0f
  struct {
    CUdeviceptr a, b, c;
    uint64_t n;
  } packed{a, b, c, n};
  size_t size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256, config.blockDimY = config.blockDimZ = 1;
  CU_ASSERT(cuLaunchKernelEx(&config, vadd_, nullptr, extra));
  float out = 0;
  CU_ASSERT(cuMemcpyDtoH(&out, c + 4 * 100, 4));
  EXPECT_EQ(out, 3.0f);
  size = 8;  // smaller than the layout
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, nullptr, extra), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, EventsMeasureVirtualTime) {
  CUdeviceptr small = Managed(4096);
  Prefetch(small, 4096, true);
  CUevent e0, e1;
  CU_ASSERT(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU_ASSERT(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU_ASSERT(cuEventRecord(e0, nullptr));
  Spin(small, 563'000'000'000, nullptr);  // 10 ms at 56.3 TFLOPS
  CU_ASSERT(cuEventRecord(e1, nullptr));
  CU_ASSERT(cuEventSynchronize(e1));
  float ms = 0;
  CU_ASSERT(cuEventElapsedTime(&ms, e0, e1));
  EXPECT_NEAR(ms, 10.0 + 0.003, 0.01);
  CU_ASSERT(cuEventDestroy(e0));
  CU_ASSERT(cuEventDestroy(e1));
}

// The idle alarm is a timer in virtual time for a job that gives
// its turn on the GPU up when it has been idle: it fires where the idleness
// runs out, on the thread that moves the clock, once per idle period,
// counting queued work as activity, and never from within itself.
std::vector<uint64_t> g_alarms;  // the virtual times the alarm fired at
void RecordAlarm() {
  g_alarms.push_back(Now());
  msimAdvanceTo(Now() + 5'000'000);  // from within the alarm: no second one
}

TEST_F(SimDriverTest, TheIdleAlarmFiresOncePerIdlePeriodWhereItsIdlenessRunsOut) {
  struct Disarm {
    ~Disarm() { msimSetIdleAlarm(0, nullptr); }
  } disarm;
  g_alarms.clear();
  CUdeviceptr small = Managed(4096);
  Prefetch(small, 4096, true);
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(msimSetIdleAlarm(1'000'000, RecordAlarm));
  const uint64_t t0 = Now();  // the synchronisation's end: idle from here
  CU_ASSERT(msimAdvanceTo(t0 + 500'000));
  EXPECT_TRUE(g_alarms.empty()) << "idle for 0.5 ms only";
  CU_ASSERT(msimAdvanceTo(t0 + 3'000'000));
  ASSERT_EQ(g_alarms.size(), 1u);
  EXPECT_EQ(g_alarms[0], t0 + 1'000'000) << "the clock stops where 1 ms of idleness ran out";
  EXPECT_EQ(Now(), t0 + 6'000'000) << "then goes on: the alarm moved it 5 ms, past the 3 ms asked for";
  CU_ASSERT(msimAdvanceTo(Now() + 10'000'000));
  EXPECT_EQ(g_alarms.size(), 1u) << "once per idle period";

  // A 10 ms kernel still queued is work: the period starts at its end.
  const uint64_t t1 = Now();
  Spin(small, 563'000'000'000, nullptr);
  CU_ASSERT(msimAdvanceTo(t1 + 30'000'000));
  ASSERT_EQ(g_alarms.size(), 2u);
  EXPECT_GE(g_alarms[1], t1 + 11'000'000);
  EXPECT_LT(g_alarms[1], t1 + 11'100'000);

  CU_ASSERT(msimSetIdleAlarm(0, nullptr));
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(msimAdvanceTo(Now() + 10'000'000));
  EXPECT_EQ(g_alarms.size(), 2u) << "disarmed";
}

TEST_F(SimDriverTest, CaptureRecordsLaunchesAndRefusesPrefetch) {
  CUdeviceptr a = Managed(4096), b = Managed(4096), c = Managed(4096);
  CU_ASSERT(cuMemsetD32(a, 0x3f800000, 1024));
  CU_ASSERT(cuMemsetD32(b, 0x3f800000, 1024));
  CU_ASSERT(cuMemsetD32(c, 0, 1024));
  CUstream s;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status;
  CU_ASSERT(cuStreamIsCapturing(s, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  uint64_t n = 1024;
  void* params[] = {&a, &b, &c, &n};
  CU_ASSERT(cuLaunchKernel(vadd_, 4, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemPrefetchAsync(a, 4096, dev, 0, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  CU_ASSERT(cuStreamEndCapture(s, &graph));
  float out = -1;
  CU_ASSERT(cuMemcpyDtoH(&out, c, 4));
  EXPECT_EQ(out, 0.0f) << "a captured launch must not run";
  CUgraphExec exec;
  CU_ASSERT(cuGraphInstantiate(&exec, graph, 0));
  CU_ASSERT(cuGraphLaunch(exec, s));
  CU_ASSERT(cuStreamSynchronize(s));
  CU_ASSERT(cuMemcpyDtoH(&out, c, 4));
  EXPECT_EQ(out, 2.0f);
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuGraphDestroy(graph));
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(SimDriverTest, VmmMemoryHoldsHbmAndIsMapped) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t gran = 0;
  CU_ASSERT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CU_ASSERT(cuMemCreate(&h, 2 * gran, &prop, 0));
  size_t free = 0, total = 0;
  CU_ASSERT(cuMemGetInfo(&free, &total));
  EXPECT_EQ(total - free, 2 * gran);
  CUdeviceptr va;
  CU_ASSERT(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, 2 * gran, 0, h, 0));
  CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU_ASSERT(cuMemSetAccess(va, 2 * gran, &access, 1));
  CU_ASSERT(cuMemsetD8(va, 0x5a, 2 * gran));
  uint8_t byte = 0;
  CU_ASSERT(cuMemcpyDtoH(&byte, va + gran + 5, 1));
  EXPECT_EQ(byte, 0x5a);
  CU_ASSERT(cuMemUnmap(va, 2 * gran));
  CU_ASSERT(cuMemAddressFree(va, 2 * gran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, PointerAttributesDescribeAllocations) {
  CUdeviceptr m = Managed(3 * kMiB);
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, kMiB));
  int managed = -1;
  CU_ASSERT(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 5000));
  EXPECT_EQ(managed, 1);
  CU_ASSERT(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
  EXPECT_EQ(managed, 0);
  CUdeviceptr start = 0;
  size_t size = 0;
  CU_ASSERT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, m + kMiB));
  CU_ASSERT(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, m + kMiB));
  EXPECT_EQ(start, m);
  EXPECT_EQ(size, 3 * kMiB);
  EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, 0x10), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT(cuMemFree(d));
}

TEST_F(SimDriverTest, PrefetchOfNonManagedMemoryIsRejected) {
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, kMiB));
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemPrefetchAsync(d, kMiB, dev, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(d, kMiB, dev, 1, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT(cuMemFree(d));
}

TEST_F(SimDriverTest, MalformedModulesFailWithInvalidImage) {
  CUmodule m;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cuModuleLoadData(&m, "{\"format\": \"msim-module\", \"version\": 1, \"kernels\": [{"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoadData(&m, R"({"format":"msim-module","version":1,"kernels":[
      {"name":"k","params":[8],"accesses":[{"arg":"p3","extent":"4"}]}]})"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoadData(&m, R"({"format":"msim-module","version":1,"kernels":[
      {"name":"k","params":[8],"accesses":[{"arg":"p0","extent":"4*(p0"}]}]})"), CUDA_ERROR_INVALID_IMAGE);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kernel 'k'"), std::string::npos) << err;
  EXPECT_EQ(cuModuleLoad(&m, "/nonexistent/module.json"), CUDA_ERROR_FILE_NOT_FOUND);
}

TEST_F(SimDriverTest, ParamInfoAndNamesAnswerAsTheDriverDoes) {
  const char* name = nullptr;
  CU_ASSERT(cuFuncGetName(&name, vadd_));
  EXPECT_STREQ(name, "vadd");
  size_t off = 0, size = 0;
  CU_ASSERT(cuFuncGetParamInfo(vadd_, 3, &off, &size));
  EXPECT_EQ(off, 24u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(cuFuncGetParamInfo(vadd_, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
  CUkernel k;
  CUlibrary lib;
  CU_ASSERT(cuLibraryLoadData(&lib, kTestModule, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CU_ASSERT(cuLibraryGetKernel(&k, lib, "spin"));
  CU_ASSERT(cuKernelGetName(&name, k));
  EXPECT_STREQ(name, "spin");
  CUfunction f;
  CU_ASSERT(cuKernelGetFunction(&f, k));
  CU_ASSERT(cuFuncGetName(&name, f));
  EXPECT_STREQ(name, "spin");
  CU_ASSERT(cuLibraryUnload(lib));
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
}

void* Sym(const char* name) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h ? dlsym(h, name) : nullptr;
}

struct LookupCase {
  const char* base;
  int version;
  cuuint64_t flags;
  const char* symbol;  // expected exported symbol, or nullptr
  CUdriverProcAddressQueryResult status;
};

TEST_F(SimDriverTest, GetProcAddressHonoursVersionAndStreamFlag) {
  const cuuint64_t kPt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const LookupCase cases[] = {
      {"cuLaunchKernel", 12000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 12000, kPt, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 4000, kPt, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},  // no ptsz ABI before 7000
      {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemAlloc", 2000, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemPrefetchAsync", 12020, kPt, "cuMemPrefetchAsync_v2_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemPrefetchAsync", 8000, 0, "cuMemPrefetchAsync", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxSynchronize", 12080, 0, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemcpyHtoD", 7000, kPt, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 11030, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernelEx", 11000, 0, nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
      {"cuNoSuchEntryPoint", 13000, 0, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
      {"", 0, 0, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
  };
  for (const LookupCase& c : cases) {
    void* fn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult status;
    ASSERT_EQ(cuGetProcAddress(c.base, &fn, c.version, c.flags, &status), CUDA_SUCCESS) << c.base;
    EXPECT_EQ(status, c.status) << c.base << " " << c.version;
    EXPECT_EQ(fn, c.symbol ? Sym(c.symbol) : nullptr) << c.base << " " << c.version << " flags " << c.flags;
  }
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress("cuInit", &fn, 99000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, UnimplementedCallsAreCountedNotFatal) {
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Stats()["unsupported_calls"]["cuGetExportTable"], 2);
}

TEST_F(SimDriverTest, IllegalAccessIsStickyUntilSynchronisation) {
  // The poisoned context stays poisoned, so this runs in a child process.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CUdeviceptr bogus = 0x10000;  // nobody's allocation
    uint64_t bytes = 4096;
    void* params[] = {&bogus, &bytes};
    const CUresult launch = cuLaunchKernel(touch_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
    const CUresult sync = cuCtxSynchronize();
    _exit(launch == CUDA_SUCCESS && sync == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace msim_test

int main(int argc, char** argv) {
  msim_test::ConfigureSimulator();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

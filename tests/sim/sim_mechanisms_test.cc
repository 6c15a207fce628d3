// The simulated link on the h200-measured profile against the H200's own
// measurements (scripts/gpu-check.sh's um_mechanisms, 2026-11-27,
// bench/results/gpu-2026-11-27-h200.md): the same moves made on the
// simulator, each figure within 15% of the card's at 1 GiB. The kind of each
// move shows in the simulator's counters.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sim_driver_fixture.h"
#include "sim_test_util.h"

namespace msim_test {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr CUmemLocation kGpu{CU_MEM_LOCATION_TYPE_DEVICE, 0};

// GB/s of `bytes` moved in `ns` (bytes per nanosecond).
double Rate(uint64_t bytes, uint64_t ns) { return ns == 0 ? 0 : static_cast<double>(bytes) / static_cast<double>(ns); }

// `simulated` within 15% of what the H200 measured; printed either way.
void ExpectNear(const char* figure, double simulated, double measured) {
  std::printf("%-60s simulated %9.3f  H200 %9.3f  (%+.1f%%)\n", figure, simulated, measured,
              100.0 * (simulated - measured) / measured);
  EXPECT_NEAR(simulated, measured, 0.15 * measured) << figure;
}

class SimMechanismsTest : public SimDriverTest {
 protected:
  uint64_t Counter(const char* kind) { return Stats()["bytes"][kind].get<uint64_t>(); }
  // One cuMemPrefetchBatchAsync of [p, p + bytes) in 64 ranges.
  void Batch(CUdeviceptr p, uint64_t bytes, bool to_device) {
    constexpr size_t kRanges = 64;
    std::vector<CUdeviceptr> ptrs;
    std::vector<size_t> sizes(kRanges, bytes / kRanges);
    for (size_t i = 0; i < kRanges; ++i) ptrs.push_back(p + i * (bytes / kRanges));
    CUmemLocation where{to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST, 0};
    size_t first = 0;
    CUstream s = nullptr;
    ASSERT_EQ(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuMemPrefetchBatchAsync(ptrs.data(), sizes.data(), kRanges, &where, &first, 1, 0, s), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamDestroy(s), CUDA_SUCCESS);
  }
  // Managed memory of `bytes` made resident by first touch, then written by
  // the GPU: data the host has no pages for yet.
  CUdeviceptr GpuWritten(uint64_t bytes) {
    const CUdeviceptr p = Managed(bytes);
    Prefetch(p, bytes, true);
    Scribble(p, bytes);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return p;
  }
};

TEST_F(SimMechanismsTest, EachMoveCostsWhatTheH200Measured) {
  const CUdeviceptr fresh = Managed(kGiB);
  ExpectNear("first-touch prefetch to the GPU, 1 GiB never written (GB/s)",
             Rate(kGiB, Timed([&] { Prefetch(fresh, kGiB, true); })), 189.404);
  Scribble(fresh, kGiB);
  const uint64_t first_before = Counter("first_eviction");
  ExpectNear("eviction, first (GPU-written, no host pages yet) (GB/s)",
             Rate(kGiB, Timed([&] { Prefetch(fresh, kGiB, false); })), 5.701);
  EXPECT_EQ(Counter("first_eviction") - first_before, kGiB) << "counted as a first eviction";
  ExpectNear("bulk prefetch host to GPU, 1 GiB (GB/s)", Rate(kGiB, Timed([&] { Prefetch(fresh, kGiB, true); })),
             49.665);
  ExpectNear("batched eviction to host (64 ranges, GPU-resident clean) (GB/s)",
             Rate(kGiB, Timed([&] { Batch(fresh, kGiB, false); })), 10.367);
  ExpectNear("batched prefetch host to GPU (64 ranges) (GB/s)", Rate(kGiB, Timed([&] { Batch(fresh, kGiB, true); })),
             40.454);
  Prefetch(fresh, kGiB, false);
  Prefetch(fresh, kGiB, true);
  Scribble(fresh, kGiB);
  const uint64_t first_again = Counter("first_eviction");
  ExpectNear("eviction, again (GPU-written, evicted before) (GB/s)",
             Rate(kGiB, Timed([&] { Prefetch(fresh, kGiB, false); })), 13.924);
  EXPECT_EQ(Counter("first_eviction"), first_again) << "host pages exist: not a first eviction";

  // Read duplication: loading keeps the host copy; evicting drops the device's.
  CU_ASSERT(cuMemAdvise(fresh, kGiB, CU_MEM_ADVISE_SET_READ_MOSTLY, kGpu));
  ExpectNear("read-mostly prefetch host to GPU (GB/s)", Rate(kGiB, Timed([&] { Prefetch(fresh, kGiB, true); })),
             50.754);
  const uint64_t dropped_before = Counter("duplicate_dropped");
  ExpectNear("read-mostly eviction, duplicate dropped (ms)", Timed([&] { Prefetch(fresh, kGiB, false); }) / 1e6, 1.518);
  EXPECT_EQ(Counter("duplicate_dropped") - dropped_before, kGiB);
  CU_ASSERT(cuMemAdvise(fresh, kGiB, CU_MEM_ADVISE_UNSET_READ_MOSTLY, kGpu));

  // Discard, then evict: nothing is copied, but the discard is not free.
  const CUdeviceptr scratch = GpuWritten(kGiB);
  CUdeviceptr ptrs[] = {scratch};
  size_t sizes[] = {kGiB};
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const uint64_t copied_before = Stats()["bytes"]["d2h"]["prefetch"].get<uint64_t>();
  ExpectNear("discard then evict, 1 GiB (ms)", Timed([&] {
                                                 ASSERT_EQ(cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, s), CUDA_SUCCESS);
                                                 Prefetch(scratch, kGiB, false, s);
                                               }) / 1e6,
             66.894);
  EXPECT_EQ(Stats()["bytes"]["d2h"]["prefetch"].get<uint64_t>(), copied_before) << "discarded data is not copied";
  CU_ASSERT(cuStreamDestroy(s));
}

// A GPU write over read-duplicated data collapses the copies a page at a
// time (no data moves, but each page is a fault); unsetting the advice
// first drops the host's copies in bulk, and the write is then cheap.
TEST_F(SimMechanismsTest, WritingOverReadDuplicatesCostsWhatTheH200Measured) {
  const uint64_t size = 64 * kMiB;
  const auto duplicated = [&] {
    const CUdeviceptr p = GpuWritten(size);
    EXPECT_EQ(cuMemAdvise(p, size, CU_MEM_ADVISE_SET_READ_MOSTLY, kGpu), CUDA_SUCCESS);
    Prefetch(p, size, false);
    Prefetch(p, size, true);  // read-mostly: the host keeps its copy
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    return p;
  };
  const CUdeviceptr kept = duplicated();
  ExpectNear("GPU write over 64 MiB of read-mostly data, collapse by faults (ms)",
             Timed([&] { Scribble(kept, size); }) / 1e6, 1160.313);
  const CUdeviceptr unset = duplicated();
  ExpectNear("unset read-mostly on 64 MiB duplicated, then a GPU write over it (ms)",
             Timed([&] {
               ASSERT_EQ(cuMemAdvise(unset, size, CU_MEM_ADVISE_UNSET_READ_MOSTLY, kGpu), CUDA_SUCCESS);
               Scribble(unset, size);
             }) / 1e6,
             0.078 + 9.403);
}

// Small prefetches: the call's own cost, and more when it moves data.
TEST_F(SimMechanismsTest, SmallPrefetchesCostWhatTheH200Measured) {
  const CUdeviceptr p = GpuWritten(64 * kMiB);
  Prefetch(p, 64 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  constexpr int kCalls = 512;
  ExpectNear("stream time of a 64 KiB host-to-device prefetch (us)",
             Timed([&] {
               for (int i = 0; i < kCalls; ++i) Prefetch(p + i * 64 * 1024, 64 * 1024, true);
             }) / 1e3 /
                 kCalls,
             41.675);
  ExpectNear("stream time of a no-op prefetch, 2 MiB already resident (us)",
             Timed([&] {
               for (int i = 0; i < kCalls; ++i) Prefetch(p, 2 * kMiB, true);
             }) / 1e3 /
                 kCalls,
             5.629);
  Scribble(p, 2 * kMiB);
  ExpectNear("prefetch of a 64 KiB slice of a GPU-written 2 MiB chunk to host (us)",
             Timed([&] {
               for (int i = 0; i < 32; ++i) Prefetch(p + i * 64 * 1024, 64 * 1024, false);
             }) / 1e3 /
                 32,
             39.140);
}

// An eviction's call returns only when its copy is done (nvidia-uvm maps the
// host pages after it), so a load issued next on another stream starts
// after it: the H200's "both directions at once" row is the two one after
// the other, and the caller's clock has moved by the whole copy.
TEST_F(SimMechanismsTest, AnEvictionsCallWaitsForItsCopyAndTheLoadAfterIt) {
  const uint64_t half = kGiB / 2;
  const CUdeviceptr out = GpuWritten(half);
  Prefetch(out, half, false);  // host pages now: the next eviction is not a first one
  Prefetch(out, half, true);
  Scribble(out, half);
  const CUdeviceptr in = GpuWritten(half);
  Prefetch(in, half, false);
  CU_ASSERT(cuCtxSynchronize());
  CUstream a = nullptr, b = nullptr;
  CU_ASSERT(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  ExpectNear("evict 0.5 GiB while loading 0.5 GiB on two streams (GB/s)", Rate(kGiB, Timed([&] {
                                                                                 Prefetch(out, half, false, a);
                                                                                 Prefetch(in, half, true, b);
                                                                               })),
             21.789);
  CU_ASSERT(cuStreamDestroy(a));
  CU_ASSERT(cuStreamDestroy(b));
  // The call alone, no synchronisation after it: the caller waited for
  // the half GiB to cross at the eviction's rate (11.9 GB/s: 45 ms).
  Prefetch(out, half, true);
  Scribble(out, half);
  CU_ASSERT(cuCtxSynchronize());
  const uint64_t before = Now();
  Prefetch(out, half, false);
  EXPECT_GE(Now() - before, half * 1000 / 11900 * 95 / 100) << "the caller waits for the copy";
}

TEST_F(SimMechanismsTest, ALoneFaultAndFaultDrivenMigrationCostWhatTheH200Measured) {
  const CUdeviceptr word = GpuWritten(2 * kMiB);
  Prefetch(word, 2 * kMiB, false);
  CU_ASSERT(cuCtxSynchronize());
  const uint64_t stall = Stats()["fault_stall_ns"].get<uint64_t>();
  Spin(word, 1, nullptr);
  CU_ASSERT(cuCtxSynchronize());
  ExpectNear("one lone GPU fault, host-resident (us)", (Stats()["fault_stall_ns"].get<uint64_t>() - stall) / 1e3,
             50.195);
  const CUdeviceptr data = GpuWritten(kGiB);
  Prefetch(data, kGiB, false);
  CU_ASSERT(cuCtxSynchronize());
  ExpectNear("fault-driven migration host to GPU, 1 GiB (GB/s)", Rate(kGiB, Timed([&] { Touch(data, kGiB); })), 6.515);
}

}  // namespace
}  // namespace msim_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  setenv("MSIM_HBM_BYTES", std::to_string(8ull << 30).c_str(), 1);  // room for every range at once
  setenv("MSIM_PROFILE", "h200-measured", 1);
  unsetenv("MSIM_DEVICE");
  return RUN_ALL_TESTS();
}

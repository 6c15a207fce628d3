// Tests of the simulated driver's VMM API (cuMemCreate, cuMemMap and the
// rest) against the driver's rules: reference-counted handles whose memory
// lives while mapped, reservations, mappings of whole granules that never
// overlap, unmapping of whole mappings only, access that must be granted
// before a kernel or a copy may touch the memory, and fault injection.
// Each test leaves no memory behind (the fixture checks); what poisons the
// context or might crash runs in a forked child, which allocates nothing.
#include <cudaTypedefs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "sim_driver_fixture.h"
#include "sim_test_util.h"

namespace msim_test {
namespace {

constexpr uint64_t kGran = 2 * kMiB;  // the granularity cuMemGetAllocationGranularity gives

CUmemAllocationProp Pinned() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  return prop;
}

CUmemGenericAllocationHandle Create(uint64_t bytes) {
  const CUmemAllocationProp prop = Pinned();
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(cuMemCreate(&h, bytes, &prop, 0), CUDA_SUCCESS);
  return h;
}

CUdeviceptr Reserve(uint64_t bytes) {
  CUdeviceptr va = 0;
  EXPECT_EQ(cuMemAddressReserve(&va, bytes, 0, 0, 0), CUDA_SUCCESS);
  return va;
}

CUresult SetAccess(CUdeviceptr va, uint64_t bytes, CUmemAccess_flags flags) {
  const CUmemAccessDesc desc{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, flags};
  return cuMemSetAccess(va, bytes, &desc, 1);
}

uint64_t UsedBytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
  return total - free;
}

// Runs `fn` in a forked child (a poisoned context stays poisoned, and a
// crash must fail the test, not end the program): its exit code, or 128 +
// the signal that ended it. The child must not allocate: the device it
// shares with this process keeps whatever it held.
int InChild(const std::function<int()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether `kernel` launched over 4 KiB at `va`, in a child process, ends in
// an illegal address at the next synchronisation (0), or how it went wrong.
int IllegalAddressInChild(CUfunction kernel, CUdeviceptr va) {
  return InChild([&] {
    CUdeviceptr p = va;
    uint64_t bytes = 4096;
    void* params[] = {&p, &bytes};
    if (cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS) return 1;
    return cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 2;
  });
}

TEST_F(SimDriverTest, VmmReleaseWhileMappedKeepsTheMemoryUntilUnmapped) {
  const CUmemGenericAllocationHandle h = Create(2 * kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va, 2 * kGran, 0, h, 0));
  CU_ASSERT(SetAccess(va, 2 * kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemsetD8(va, 0x7e, 2 * kGran));
  CU_ASSERT(cuMemRelease(h));
  EXPECT_EQ(UsedBytes(), 2 * kGran) << "released but still mapped";
  uint8_t byte = 0;
  CU_ASSERT(cuMemcpyDtoH(&byte, va + kGran, 1));
  EXPECT_EQ(byte, 0x7e) << "the mapping still shows its memory";
  CU_ASSERT(cuMemUnmap(va, 2 * kGran));
  EXPECT_EQ(UsedBytes(), 0u) << "no reference and no mapping: freed";
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
}

TEST_F(SimDriverTest, VmmRetainReturnsTheMappingsHandleAndNeedsItsOwnRelease) {
  const CUmemGenericAllocationHandle h = Create(2 * kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va, 2 * kGran, 0, h, 0));
  CUmemGenericAllocationHandle retained = 0;
  CU_ASSERT(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + kGran + 123)));
  EXPECT_EQ(retained, h);
  CU_ASSERT(cuMemRelease(h));
  CUmemAllocationProp prop{};
  CU_ASSERT(cuMemGetAllocationPropertiesFromHandle(&prop, h));  // the retained reference holds it
  CU_ASSERT(cuMemRelease(retained));
  EXPECT_EQ(cuMemGetAllocationPropertiesFromHandle(&prop, h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE) << "one release too many";
  CU_ASSERT(cuMemUnmap(va, 2 * kGran));
  EXPECT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)), CUDA_ERROR_INVALID_VALUE)
      << "nothing is mapped there";
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
}

TEST_F(SimDriverTest, VmmAReleasedHandleIsRefusedByMap) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(kGran);
  CU_ASSERT(cuMemRelease(h));
  EXPECT_EQ(cuMemMap(va, kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(UsedBytes(), 0u);
  CU_ASSERT(cuMemAddressFree(va, kGran));
}

TEST_F(SimDriverTest, VmmPropertiesFromAHandleArePinnedOnDeviceZero) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  CU_ASSERT(cuMemGetAllocationPropertiesFromHandle(&prop, h));
  EXPECT_EQ(prop.type, CU_MEM_ALLOCATION_TYPE_PINNED);
  EXPECT_EQ(prop.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(prop.location.id, 0);
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmReservationsHonourAlignmentAndWholeGranules) {
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, kGran, 8 * kGran, 0, 0));
  EXPECT_EQ(va % (8 * kGran), 0u);
  CU_ASSERT(cuMemAddressFree(va, kGran));
  EXPECT_EQ(cuMemAddressReserve(&va, kGran + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAddressReserve(&va, kGran, kGran / 2, 0, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, VmmMapRefusesRangesMappedOutsideAReservationMisalignedOrPastTheHandlesEnd) {
  const CUmemGenericAllocationHandle h = Create(2 * kGran);
  const CUdeviceptr va = Reserve(3 * kGran);
  CU_ASSERT(cuMemMap(va + kGran, kGran, 0, h, 0));
  EXPECT_EQ(cuMemMap(va + kGran, kGran, kGran, h, 0), CUDA_ERROR_INVALID_VALUE) << "over a mapping";
  EXPECT_EQ(cuMemMap(va, 2 * kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "its end over a mapping";
  EXPECT_EQ(cuMemMap(va + 2 * kGran, 2 * kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "past the reservation";
  const CUdeviceptr elsewhere = Reserve(kGran);
  EXPECT_EQ(cuMemMap(elsewhere + kGran, kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "in no reservation";
  EXPECT_EQ(cuMemMap(va + 4096, kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "misaligned address";
  EXPECT_EQ(cuMemMap(va, kGran + 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "misaligned size";
  EXPECT_EQ(cuMemMap(va, kGran, 4096, h, 0), CUDA_ERROR_INVALID_VALUE) << "misaligned offset";
  EXPECT_EQ(cuMemMap(va, kGran, 2 * kGran, h, 0), CUDA_ERROR_INVALID_VALUE) << "past the handle's end";
  EXPECT_EQ(cuMemMap(va, kGran, 0, h, 1), CUDA_ERROR_INVALID_VALUE) << "flags";
  CU_ASSERT(cuMemMap(va, kGran, kGran, h, 0));  // what is left is free to map
  CU_ASSERT(cuMemUnmap(va, 2 * kGran));
  CU_ASSERT(cuMemAddressFree(elsewhere, kGran));
  CU_ASSERT(cuMemAddressFree(va, 3 * kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmUnmappingPartOfAMappingIsRefusedAndChangesNothing) {
  const CUmemGenericAllocationHandle h = Create(2 * kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va, 2 * kGran, 0, h, 0));
  CU_ASSERT(SetAccess(va, 2 * kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemsetD8(va, 0x42, 2 * kGran));
  EXPECT_EQ(cuMemUnmap(va, kGran), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemUnmap(va + kGran, kGran), CUDA_ERROR_INVALID_VALUE);
  std::vector<uint8_t> back(2 * kGran);
  CU_ASSERT(cuMemcpyDtoH(back.data(), va, back.size()));
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x42), static_cast<long>(back.size()));
  CU_ASSERT(cuMemUnmap(va, 2 * kGran));
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmAdjacentMappingsTakeAccessCopiesAndUnmapInOneCall) {
  const CUmemGenericAllocationHandle a = Create(kGran), b = Create(2 * kGran);
  const CUdeviceptr va = Reserve(3 * kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, a, 0));
  CU_ASSERT(cuMemMap(va + kGran, 2 * kGran, 0, b, 0));
  CU_ASSERT(SetAccess(va, 3 * kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemsetD8(va, 1, kGran));
  CU_ASSERT(cuMemsetD8(va + kGran, 2, 2 * kGran));
  // Copies and memsets cross from one mapping to the next, as on the driver.
  std::vector<uint8_t> host(2 * kGran);
  CU_ASSERT(cuMemcpyDtoH(host.data(), va + kGran / 2, host.size()));
  EXPECT_EQ(host.front(), 1);
  EXPECT_EQ(host.back(), 2);
  CU_ASSERT(cuMemsetD8(va + kGran - 1, 3, 2));
  CU_ASSERT(cuMemcpyDtoH(host.data(), va + kGran - 1, 2));
  EXPECT_EQ(host[0], 3);
  EXPECT_EQ(host[1], 3);
  std::fill(host.begin(), host.end(), 4);
  CU_ASSERT(cuMemcpyHtoD(va, host.data(), host.size()));
  EXPECT_EQ(cuMemcpyHtoD(va + kGran, host.data(), host.size() + 1), CUDA_ERROR_INVALID_VALUE) << "past the last";
  CU_ASSERT(cuMemRelease(a));
  CU_ASSERT(cuMemRelease(b));
  EXPECT_EQ(cuMemUnmap(va + kGran, kGran), CUDA_ERROR_INVALID_VALUE) << "half of the second mapping";
  CU_ASSERT(cuMemUnmap(va, 3 * kGran));
  EXPECT_EQ(UsedBytes(), 0u);
  CU_ASSERT(cuMemAddressFree(va, 3 * kGran));
}

TEST_F(SimDriverTest, VmmAHandleMappedTwiceShowsTheSameBytesAtBothAddresses) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr one = Reserve(kGran), two = Reserve(kGran);
  CU_ASSERT(cuMemMap(one, kGran, 0, h, 0));
  CU_ASSERT(cuMemMap(two, kGran, 0, h, 0));
  CU_ASSERT(SetAccess(one, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(SetAccess(two, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  EXPECT_EQ(UsedBytes(), kGran) << "one physical allocation";
  const uint32_t word = 0xfeedf00d;
  CU_ASSERT(cuMemcpyHtoD(one + 4096, &word, sizeof word));
  uint32_t back = 0;
  CU_ASSERT(cuMemcpyDtoH(&back, two + 4096, sizeof back));
  EXPECT_EQ(back, word);
  CU_ASSERT(cuMemUnmap(one, kGran));
  CU_ASSERT(cuMemUnmap(two, kGran));
  CU_ASSERT(cuMemAddressFree(one, kGran));
  CU_ASSERT(cuMemAddressFree(two, kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmSetAccessNeedsTheRangeMappedThroughoutOnDeviceZero) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, h, 0));
  EXPECT_EQ(SetAccess(va, 2 * kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(SetAccess(va + kGran, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
  const CUmemAccessDesc other{{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_EQ(cuMemSetAccess(va, kGran, &other, 1), CUDA_ERROR_INVALID_DEVICE);
  CU_ASSERT(SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemUnmap(va, kGran));
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmAKernelTouchingAMappingBeforeSetAccessIsAnIllegalAddress) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, h, 0));
  EXPECT_EQ(IllegalAddressInChild(touch_, va), 0);
  CU_ASSERT(cuMemUnmap(va, kGran));
  CU_ASSERT(cuMemAddressFree(va, kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmAKernelTouchingAnUnmappedRangeIsAnIllegalAddress) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, h, 0));
  CU_ASSERT(SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemUnmap(va, kGran));
  EXPECT_EQ(IllegalAddressInChild(scribble_, va), 0);
  CU_ASSERT(cuMemAddressFree(va, kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmACopyToOrFromAnInaccessibleRangeFailsWithoutCrashing) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, h, 0));  // no access granted; the second granule unmapped
  EXPECT_EQ(InChild([&] {
              std::vector<uint8_t> host(4096, 1);
              const CUdeviceptr unmapped = va + kGran;
              int failed = 0;
              for (CUdeviceptr p : {va, unmapped}) {
                failed += cuMemcpyHtoD(p, host.data(), host.size()) != CUDA_SUCCESS;
                failed += cuMemcpyDtoH(host.data(), p, host.size()) != CUDA_SUCCESS;
                failed += cuMemcpy(p, reinterpret_cast<CUdeviceptr>(host.data()), host.size()) != CUDA_SUCCESS;
                failed += cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), p, host.size()) != CUDA_SUCCESS;
                failed += cuMemsetD8(p, 0, host.size()) != CUDA_SUCCESS;
              }
              // Access granted then revoked: inaccessible again.
              if (SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE) != CUDA_SUCCESS ||
                  SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_NONE) != CUDA_SUCCESS) {
                return 100;
              }
              failed += cuMemcpyDtoH(host.data(), va, host.size()) != CUDA_SUCCESS;
              return failed == 11 ? 0 : 1;
            }),
            0);
  CU_ASSERT(cuMemUnmap(va, kGran));
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmReadOnlyAccessLetsCopiesReadButNotWrite) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(kGran);
  CU_ASSERT(cuMemMap(va, kGran, 0, h, 0));
  CU_ASSERT(SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemsetD8(va, 9, kGran));
  CU_ASSERT(SetAccess(va, kGran, CU_MEM_ACCESS_FLAGS_PROT_READ));
  uint8_t byte = 0;
  CU_ASSERT(cuMemcpyDtoH(&byte, va + 7, 1));
  EXPECT_EQ(byte, 9);
  EXPECT_NE(cuMemcpyHtoD(va, &byte, 1), CUDA_SUCCESS);
  EXPECT_NE(cuMemsetD8(va, 0, 1), CUDA_SUCCESS);
  CU_ASSERT(cuMemUnmap(va, kGran));
  CU_ASSERT(cuMemAddressFree(va, kGran));
  CU_ASSERT(cuMemRelease(h));
}

// An export is a file descriptor of the memory, for a handle created
// asking for one; its import maps the same bytes and holds no HBM of its
// own (the exporter's).
TEST_F(SimDriverTest, VmmAnExportedHandleImportedMapsTheSameMemory) {
  CUmemAllocationProp prop = Pinned();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle h = 0, plain = Create(kGran);
  CU_ASSERT(cuMemCreate(&h, kGran, &prop, 0));
  int fd = -1;
  EXPECT_EQ(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE)
      << "not created exportable";
  CU_ASSERT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  const uint64_t used = UsedBytes();
  CUmemGenericAllocationHandle imported = 0;
  CU_ASSERT(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(intptr_t{fd}),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  EXPECT_EQ(UsedBytes(), used) << "the exporter's memory, counted once";
  const CUdeviceptr a = Reserve(kGran), b = Reserve(kGran);
  CU_ASSERT(cuMemMap(a, kGran, 0, h, 0));
  CU_ASSERT(cuMemMap(b, kGran, 0, imported, 0));
  CU_ASSERT(SetAccess(a, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(SetAccess(b, kGran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  CU_ASSERT(cuMemsetD8(a, 0x3c, kGran));
  uint8_t byte = 0;
  CU_ASSERT(cuMemcpyDtoH(&byte, b + 100, 1));
  EXPECT_EQ(byte, 0x3c);
  for (CUdeviceptr va : {a, b}) {
    CU_ASSERT(cuMemUnmap(va, kGran));
    CU_ASSERT(cuMemAddressFree(va, kGran));
  }
  for (CUmemGenericAllocationHandle handle : {h, imported, plain}) CU_ASSERT(cuMemRelease(handle));
  close(fd);
  EXPECT_EQ(UsedBytes(), 0u);
}

TEST_F(SimDriverTest, VmmAddressFreeWithAMappingInsideIsRefused) {
  const CUmemGenericAllocationHandle h = Create(kGran);
  const CUdeviceptr va = Reserve(2 * kGran);
  CU_ASSERT(cuMemMap(va + kGran, kGran, 0, h, 0));
  EXPECT_EQ(cuMemAddressFree(va, 2 * kGran), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT(cuMemUnmap(va + kGran, kGran));
  EXPECT_EQ(cuMemAddressFree(va, kGran), CUDA_ERROR_INVALID_VALUE) << "not the whole reservation";
  CU_ASSERT(cuMemAddressFree(va, 2 * kGran));
  EXPECT_EQ(cuMemAddressFree(va, 2 * kGran), CUDA_ERROR_INVALID_VALUE) << "freed already";
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, VmmHandleCallsAreFoundByNameThroughGetProcAddress) {
  void* retain = nullptr;
  void* properties = nullptr;
  CU_ASSERT(cuGetProcAddress("cuMemRetainAllocationHandle", &retain, 12000, 0, nullptr));
  CU_ASSERT(cuGetProcAddress("cuMemGetAllocationPropertiesFromHandle", &properties, 12000, 0, nullptr));
  ASSERT_NE(retain, nullptr);
  ASSERT_NE(properties, nullptr);
  // Implemented, not the unimplemented stub's CUDA_ERROR_NOT_SUPPORTED.
  EXPECT_EQ(reinterpret_cast<PFN_cuMemRetainAllocationHandle_v11000>(retain)(nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(reinterpret_cast<PFN_cuMemGetAllocationPropertiesFromHandle_v10020>(properties)(nullptr, 0),
            CUDA_ERROR_INVALID_VALUE);
}

// A fresh process's first cuMemMap fails, with no effect: the next maps.
int FirstMapFailsAndTheNextWorks() {
  const CUmemAllocationProp prop = Pinned();
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  if (cuMemCreate(&h, kGran, &prop, 0) || cuMemAddressReserve(&va, kGran, 0, 0, 0)) return 1;
  if (cuMemMap(va, kGran, 0, h, 0) != CUDA_ERROR_OUT_OF_MEMORY) return 2;
  if (cuMemMap(va, kGran, 0, h, 0) != CUDA_SUCCESS) return 3;
  return 0;
}

TEST_F(SimDriverTest, VmmMsimFailOnMemMapFailsThatCall) {
  // MSIM_FAIL is read once per process, so the calls run in a new one: a
  // threadsafe death test runs this program again for this test alone.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("MSIM_FAIL", "cuMemMap:1:CUDA_ERROR_OUT_OF_MEMORY", 1);
  EXPECT_EXIT(_exit(FirstMapFailsAndTheNextWorks()), testing::ExitedWithCode(0), "MSIM_FAIL: cuMemMap call 1 fails");
  unsetenv("MSIM_FAIL");
}

}  // namespace
}  // namespace msim_test

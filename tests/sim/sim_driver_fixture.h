// SimDriverTest: the simulated driver initialised once per test program,
// with the test module's kernels loaded, and helpers that allocate, launch,
// prefetch and time on it. Shared by sim_driver_test.cc and
// sim_driver_api_test.cc.
#pragma once

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sim_test_util.h"

#include "sim_test_util.h"

namespace msim_test {

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

inline CUcontext SimDriverTest::ctx_;
inline CUmodule SimDriverTest::module_;
inline CUfunction SimDriverTest::touch_, SimDriverTest::scribble_, SimDriverTest::spin_, SimDriverTest::vadd_;

}  // namespace msim_test

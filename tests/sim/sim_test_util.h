// Helpers for tests that drive the simulated driver directly: one driver per
// test process, configured before cuInit by the test's main (a 64 MiB device
// with the rtx5080-pcie5 profile), statistics read back as JSON, and the
// test kernels. Confined to one thread.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "msim/msim.h"

#define CU_ASSERT(expr)                                                \
  do {                                                                 \
    const CUresult r_ = (expr);                                        \
    const char* n_ = nullptr;                                          \
    cuGetErrorName(r_, &n_);                                           \
    ASSERT_EQ(r_, CUDA_SUCCESS) << #expr << " -> " << (n_ ? n_ : "?"); \
  } while (0)

namespace msim_test {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kDeviceBytes = 64 * kMiB;

// Kernels for timing: `touch` reads p1 bytes at p0 (cost: those bytes at HBM
// speed), `scribble` writes them; `spin` touches one page and runs p1 flops.
inline constexpr const char* kTestModule = R"({"format":"msim-module","version":1,"kernels":[
  {"name":"touch","params":[8,8],"accesses":[{"arg":"p0","mode":"read","extent":"p1"}],"cost":{"bytes":"p1"}},
  {"name":"scribble","params":[8,8],"accesses":[{"arg":"p0","mode":"write","extent":"p1"}],"cost":{"bytes":"p1"}},
  {"name":"spin","params":[8,8],"accesses":[{"arg":"p0","mode":"read","extent":"4096"}],"cost":{"flops":"p1"}},
  {"name":"vadd","params":[8,8,8,8],"host":"vector_add_f32",
   "accesses":[{"arg":"p0","mode":"read","extent":"4*p3"},{"arg":"p1","mode":"read","extent":"4*p3"},
               {"arg":"p2","mode":"write","extent":"4*p3"}],"cost":{"bytes":"12*p3"}}]})";

// Sets the environment the simulator reads at cuInit. Call from main.
inline void ConfigureSimulator() {
  setenv("MSIM_HBM_BYTES", std::to_string(kDeviceBytes).c_str(), 1);
  setenv("MSIM_PROFILE", "rtx5080-pcie5", 1);
  unsetenv("MSIM_DEVICE");
}

inline nlohmann::json Stats() {
  size_t size = 0;
  msimStatsJson(nullptr, 0, &size);
  std::string text(size, '\0');
  msimStatsJson(text.data(), text.size(), &size);
  return nlohmann::json::parse(text.c_str());
}

inline uint64_t Now() {
  uint64_t t = 0;
  msimGetTime(&t);
  return t;
}

}  // namespace msim_test

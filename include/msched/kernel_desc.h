// File: msched/kernel_desc.h
// How msched names a kernel's parameters and launch shape: the parameter
// layout (as cuFuncGetParamInfo reports it), references to 32/64-bit words
// inside parameters (ArgRef), and launch dimensions. Plain value types,
// thread-compatible. Included by src/, hook/ and the tools.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace msched {

// One kernel parameter: byte offset in the packed argument buffer, and size.
struct ParamInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
  auto operator<=>(const ParamInfo&) const = default;
};
using ParamLayout = std::vector<ParamInfo>;

// Largest parameter layout msched decodes; kernels with more parameters are
// treated as unknown (CUDA allows 32 KiB of parameters, typical kernels < 64).
inline constexpr size_t kMaxParams = 1024;

// A 32- or 64-bit word inside parameter `param`, at byte `offset` in it.
// A struct parameter holding pointers and sizes is seen as several words.
struct ArgRef {
  uint16_t param = 0;
  uint16_t offset = 0;
  uint8_t width = 8;  // 4 or 8

  bool operator==(const ArgRef&) const = default;
  bool operator<(const ArgRef& o) const {
    if (param != o.param) return param < o.param;
    if (offset != o.offset) return offset < o.offset;
    return width < o.width;
  }
};
// "p3", "p3+8", "p3+8:u32": the text form used in templates files and reports.
std::string ArgRefToString(const ArgRef& ref);

struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_mem = 0;
};

}  // namespace msched

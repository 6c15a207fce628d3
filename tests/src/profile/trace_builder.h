// Building profile traces in tests: allocations, and launches whose
// parameters are 8-byte words (or raw bytes for structs) and whose touched
// ranges are given exactly. Test-only; thread-compatible.
#pragma once

#include <cstring>
#include <initializer_list>
#include <vector>

#include "profile/template_fitter.h"
#include "profile/trace.h"

namespace msched::tracetest {

class TraceBuilder {
 public:
  explicit TraceBuilder(uint64_t precision = 1) {
    trace_.source = "simulator";
    trace_.precision = precision;
  }
  TraceBuilder& Alloc(uint64_t base, uint64_t size) {
    trace_.allocs.push_back({true, base, size});
    return *this;
  }
  TraceBuilder& Free(uint64_t base) {
    trace_.allocs.push_back({false, base, 0});
    return *this;
  }
  // A launch of `kernel` whose parameters are the given 64-bit words.
  TraceBuilder& Launch(const std::string& kernel, std::initializer_list<uint64_t> words,
                       std::vector<TouchedRange> touched, uint32_t grid_x = 1, uint32_t block_x = 1) {
    std::vector<std::vector<uint8_t>> params;
    for (uint64_t w : words) {
      std::vector<uint8_t> bytes(8);
      std::memcpy(bytes.data(), &w, 8);
      params.push_back(std::move(bytes));
    }
    return LaunchBytes(kernel, std::move(params), std::move(touched), grid_x, block_x);
  }
  // A launch with parameters given as raw bytes (structs, 4-byte integers).
  TraceBuilder& LaunchBytes(const std::string& kernel, std::vector<std::vector<uint8_t>> params,
                            std::vector<TouchedRange> touched, uint32_t grid_x = 1, uint32_t block_x = 1) {
    TraceLaunch l;
    l.seq = trace_.launches.size() + 1;
    l.kernel = kernel;
    uint32_t offset = 0;
    for (const auto& p : params) {
      const uint32_t size = static_cast<uint32_t>(p.size());
      const uint32_t align = size >= 8 ? 8 : size;  // natural alignment, as a compiler lays parameters out
      offset = (offset + align - 1) / align * align;
      l.layout.push_back({offset, size});
      offset += size;
    }
    l.args = std::move(params);
    l.dims.grid[0] = grid_x;
    l.dims.block[0] = block_x;
    l.touched = std::move(touched);
    l.alloc_epoch = trace_.allocs.size();
    trace_.launches.push_back(std::move(l));
    return *this;
  }
  const Trace& trace() const { return trace_; }

 private:
  Trace trace_;
};

inline TouchedRange Read(uint64_t begin, uint64_t end) { return {{begin, end}, AccessMode::kRead}; }
inline TouchedRange Write(uint64_t begin, uint64_t end) { return {{begin, end}, AccessMode::kWrite}; }

// Fits every launch of the trace as one kernel.
inline KernelFit FitAll(const Trace& t) {
  const std::vector<Observation> obs = Observe(t);
  std::vector<const Observation*> ptrs;
  for (const Observation& o : obs) ptrs.push_back(&o);
  return FitKernel(ptrs, t.precision);
}

template <typename T>
std::vector<uint8_t> Bytes(const T& value) {
  std::vector<uint8_t> b(sizeof value);
  std::memcpy(b.data(), &value, sizeof value);
  return b;
}

}  // namespace msched::tracetest

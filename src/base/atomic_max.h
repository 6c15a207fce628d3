// Raising an atomic counter to at least a value, whatever other threads
// write to it meanwhile: for counts that only ever grow (a maximum, the
// last answered of numbered requests). Header-only; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace msched {

// Stores `v` in `a` unless `a` already holds as much; a store is made with
// `order`.
inline void RaiseAtLeast(std::atomic<uint64_t>& a, uint64_t v, std::memory_order order = std::memory_order_seq_cst) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, order)) {
  }
}

}  // namespace msched

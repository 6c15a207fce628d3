// Writes the access log (msim/access_log.h) when MSIM_ACCESS_LOG names a
// file; does nothing otherwise. Called with the process lock held, so
// records never interleave. Used by sim/ only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace msim {

class AccessLog {
 public:
  // The process's log, or nullptr when MSIM_ACCESS_LOG is unset or cannot
  // be opened (said once on stderr). Flushed at exit.
  static AccessLog* Get();

  // One device-side operation: (block address, unit mask) pairs.
  void Operation(const std::vector<std::pair<uint64_t, uint32_t>>& blocks);
  void Free(uint64_t begin, uint64_t end);

 private:
  explicit AccessLog(std::FILE* f) : f_(f) {}
  std::FILE* f_;
};

}  // namespace msim

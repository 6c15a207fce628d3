// The simulator's access log (MSIM_ACCESS_LOG=<file>): every managed
// 64 KiB unit each device-side operation of the process touched, in issue
// order, and every managed allocation freed, so that a reader can replay the
// exact access sequence (the benchmark computes Belady's minimum traffic
// from it). Little-endian records, after the 8-byte magic:
//   'K' u32 n, then n x (u64 block address, u32 unit mask): one operation;
//       a block is 2 MiB of an allocation from its base, bit i its unit i
//   'F' u64 begin, u64 end: the allocation [begin, end) was freed; later
//       accesses there are to new memory
// Header-only contract between sim/ and its readers.
#pragma once

#include <cstdint>

namespace msim::access_log {

inline constexpr char kMagic[8] = {'m', 's', 'i', 'm', 'a', 'c', 'c', '1'};
inline constexpr uint64_t kUnitBytes = 64 * 1024;
inline constexpr uint32_t kUnitsPerBlock = 32;
inline constexpr char kOperation = 'K';
inline constexpr char kFree = 'F';

}  // namespace msim::access_log

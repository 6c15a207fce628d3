// The simulator's access log (MSIM_ACCESS_LOG=<file>): every managed
// 64 KiB unit each device-side operation of the process (kernels, memsets,
// device-to-device copies) touched, in issue order, and every managed
// allocation freed or range discarded, so that a reader can replay the
// exact access sequence (the benchmark computes Belady's minimum traffic
// from it). Little-endian records, after the 8-byte magic:
//   'K' u32 n, then n x (u64 block address, u32 unit mask): one operation;
//       a block is 2 MiB of an allocation from its base, bit i its unit i
//   'F' u64 begin, u64 end: [begin, end) was freed or discarded; later
//       accesses there are to new memory (filled without a transfer)
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

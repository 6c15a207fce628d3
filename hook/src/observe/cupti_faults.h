// What a kernel touched, on a real GPU: CUPTI's unified-memory records.
// Each GPU page fault (a page, with its access type) and each host-to-device
// migration (the driver's 64 KiB upgrade and 2 MiB-block prefetch included;
// counted a read) becomes a record, matched to a kernel by time: profiled
// launches are serialised and managed memory is moved to the host before
// each, so its first touches fault. TouchedByMode
// (src/profile/touched_modes.h) makes them the launch's touched ranges.
// CUPTI is loaded lazily (dlopen of libcupti.so.13), so libmsched never
// depends on it. Only one subscriber per process is allowed: when another
// tool (Nsight, the PyTorch profiler) holds CUPTI, Start fails and says so.
// Thread-safe. Used by the profile recorder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/trace.h"

namespace msched::hook {

class CuptiFaults {
 public:
  // Starts collection; nullptr with *why when CUPTI cannot be used. Call
  // after the driver is initialised.
  static CuptiFaults* Start(std::string* why);
  // CUPTI's clock (the records' time base).
  uint64_t Now();
  // The records of faults and migrations to the GPU between t0 and t1, in
  // the order CUPTI delivered them.
  std::vector<TouchedRange> Collect(uint64_t t0, uint64_t t1);

  // The granularity those ranges have, for the trace header.
  static constexpr uint64_t kPrecision = 64 * 1024;
};

}  // namespace msched::hook

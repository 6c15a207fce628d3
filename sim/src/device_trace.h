// The simulated device's own timeline (MSIM_TRACE=DIR): what the device did
// for this process, on the virtual clock, as Chrome trace events in
// DIR/msim-<pid>.json (docs/simulator.md, "The device's timeline"):
//   - its operations on the compute engine (kernels, device-side copies,
//     memsets), each from its start to its end, fault stalls included;
//   - its transfers on each direction of the link: prefetches, copies, and
//     the driver's evictions made for its operations;
//   - the fault batches that stalled its kernels.
// Events carry the process's pid and the tracks of msched/trace_layout.h, so
// the file merges with msched's timeline by concatenation (docs/tracing.md).
// Spans that follow each other without a gap on one track are written as one
// (on a link track, only spans of one kind; a compute span of several
// operations says how many, named by its kernel when all ran the same one),
// which keeps a long run's file small while every idle gap of each engine
// stays visible. Thread-safe. Used by sim/ only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace msim {

class DeviceTrace {
 public:
  enum class Track { kCompute, kToDevice, kToHost, kFaults };

  // The process's timeline, or nullptr when MSIM_TRACE is unset or the file
  // cannot be created (said once on stderr). Closed at exit.
  static DeviceTrace* Get();

  // The device worked on `track` over [begin, end) ns for `name`, moving
  // `bytes` (0 on the compute track). Empty spans are left out.
  void Span(Track track, const std::string& name, uint64_t begin, uint64_t end, uint64_t bytes);

 private:
  // The span being extended on one track.
  struct Open {
    std::string name;
    uint64_t begin = 0, end = 0, bytes = 0, operations = 0;
    bool mixed = false;  // operations of several names
  };
  static constexpr int kTracks = 4;
  // Past this size spans are dropped and counted (said in the file's last event).
  static constexpr uint64_t kMaxBytes = uint64_t{256} << 20;

  DeviceTrace(std::FILE* f, int64_t pid) : f_(f), pid_(pid) {}
  void Write(Track track, const Open& s);
  void Close();

  std::mutex mu_;
  std::FILE* f_;
  const int64_t pid_;
  uint64_t bytes_ = 0;
  uint64_t dropped_ = 0;
  bool closed_ = false;
  Open open_[kTracks];
};

}  // namespace msim

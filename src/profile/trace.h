// The profile trace msched-profile records (through the hook in profile
// mode) and analyses: JSON lines, one record each, so that a program that
// crashes mid-run still leaves every record before the crash readable.
//   {"type":"header","format":"msched-trace","version":1,"source":"simulator"|"cupti","precision":1,...}
//   {"type":"alloc","base":N,"size":N}            {"type":"free","base":N}
//   {"type":"launch","seq":N,"kernel":"...","params":[[off,size],...],"args":["hex",...],
//    "grid":[x,y,z],"block":[x,y,z],"smem":N,"touched":[[begin,end,mode],...],"latency_ns":N,
//    "duration_ns":N,"host_ns":N}
//   (latency_ns, duration_ns and host_ns optional)
//   {"type":"note","text":"..."}
// Touched ranges are exact bytes ("precision": 1) on the simulator, and
// rounded out to the driver's migration granularity from CUPTI.
// Value types; thread-compatible. Used by the hook (writing) and msched-profile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/address_range.h"
#include "msched/kernel_desc.h"
#include "msched/status.h"
#include "msched/templates.h"

namespace msched {

inline constexpr int kTraceFormatVersion = 1;

struct TouchedRange {
  ByteRange range;
  AccessMode mode = AccessMode::kReadWrite;
  bool operator==(const TouchedRange&) const = default;
};

struct TraceLaunch {
  uint64_t seq = 0;
  std::string kernel;
  ParamLayout layout;
  std::vector<std::vector<uint8_t>> args;  // each parameter's bytes
  LaunchDims dims;
  std::vector<TouchedRange> touched;
  // From the launch call to the kernel's end, the faults that brought its
  // memory in included (0: not recorded).
  uint64_t latency_ns = 0;
  // The kernel's own running time with its memory already on the device, as
  // a replay models it (0: not recorded).
  uint64_t duration_ns = 0;
  // The program's own host time before this launch: from the previous
  // recorded launch's return to this one's call (0: not recorded, or the
  // first). The profiler's own work in between is not in it.
  uint64_t host_ns = 0;
  size_t alloc_epoch = 0;  // allocation events that happened before this launch
};

struct TraceAllocEvent {
  bool alloc = true;  // false: a free
  uint64_t base = 0;
  uint64_t size = 0;
};

struct Trace {
  std::string source;      // "simulator" or "cupti"
  uint64_t precision = 1;  // bytes: how finely touched ranges are known
  std::vector<std::string> notes;
  std::vector<TraceAllocEvent> allocs;  // in order
  std::vector<TraceLaunch> launches;    // in order
};

struct TraceReadResult {
  Trace trace;
  std::vector<std::string> problems;  // "file:line: what" for each skipped line
  Status status;                      // not OK when nothing usable was read
};

TraceReadResult ReadTrace(const std::string& path);

// Joins the traces of separate runs of one program (at different problem
// sizes, so that sizes vary between launches and linear rules can be told
// from fixed ones) into one, as if the runs came one after another: whatever
// one run left allocated is freed before the next begins, so an address the
// next run reuses never resolves to the last run's allocation. Launch
// sequence numbers are renumbered. Fails when the traces' sources differ
// (exact simulator bytes cannot be mixed with CUPTI's rounded ranges).
Result<Trace> MergeTraces(std::vector<Trace> traces);

// Where process `pid` of a profiled program records when another process
// already holds `trace`: "<trace>.<pid>".
std::string TraceOfProcess(const std::string& trace, uint64_t pid);
// The traces other processes of one profiled program wrote beside `trace`
// ("<trace>.<pid>", existing files only), in pid order.
std::vector<std::string> SiblingTraces(const std::string& trace);

// Whether `path` is a regular file msched-profile may replace: empty, or
// one whose first line is a trace's header (TraceHeaderLine). Never true of
// a directory, a device, a FIFO or a symbolic link, nor of a file that
// holds anything else (a numbered backup, a rotated log).
bool IsReplaceableTrace(const std::string& path);

// One line of the trace (no newline).
std::string TraceHeaderLine(const std::string& source, uint64_t precision, const std::string& program);
std::string TraceAllocLine(uint64_t base, uint64_t size);
std::string TraceFreeLine(uint64_t base);
std::string TraceLaunchLine(const TraceLaunch& l);
std::string TraceNoteLine(const std::string& text);

}  // namespace msched

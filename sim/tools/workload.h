// A workload file: one process's driver-API program as data: buffers of
// every allocation kind, modules, streams, and steps (writes, launches,
// copies, prefetches, loops, synchronisation), with the buffers whose final
// contents are checksummed. Parsed into an immutable Workload; Run executes
// it through the driver API. Used by msim-run only (sim/tools).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "expr.h"

namespace msim {

// One launch argument: a pointer into a buffer, an integer, a float, or a
// struct of those packed with natural alignment.
struct ArgSpec {
  enum class Kind { kPtr, kU64, kU32, kF32, kStruct } kind = Kind::kU64;
  std::string buffer;  // kPtr
  ExprPtr value;       // kPtr: offset; kU64/kU32: value
  double f32 = 0;      // kF32
  std::vector<ArgSpec> fields;  // kStruct
};

struct ServeSpec;

struct Step {
  // kGraph: its body (launches and repeats of launches) captured on its
  // stream into a CUDA graph, instantiated, and launched `count` times.
  // kServe: a service answering requests (see ServeSpec); its body is one request.
  enum class Op { kWrite, kMemset, kLaunch, kRepeat, kSync, kPrefetch, kCopy, kFree, kAlloc, kHostWork, kMark, kGraph,
                  kServe };
  Op op = Op::kSync;
  std::string buffer, buffer2;    // target; kCopy: destination, buffer2 source
  std::string stream;             // empty: the default stream
  std::string kernel;             // kLaunch
  std::vector<ArgSpec> args;      // kLaunch
  ExprPtr grid[3], block[3];      // kLaunch
  ExprPtr count;                  // kRepeat: iterations; kGraph: launches of the graph; kWrite/kMemset/kCopy/kPrefetch: bytes (all if unset)
  ExprPtr offset;                 // byte offset into `buffer`
  ExprPtr value;                  // kMemset byte; kWrite seed; kHostWork microseconds
  std::string pattern;            // kWrite: iota_u32 | const_f32 | ramp_f32 | address (of buffer2)
  std::string to;                 // kPrefetch: device | host
  std::string var;                // kRepeat: loop variable
  std::vector<Step> body;         // kRepeat, kGraph, kServe
  std::shared_ptr<const ServeSpec> serve;  // kServe
};

// A service's requests: `requests` arrive as one seeded Poisson process at
// `per_s` per second in all (from the process's start), each for one of
// `models` models chosen uniformly from the same seed, so that every
// process given the same numbers sees the same trace. A process answers
// the requests for model `model` (-1: all of them), one at a time in
// arrival order: it waits (idle) for a request's arrival, runs the body
// with `var` set to the request's model, synchronises, and records the
// latency from arrival to that point.
// With `swap_buffers` (one deferred buffer per model), the process is a
// model-swapping server: a request whose model's buffer is not allocated
// first frees the least recently used of them while `resident` are held,
// allocates it and copies `swap_from` (host memory) into it, and the body
// names that model's buffer as `swap_as`.
struct ServeSpec {
  ExprPtr requests, per_s, seed, models, model, resident;
  std::string var;
  std::vector<std::string> swap_buffers;
  std::string swap_as, swap_from;
};

struct BufferSpec {
  std::string name;
  ExprPtr size;
  std::string kind;  // device | managed | pitch | async | host
  bool deferred = false;  // allocated by an "alloc" step, not at start
};

struct Workload {
  std::string name;
  std::map<std::string, int64_t> vars;
  std::vector<std::string> module_texts;  // module files' contents
  std::vector<BufferSpec> buffers;
  std::vector<std::string> streams;
  std::vector<Step> steps;
  std::vector<std::string> checksum;
};

// Parses the workload at `path` (module paths are relative to it), with
// `overrides` replacing variables. False with *error on any problem.
bool LoadWorkload(const std::string& path, const std::map<std::string, int64_t>& overrides, Workload* out,
                  std::string* error);

struct RunResult {
  std::map<std::string, uint64_t> checksums;  // FNV-1a 64 of each buffer's final bytes
  uint64_t launches = 0;
  uint64_t first_launch_ns = 0;  // the clock once the first launch was queued (a job's start, past any wait)
  uint64_t virtual_ns = 0;  // the process's virtual clock at the end
  std::map<std::string, uint64_t> marks;  // virtual time at each "mark" step (after synchronising)
  std::vector<uint64_t> latencies_ns;     // each request a "serve" step answered, arrival to answer
  uint64_t arrival_ns = 0;  // when the job was submitted (RunOptions::arrival_ns, or its start)
  int attempts = 0;         // runs of the program, the last one included
  int ooms = 0;             // attempts that ran out of device memory and were run again
  uint64_t lost_ns = 0;     // device time those attempts ran before failing (work lost)
  std::string error;        // empty on success
};

struct RunOptions {
  bool force_managed = false;  // every device buffer as cuMemAllocManaged (a unified-memory program)
  bool checksums = true;       // read the checksum buffers back at the end
  uint64_t arrival_ns = 0;     // virtual time the job is submitted at (0: at once)
  // An attempt that runs out of device memory is discarded and the program
  // run again from the start after retry_delay_ns, up to max_attempts runs.
  int max_attempts = 1;
  uint64_t retry_delay_ns = 0;
};

// Executes the workload through the driver API.
RunResult RunWorkload(const Workload& w, const RunOptions& options);

}  // namespace msim

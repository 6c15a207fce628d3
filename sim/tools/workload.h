// A workload file: one process's driver-API program as data: buffers of
// every allocation kind, modules, streams, and steps (writes, launches,
// copies, prefetches, loops, synchronisation), with the buffers whose final
// contents are checksummed. This header holds the parsed form, an immutable
// Workload: workload_parse.h reads a file into one, workload_run.h executes
// one through the driver API. Value types; thread-compatible. Used by
// msim-run only (sim/tools).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "expr.h"

namespace msim {

// One launch argument: a pointer into a buffer, an integer, a float, or a
// struct of those packed with natural alignment. kBytes (literal bytes,
// unaligned) only in replays of traces (trace_replay.h).
struct ArgSpec {
  enum class Kind { kPtr, kU64, kU32, kF32, kStruct, kBytes } kind = Kind::kU64;
  std::string buffer;           // kPtr
  uint64_t offset = 0;          // kPtr: bytes into the buffer, before `value`
  ExprPtr value;                // kPtr: offset; kU64/kU32: value
  double f32 = 0;               // kF32
  std::vector<ArgSpec> fields;  // kStruct
  std::vector<uint8_t> bytes;   // kBytes
};

// A byte range of a buffer that a replayed launch touches: [begin, end)
// bytes from the buffer's start, mode 1 read, 2 write, 3 both.
struct TouchSpec {
  std::string buffer;
  uint64_t begin = 0, end = 0;
  uint32_t mode = 3;
};

struct ServeSpec;

struct Step {
  // kGraph: its body (launches and repeats of launches) captured on its
  // stream into a CUDA graph, instantiated, and launched `count` times.
  // kServe: a service answering requests (see ServeSpec); its body is one request.
  enum class Op {
    kWrite,
    kMemset,
    kLaunch,
    kRepeat,
    kSync,
    kPrefetch,
    kCopy,
    kFree,
    kAlloc,
    kHostWork,
    kMark,
    kMemInfo,  // records the free device memory cuMemGetInfo reports (RunResult::free_bytes)
    kGraph,
    kServe
  };
  Op op = Op::kSync;
  std::string buffer, buffer2;  // target; kCopy: destination, buffer2 source
  std::string stream;           // empty: the default stream
  std::string kernel;           // kLaunch
  std::vector<ArgSpec> args;    // kLaunch
  ExprPtr grid[3], block[3];    // kLaunch
  ExprPtr count;   // kRepeat: iterations; kGraph: launches of the graph; kWrite/kMemset/kCopy/kPrefetch: bytes (all if
                   // unset)
  ExprPtr offset;  // byte offset into `buffer`
  ExprPtr value;   // kMemset byte; kWrite seed; kHostWork microseconds
  std::string pattern;                     // kWrite: iota_u32 | const_f32 | ramp_f32 | address (of buffer2)
  std::string to;                          // kPrefetch: device | host
  std::string var;                         // kRepeat: loop variable
  std::vector<Step> body;                  // kRepeat, kGraph, kServe
  std::shared_ptr<const ServeSpec> serve;  // kServe
  // kLaunch of a replayed trace: the launch touches exactly `touches` (not
  // what its kernel's declaration lists) and computes for `compute_ns`
  // (0: the simulator's model from the bytes touched). msimSetNextLaunch.
  // Replayed kernels name kReplayStampKernel as their host implementation.
  bool replayed = false;
  std::vector<TouchSpec> touches;
  uint64_t compute_ns = 0;
  uint64_t host_ns = 0;  // the program's host time before the launch: the clock moves on by it first
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

// The host implementation of replayed kernels: it stamps the first word of
// each range the launch writes (trace_replay.h).
inline constexpr char kReplayStampKernel[] = "msim-replay-stamp";

struct BufferSpec {
  std::string name;
  ExprPtr size;
  std::string kind;       // device | managed | pitch | async | host | vmm | vmm_exported | expandable
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

// A workload's variables by name, for evaluating its expressions (parsing
// evaluates "vars" in order, running evaluates sizes, counts and arguments).
class VarContext : public ExprContext {
 public:
  explicit VarContext(const std::map<std::string, int64_t>& vars) : vars_(vars) {}
  bool Var(std::string_view name, int64_t* out) const override {
    auto it = vars_.find(std::string(name));
    if (it == vars_.end()) return false;
    *out = it->second;
    return true;
  }

 private:
  const std::map<std::string, int64_t>& vars_;
};

}  // namespace msim

// Runtime: everything libmsched keeps for its process, behind one accessor:
// configuration, statistics, templates, the allocation map, the job's
// memory (budget and manager: src/job_memory.h), the kernel cache, and the
// switch to pass-through taken on any internal failure. Created on first use, which
// never calls into CUDA; never destroyed (threads may call the driver while
// the process exits).
// Thread-safe: counters are atomic; the state under "Guarded by mu()" is
// externally synchronized by mu().
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "model/alloc_map.h"
#include "entry_table.h"
#include "kernel_cache.h"
#include "model/job_memory.h"
#include "msched/config.h"
#include "base/stats.h"
#include "model/template_eval.h"
#include "model/template_store.h"

namespace msched::hook {

struct HookCounters {
  Counter* calls[kEntryCount];
  Counter* lookups_dlsym;
  Counter* lookups_proc_address;
  Counter* lookups_proc_address_hooked;
  Counter* alloc_count;
  Counter* alloc_bytes;
  Counter* alloc_converted;
  Counter* alloc_converted_bytes;
  Counter* alloc_pinned;
  Counter* alloc_pinned_bytes;
  Counter* alloc_failed;
  Counter* launches_total;
  Counter* launches_predicted;
  Counter* launches_unknown;
  Counter* launches_whole_allocation;
  Counter* launches_in_capture;
  Counter* launches_graph;
  Counter* copies_predicted;
  Counter* bytes_predicted;
  Counter* bytes_prefetched;
  Counter* bytes_evicted;
  Counter* bytes_unserved;
  Counter* prefetch_errors;
  Counter* eval_failures;
  Counter* templates_loaded;
  Counter* template_problems;
  Counter* internal_failures;
  Counter* coord_wait_ns;     // device time spent waiting for the coordinator
  Counter* coord_stops;
  Counter* coord_loaded_bytes;
  Histogram* hook_latency_ns;
};

class Runtime {
 public:
  static Runtime& Get();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const;
  // Allocations become managed (um, alloc, msched, profile).
  bool converting() const { return !passthrough() && config().mode != Mode::kOff; }
  // Launches are predicted and prefetched (alloc, msched).
  bool predicting() const {
    return !passthrough() && (config().mode == Mode::kAlloc || config().mode == Mode::kMsched);
  }
  bool passthrough() const { return passthrough_.load(std::memory_order_relaxed); }
  // An internal failure: logs once and turns the hook into a pass-through.
  void Fail(const std::string& where, const std::string& why);

  StatsRegistry& stats() { return stats_; }
  HookCounters& counters() { return c_; }
  std::string StatsJson();

  std::atomic<int> capturing{0};  // streams now capturing: inject nothing

  // ---- Guarded by mu() -----------------------------------------------------
  std::mutex& mu() { return mu_; }
  AllocationMap& allocs() { return allocs_; }
  JobMemory& job() { return job_; }
  MemoryManager& memory() { return job_.manager(); }
  const TemplateStore& templates() const { return templates_; }
  KernelCache& kernels() { return kernels_; }
  Prediction& scratch() { return scratch_; }
  uint64_t NextSeq() { return ++seq_; }
  uint64_t seq() const { return seq_; }
  // Asks the driver for the device's memory, once a context exists to
  // answer, for the budget's fallback (JobBudget::device). Called by the
  // paths that plan or report memory, before they do.
  void LearnDeviceMemory();
  // Memory msched cannot manage (VMM, IPC) came or went: it counts against
  // the budget (JobBudget::pinned).
  void AddPinned(int64_t delta);
  // Streams that ran launches since everything was last known complete.
  std::set<CUstream> streams_since_sync;
  // Frees of converted stream-ordered allocations, waiting for their stream.
  std::vector<std::pair<CUevent, CUdeviceptr>> deferred_frees;

 private:
  Runtime();
  void LoadTemplates();

  std::atomic<bool> passthrough_{false};
  StatsRegistry stats_;
  HookCounters c_{};
  std::mutex mu_;
  AllocationMap allocs_;
  JobMemory job_;
  TemplateStore templates_;
  KernelCache kernels_;
  Prediction scratch_;
  uint64_t seq_ = 0;
};

// Marks this thread as inside a hook, so that a driver that calls back into
// hooked names (or msched's own driver calls) pass straight through.
class HookScope {
 public:
  HookScope() { ++depth(); }
  ~HookScope() { --depth(); }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  static bool Active() { return depth() > 0; }

 private:
  static int& depth() {
    static thread_local int d = 0;
    return d;
  }
};

}  // namespace msched::hook

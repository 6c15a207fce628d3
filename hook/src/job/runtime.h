// Runtime: everything libmsched keeps for its process, behind one accessor:
// configuration, statistics, templates, the allocation map, the job's
// memory (budget and manager: src/model/job_memory.h), the pool that serves
// stream-ordered allocations (src/model/managed_pool.h), the kernel cache, and the
// switch to pass-through taken on any internal failure. Created on first use, which
// never calls into CUDA; never destroyed (threads may call the driver while
// the process exits).
// Thread-safe: counters are atomic; the templates are immutable once
// constructed; the state under "Guarded by mu()" is externally synchronized
// by mu(), the pool by pool_mu() (taken before mu(), never after), and
// clang's -Wthread-safety checks every access to them.
#pragma once

#include <cuda.h>

#include <atomic>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/stats.h"
#include "base/thread_annotations.h"
#include "interpose/entry_table.h"
#include "job/kernel_cache.h"
#include "model/alloc_map.h"
#include "model/extent_memo.h"
#include "model/job_memory.h"
#include "model/managed_pool.h"
#include "model/predictor.h"
#include "model/template_eval.h"
#include "model/template_store.h"
#include "msched/config.h"
#include "msched/no_destructor.h"

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
  Counter* pool_chunks;  // managed allocations made for the pool
  Counter* pool_chunk_bytes;
  Counter* pool_chunks_released;
  Counter* pool_stream_waits;  // reuses ordered after a pending free by an event wait
  Counter* pool_retired;       // blocks freed when no fence could say when
  Counter* launches_total;
  Counter* launches_predicted;
  Counter* launches_unknown;
  Counter* launches_fallback;
  Counter* launches_whole_allocation;
  Counter* launches_in_capture;
  Counter* launches_graph;
  Counter* graphs_planned;           // executable graphs whose nodes were walked
  Counter* graph_nodes_predicted;    // their kernel nodes with a prediction
  Counter* graph_nodes_unpredicted;  // and without (their data faults in)
  Counter* graph_launches_split;     // launches run segment by segment
  Counter* graph_segments;           // the segments those launches ran
  Counter* copies_predicted;
  Counter* bytes_predicted;
  Counter* bytes_prefetched;
  Counter* bytes_evicted;
  Counter* bytes_unserved;
  Counter* peak_over_budget;  // the most the job held beyond its budget (NoteOverBudget)
  Counter* prefetch_errors;
  Counter* eval_failures;
  Counter* templates_loaded;
  Counter* template_problems;
  Counter* internal_failures;
  Counter* coord_wait_ns;  // device time spent waiting for the coordinator
  Counter* coord_stops;
  Counter* coord_stop_ns;  // device time from taking a stop to answering it (drain, evictions, a pause's wait)
  Counter* coord_loaded_bytes;
  Counter* shared_bytes;          // memory shared with another process (JobMemory::shared_bytes)
  Counter* unpaged_bytes;         // memory that cannot page (JobMemory::unpaged_bytes)
  Counter* ipc_export_refused;    // cuIpcGetMemHandle refused for managed memory (pinned_memory_hooks.cc)
  Counter* vmm_moved_out_bytes;   // VMM memory moved to the host at stops
  Counter* vmm_moved_back_bytes;  // and mapped back
  Histogram* hook_latency_ns;
};

class Runtime {
 public:
  static Runtime& Get();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const;
  // config().mode and config().unknown, read from the launch path's own
  // cache line.
  Mode mode() const { return hot_.mode; }
  UnknownPolicy unknown() const { return hot_.unknown; }
  // Allocations become managed (um, alloc, msched, profile).
  bool converting() const { return !passthrough() && mode() != Mode::kOff; }
  // Launches are predicted and prefetched (alloc, msched).
  bool predicting() const { return !passthrough() && (mode() == Mode::kAlloc || mode() == Mode::kMsched); }
  bool passthrough() const { return hot_.passthrough.load(std::memory_order_relaxed); }
  // An internal failure: logs once and turns the hook into a pass-through.
  void Fail(const std::string& where, const std::string& why);

  StatsRegistry& stats() { return stats_; }
  HookCounters& counters() { return c_; }
  std::string StatsJson() MSCHED_EXCLUDES(mu_, pool_mu_);

  // Whether any stream is capturing a graph (inject nothing then): one
  // atomic load, for the launch path.
  bool AnyCapturing() const { return hot_.capturing.load(std::memory_order_relaxed) > 0; }
  bool Capturing(CUstream stream) const MSCHED_REQUIRES(mu_) { return capturing_streams_.count(stream) > 0; }
  void CaptureBegan(CUstream stream) MSCHED_REQUIRES(mu_);
  void CaptureEnded(CUstream stream) MSCHED_REQUIRES(mu_);
  // Whether a launch msched could not predict has taken all read-mostly
  // advice back (ForgoReadMostly in residency.h): read lock-free on
  // launches. TakeReadMostlyBack is true for the first caller only.
  bool read_mostly_forgone() const { return hot_.read_mostly_forgone.load(std::memory_order_relaxed); }
  bool TakeReadMostlyBack() { return !hot_.read_mostly_forgone.exchange(true); }

  // Loaded by the constructor and never changed: read without the lock (the
  // launch path resolves kernels against it outside mu()).
  const TemplateStore& templates() const { return templates_; }

  // ---- Guarded by mu() -----------------------------------------------------
  // The accessors below hand out references: the caller holds mu() for as
  // long as it uses them.
  Mutex& mu() MSCHED_RETURN_CAPABILITY(mu_) { return mu_; }
  const AllocationMap& allocs() MSCHED_REQUIRES(mu_) { return job_.allocations(); }
  JobMemory& job() MSCHED_REQUIRES(mu_) { return job_; }
  // The kernel cache: what a function handle resolved to, remembered for
  // the process's life (kernel_cache.h).
  const KernelInfo* FindKernel(CUfunction f) MSCHED_REQUIRES(mu_) { return kernels_.Find(f); }
  const KernelInfo* RememberKernel(CUfunction f, KernelInfo info) MSCHED_REQUIRES(mu_) {
    return kernels_.Insert(f, std::move(info));
  }
  // A launch's prediction completed against the job's allocations,
  // teaching and using the extents templates predicted, for the pointer
  // fallback (LaunchPrediction::Complete, extent_memo.h).
  bool CompletePrediction(LaunchPrediction& lp) MSCHED_REQUIRES(mu_) {
    return lp.Complete(job_.allocations(), &extents_);
  }
  uint64_t NextSeq() MSCHED_REQUIRES(mu_) { return ++seq_; }
  uint64_t seq() const MSCHED_REQUIRES(mu_) { return seq_; }
  // Asks the driver for the device's memory, once a context exists to
  // answer, for the budget's fallback (JobBudget::device). Called by the
  // paths that plan or report memory, before they do.
  void LearnDeviceMemory() MSCHED_REQUIRES(mu_);
  // Memory shared with another process outside VMM came or went
  // (JobMemory::AddShared): it counts against the budget (JobBudget::pinned).
  void AddShared(int64_t delta) MSCHED_REQUIRES(mu_);
  // Sets the statistics of memory msched does not page (bytes.shared,
  // bytes.unpaged: JobMemory's figures, which the coordinator hears of)
  // after a change to the job's VMM or shared memory.
  void CountUnpaged() MSCHED_REQUIRES(mu_);
  // Pools the program created with an export handle type (cuMemPoolCreate):
  // their allocations are left to the driver (alloc_hooks.cc).
  std::set<CUmemoryPool>& exportable_pools() MSCHED_REQUIRES(mu_) { return exportable_pools_; }
  // A launch or copy was queued on `stream`.
  void LaunchedOn(CUstream stream) MSCHED_REQUIRES(mu_) { streams_since_sync_.insert(stream); }
  // A synchronisation of `stream`, or of the whole context, succeeded. True
  // when everything launched since the last such is now known complete (the
  // whole context, or the one stream that ran launches), and then the count
  // starts again.
  bool SynchronizedAll(CUstream stream, bool whole_context) MSCHED_REQUIRES(mu_);

  // ---- Guarded by pool_mu() --------------------------------------------------
  // Held across the pool's driver calls (a new chunk, a fence), so that the
  // launch path, which takes only mu(), never waits for them.
  Mutex& pool_mu() MSCHED_RETURN_CAPABILITY(pool_mu_) { return pool_mu_; }
  ManagedPool& pool() MSCHED_REQUIRES(pool_mu_) { return pool_; }
  // The events behind the pool's fences (cuda_pool_ops.h): those not in
  // use, by context (an event is recorded only on its own context's
  // streams), the context of each, and the stream each was last recorded
  // on. Never destroyed, only recycled.
  struct FenceEvents {
    std::map<CUcontext, std::vector<CUevent>> spare;
    std::map<CUevent, CUcontext> context_of;
    std::map<CUevent, CUstream> recorded_on;
  };
  FenceEvents& fence_events() MSCHED_REQUIRES(pool_mu_) { return fence_events_; }

 private:
  friend class NoDestructor<Runtime>;  // Get's one runtime
  Runtime();
  void LoadTemplates();

  // What every hooked call reads, in one cache line: a launch in a real
  // program finds msched's state out of the caches (the program's own work
  // ran in between), and each line it reads then costs a memory access
  // (docs/design.md, "The launch path").
  struct alignas(64) Hot {
    std::atomic<bool> passthrough{false};
    std::atomic<bool> read_mostly_forgone{false};
    Mode mode = Mode::kOff;  // config().mode and .unknown, set by the constructor
    UnknownPolicy unknown = UnknownPolicy::kPointers;
    std::atomic<int> capturing{0};  // capturing_streams_.size(), for lock-free reads
  } hot_;
  StatsRegistry stats_;
  HookCounters c_{};
  TemplateStore templates_;  // immutable after the constructor
  Mutex pool_mu_ MSCHED_ACQUIRED_BEFORE(mu_);
  ManagedPool pool_ MSCHED_GUARDED_BY(pool_mu_);
  FenceEvents fence_events_ MSCHED_GUARDED_BY(pool_mu_);
  Mutex mu_;
  JobMemory job_ MSCHED_GUARDED_BY(mu_);
  KernelCache kernels_ MSCHED_GUARDED_BY(mu_);
  ExtentMemo extents_ MSCHED_GUARDED_BY(mu_);
  uint64_t seq_ MSCHED_GUARDED_BY(mu_) = 0;
  std::set<CUstream> streams_since_sync_ MSCHED_GUARDED_BY(mu_);  // streams that ran launches since
  std::set<CUstream> capturing_streams_ MSCHED_GUARDED_BY(mu_);
  std::set<CUmemoryPool> exportable_pools_ MSCHED_GUARDED_BY(mu_);
};

// Marks the calling thread as inside a span of msched's own, for as long as
// a marker lives (markers nest): Active() says whether any of kind `Tag` is
// alive on this thread. One counter per thread and kind.
template <typename Tag>
class ThreadMark {
 public:
  ThreadMark() { ++depth(); }
  ~ThreadMark() { --depth(); }
  ThreadMark(const ThreadMark&) = delete;
  ThreadMark& operator=(const ThreadMark&) = delete;
  static bool Active() { return depth() > 0; }

 private:
  static int& depth() {
    static thread_local int d = 0;
    return d;
  }
};

// Inside a hook: a driver that calls back into hooked names (or msched's
// own driver calls) passes straight through.
using HookScope = ThreadMark<struct InsideAHook>;

}  // namespace msched::hook

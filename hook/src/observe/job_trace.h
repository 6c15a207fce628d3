// The job's side of the timeline (docs/tracing.md), when MSCHED_TRACE names
// a directory: sampled kernel launches, the prefetches the hook issues and
// their bytes, the swaps the coordinator asks for, and per interval of
// device time the launches, bytes prefetched and (on the simulator) faults.
// Times are the job's device clock (DeviceEnv::Now, device_env.h), the one mschedd
// schedules by, so the job's file and mschedd's merge by time.
//   - Off: the launch path loads one pointer and finds it null.
//   - On: one launch in kSampleEvery per thread is recorded; a record costs
//     a read of the device clock and a lock held for a copy into a fixed
//     ring, which overwrites (and counts) the oldest when full. Nothing is
//     written until the process exits: then DIR/job-<pid>.json, the ring's
//     records in order.
// Thread-safe; never destroyed (threads may launch while the process
// exits). Used by hook/ only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "job/runtime.h"
#include "msched/no_destructor.h"

namespace msched::hook {

class JobTrace {
 public:
  static constexpr uint32_t kSampleEvery = 64;
  static constexpr size_t kCapacity = size_t{1} << 14;  // records (~1 MiB)
  static constexpr uint64_t kIntervalNs = 10'000'000;   // counters at most every 10 ms of device time

  // Starts recording if `config` asks for it; once, from the Runtime's constructor.
  static void Start(const Config& config, const HookCounters& counters);
  static JobTrace* Active() { return active_.load(std::memory_order_acquire); }
  // The trace when this launch of the calling thread is one it samples; null otherwise (and when off).
  static JobTrace* Sampled() {
    JobTrace* t = Active();
    if (t == nullptr) return nullptr;
    static thread_local uint32_t launches = 0;
    return launches++ % kSampleEvery == 0 ? t : nullptr;
  }

  // A sampled launch of `kernel` (nullptr: its name is not known).
  void Launch(const std::string* kernel) MSCHED_EXCLUDES(mu_);
  // The launch path made data resident: `loaded` bytes in, `evicted` out.
  void Prefetch(uint64_t loaded, uint64_t evicted) MSCHED_EXCLUDES(mu_);
  // A Go brought the working set back: `bytes` from `start_ns` for `dur_ns`.
  void SwapIn(uint64_t start_ns, uint64_t dur_ns, uint64_t bytes) MSCHED_EXCLUDES(mu_);
  // A Stop queued `bytes` of evictions at `now_ns`.
  void SwapOut(uint64_t now_ns, uint64_t bytes) MSCHED_EXCLUDES(mu_);

 private:
  enum class Kind : uint8_t { kLaunch, kPrefetch, kSwapIn, kSwapOut, kInterval };
  struct Record {
    Kind kind;
    uint64_t ts, dur;
    uint64_t a, b, c;  // by kind: see ToEvent
    const char* name;  // a kernel's (the kernel cache never frees one), or nullptr
  };
  // What the interval counters count, cumulatively.
  struct Totals {
    uint64_t launches = 0, prefetched = 0, faults = 0;
  };

  friend class NoDestructor<JobTrace>;  // Start's one trace
  JobTrace(std::string path, const HookCounters& counters);
  void Add(Record r) MSCHED_EXCLUDES(mu_);
  void Put(const Record& r) MSCHED_REQUIRES(mu_);
  // Records the counters' change since the interval began; the next begins at `now`.
  void EndInterval(uint64_t now) MSCHED_REQUIRES(mu_);
  Totals Now() const;
  static void WriteAtExit();

  static std::atomic<JobTrace*> active_;
  const std::string path_;
  const HookCounters& counters_;
  Mutex mu_;
  std::vector<Record> ring_ MSCHED_GUARDED_BY(mu_);  // kCapacity, allocated at the start
  uint64_t recorded_ MSCHED_GUARDED_BY(mu_) = 0;     // records ever put (the ring holds the last kCapacity)
  uint64_t interval_start_ MSCHED_GUARDED_BY(mu_) = 0;
  Totals at_interval_start_ MSCHED_GUARDED_BY(mu_);
};

}  // namespace msched::hook

#include "observe/job_trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/chrome_trace.h"
#include "job/device_env.h"
#include "msched/trace_layout.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;  // far above what the ring holds

// The counters of the interval that began at `ts` (Perfetto draws each as a
// step lasting until the next interval's).
trace::Event Counts(uint64_t ts, int64_t pid, uint64_t launches, uint64_t prefetched, uint64_t faults) {
  json counts = {{"launches", launches}, {"prefetched_bytes", prefetched}};
  if (DeviceEnv::Get().Faults()) counts["faults"] = faults;
  return {'C', "per interval", "", ts, 0, pid, 0, std::move(counts)};
}

}  // namespace

std::atomic<JobTrace*> JobTrace::active_{nullptr};

void JobTrace::Start(const Config& config, const HookCounters& counters) {
  if (config.trace_dir.empty() || config.mode == Mode::kOff) return;
  static NoDestructor<JobTrace> trace(config.trace_dir + "/job-" + std::to_string(::getpid()) + ".json",
                                      counters);  // never destroyed: see the header
  active_.store(trace.get(), std::memory_order_release);
  std::atexit(WriteAtExit);
}

JobTrace::JobTrace(std::string path, const HookCounters& counters) : path_(std::move(path)), counters_(counters) {
  ring_.resize(kCapacity);
}

JobTrace::Totals JobTrace::Now() const {
  return {counters_.launches_total->value(), counters_.bytes_prefetched->value(),
          DeviceEnv::Get().Faults().value_or(0)};
}

void JobTrace::Launch(const std::string* kernel) {
  Add({Kind::kLaunch, DeviceEnv::Get().Now(), 0, counters_.launches_total->value(), 0, 0,
       kernel ? kernel->c_str() : nullptr});
}

void JobTrace::Prefetch(uint64_t loaded, uint64_t evicted) {
  Add({Kind::kPrefetch, DeviceEnv::Get().Now(), 0, loaded, evicted, 0, nullptr});
}

void JobTrace::SwapIn(uint64_t start_ns, uint64_t dur_ns, uint64_t bytes) {
  Add({Kind::kSwapIn, start_ns, dur_ns, bytes, 0, 0, nullptr});
}

void JobTrace::SwapOut(uint64_t now_ns, uint64_t bytes) { Add({Kind::kSwapOut, now_ns, 0, bytes, 0, 0, nullptr}); }

void JobTrace::Add(Record r) {
  MutexLock lock(&mu_);
  if (interval_start_ == 0) {
    interval_start_ = std::max<uint64_t>(r.ts, 1);
    at_interval_start_ = Now();
  } else if (r.ts >= interval_start_ + kIntervalNs) {
    EndInterval(r.ts);
  }
  Put(r);
}

void JobTrace::EndInterval(uint64_t now) {
  const Totals totals = Now();
  Put({Kind::kInterval, interval_start_, now - interval_start_, totals.launches - at_interval_start_.launches,
       totals.prefetched - at_interval_start_.prefetched, totals.faults - at_interval_start_.faults, nullptr});
  interval_start_ = now;
  at_interval_start_ = totals;
}

void JobTrace::Put(const Record& r) { ring_[recorded_++ % kCapacity] = r; }

void JobTrace::WriteAtExit() {
  JobTrace* t = Active();
  if (t == nullptr) return;
  try {
    Result<std::unique_ptr<trace::Writer>> w = trace::Writer::Create(t->path_, kMaxFileBytes);
    if (!w.ok()) {
      LogError("cannot write this job's timeline (MSCHED_TRACE): {}", w.status().message());
      return;
    }
    const int64_t pid = ::getpid();
    trace::Writer& out = **w;
    out.Write(trace::ThreadName(pid, trace::kJobLaunchesTid,
                                "launches (libmsched, 1 in " + std::to_string(kSampleEvery) + ")"));
    out.Write(trace::ThreadName(pid, trace::kJobMemoryTid, "memory (libmsched)"));
    MutexLock lock(&t->mu_);
    if (t->interval_start_ != 0) t->EndInterval(std::max(DeviceEnv::Get().Now(), t->interval_start_));
    const uint64_t first = t->recorded_ > kCapacity ? t->recorded_ - kCapacity : 0;
    for (uint64_t i = first; i < t->recorded_; ++i) {
      const Record& r = t->ring_[i % kCapacity];
      switch (r.kind) {
        case Kind::kLaunch:
          out.Write(
              {'i', r.name ? r.name : "launch", "launch", r.ts, 0, pid, trace::kJobLaunchesTid, {{"launch", r.a}}});
          break;
        case Kind::kPrefetch:
          out.Write({'i',
                     "prefetch",
                     "prefetch",
                     r.ts,
                     0,
                     pid,
                     trace::kJobMemoryTid,
                     {{"loaded_bytes", r.a}, {"evicted_bytes", r.b}}});
          break;
        case Kind::kSwapIn:
          out.Write({'X', "swap-in", trace::kSwapCategory, r.ts, r.dur, pid, trace::kJobMemoryTid, {{"bytes", r.a}}});
          break;
        case Kind::kSwapOut:
          out.Write(
              {'i', "swap-out queued", trace::kSwapCategory, r.ts, 0, pid, trace::kJobMemoryTid, {{"bytes", r.a}}});
          break;
        case Kind::kInterval: out.Write(Counts(r.ts, pid, r.a, r.b, r.c)); break;
      }
    }
    if (t->interval_start_ != 0) {  // the counters' steps end with the process
      out.Write(Counts(t->interval_start_, pid, 0, 0, 0));
    }
    if (first > 0) {
      out.Write({'i',
                 "earlier records dropped",
                 "",
                 t->ring_[first % kCapacity].ts,
                 0,
                 pid,
                 trace::kJobMemoryTid,
                 {{"dropped", first}, {"kept", kCapacity}}});
    }
    if (Status s = out.Close(); !s.ok()) LogError("{} (MSCHED_TRACE)", s.message());
  } catch (const std::exception& e) {
    LogError("cannot write this job's timeline (MSCHED_TRACE): {}", e.what());
  }
}

}  // namespace msched::hook

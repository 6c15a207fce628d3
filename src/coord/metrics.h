// mschedd's metrics as data, and their Prometheus text exposition (format
// 0.0.4: HELP and TYPE lines, then one line per series). MetricsSnapshot is
// what the coordinator knew at one moment, copied out of its thread;
// RenderPrometheus turns one into the text `GET /metrics` answers with
// (docs/operate.md, "Metrics", lists every metric). MetricsBoard hands the
// latest snapshot from the coordinator's thread to the HTTP server's.
// Value types and a pure function, thread-compatible; MetricsBoard is
// thread-safe. Used by the coordinator's server and mschedd.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace msched {

// A Prometheus histogram with fixed upper bounds. Invariant: `counts` has
// one entry per bound plus one for values above every bound, and each
// entry counts the values of its own bucket only (RenderPrometheus writes
// them cumulatively, as the format wants).
struct MetricsHistogram {
  explicit MetricsHistogram(std::vector<double> upper_bounds);  // REQUIRES: ascending
  void Observe(double value);

  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t count = 0;
};

// One live job (waiting, running or paused): finished jobs have no series,
// so the number of series stays bounded by the jobs that are alive.
struct JobMetrics {
  uint64_t id = 0;
  uint32_t uid = 0;
  std::string name;  // written as a label only when MetricsSnapshot::job_names
  uint64_t declared_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t resident_bytes = 0;
  uint64_t budget_bytes = 0;
  uint64_t peak_over_budget_bytes = 0;
  uint64_t shared_bytes = 0;
  uint64_t waited_ns = 0;
  bool on_gpu = false;
  uint64_t faults = 0;
  uint64_t prefetched_bytes = 0;
  // What `msched status` shows of it (msched_job_info's labels): its run
  // state ("running" on the GPU, "waiting", "swapped out", "paused"), why
  // it is off the GPU ("" when on it), its class and priority.
  std::string run_state, wait_reason, job_class;
  int priority = 0;
};

// The bounds of msched_slice_seconds: from the shortest slices tests use
// (5 ms) past the longest --max-slice, up to turns of a whole run.
std::vector<double> SliceSecondsBounds();

struct MetricsSnapshot {
  std::string version;            // msched_build_info's label
  double start_time_seconds = 0;  // wall clock, seconds since the Unix epoch
  uint64_t hbm_bytes = 0;         // 0 until learnt
  uint64_t jobs_waiting = 0, jobs_running = 0, jobs_paused = 0;
  uint64_t jobs_submitted = 0;
  uint64_t groups = 0;
  uint64_t switches = 0;
  uint64_t swap_in_bytes = 0;   // reported by the jobs
  uint64_t swap_out_bytes = 0;  // the coordinator's estimate
  uint64_t admissions = 0;
  uint64_t admission_wait_ns = 0;  // summed over admissions
  uint64_t faults = 0;
  uint64_t prefetched_bytes = 0;
  double link_bytes_per_second = 0;
  MetricsHistogram slice_seconds{SliceSecondsBounds()};
  bool job_names = false;        // jobs' names as labels (mschedd --metrics-names)
  std::vector<JobMetrics> jobs;  // by id
};

// The text exposition of `s`, every metric with its HELP and TYPE lines,
// always in the same order.
std::string RenderPrometheus(const MetricsSnapshot& s);
// `value` as a label value in the text format: `\`, `"` and newline escaped.
std::string EscapeLabelValue(std::string_view value);

class MetricsBoard {
 public:
  void Publish(std::shared_ptr<const MetricsSnapshot> snapshot) MSCHED_EXCLUDES(mu_);
  // The snapshot published last; null before the first.
  std::shared_ptr<const MetricsSnapshot> Latest() const MSCHED_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::shared_ptr<const MetricsSnapshot> latest_ MSCHED_GUARDED_BY(mu_);
};

}  // namespace msched

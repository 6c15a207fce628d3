// Running a scenario: profiling its workloads into templates with
// msched-profile, running every point under every policy (side by side, on
// fresh simulated GPUs of the same profile), checking each job's results
// against a reference run, and deriving what the report shows: throughput,
// speedup over demand paging, the ideal the device allows and the fraction of
// it reached, and where the time went. Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "msched/status.h"
#include "suite/runner.h"
#include "suite/scenario.h"

namespace msched::bench {

// What the report needs of a device profile (templates/devices/NAME.json).
struct DeviceFacts {
  std::string name;
  uint64_t hbm_bytes = 0;             // what the runs have (msched bench --hbm: a share of the card's)
  uint64_t card_hbm_bytes = 0;        // the profile's
  double h2d_gbps = 0, d2h_gbps = 0;  // 10^9 bytes per second
};
Result<DeviceFacts> LoadDeviceFacts(const std::string& profile, const BenchPaths& paths);

struct SuiteOptions {
  std::string device_profile = "rtx5080-pcie5";
  bool quick = false;
  std::string work_dir;  // profiles and traces are kept here
  // Where every run's timeline goes ("": only the runs the report's Gantt
  // plot draws are traced, into work_dir/traces).
  std::string trace_dir;
  std::function<void(const std::string&)> progress;  // one line per step
};

struct PolicyResult {
  PolicyVariant variant;
  RunOutcome run;
  std::string problem;    // empty: every job finished with the reference's checksums
  double seconds = 0;     // makespan on the device clock
  double throughput = 0;  // work units per second
  uint64_t faults = 0, h2d_bytes = 0, d2h_bytes = 0, prefetch_bytes = 0;
  // Host-to-device bytes of paging (prefetches and faults, not the
  // program's copies) and Belady's minimum for the same accesses (msched
  // only; 0 otherwise).
  uint64_t paging_h2d_bytes = 0, belady_h2d_bytes = 0;
  uint64_t opt_kernel_h2d_bytes = 0, opt_kernel_budget_h2d_bytes = 0;  // JobOutcome's, summed
  uint64_t opt_budget_bytes = 0;                                       // a lone job's budget (JobOutcome)
  std::string belady_error;                                            // why a job's minimum is missing ("": none is)
  bool HasBelady() const { return run.belady && belady_error.empty() && !run.jobs.empty(); }
  uint64_t compute_ns = 0, stall_ns = 0, wait_ns = 0;
  std::string trace;  // the run's timeline ("": not traced)
  // As users feel it (every time from a job's arrival, in device ns):
  int ooms = 0;                                // job runs that crashed out of memory
  uint64_t lost_ns = 0;                        // device time those runs had worked: GPU time lost
  uint64_t wait_mean_ns = 0, wait_p95_ns = 0;  // arrival to first kernel
  uint64_t short_wait_mean_ns = 0;             // the same, jobs of class short
  double busy = 0;                             // kernel time over makespan
  uint64_t urgent_ns = 0;                      // arrival to completion of the slowest job of priority above 0
  // Per user: the mean of its jobs' completion times (arrival to end) and
  // of their slowdowns (completion over the job's time alone under
  // exclusive; 0 without an exclusive run), and the coefficient of
  // variation of the users' mean slowdowns (of completions without one).
  std::map<std::string, double> user_completion_ms, user_slowdown;
  double user_cv = 0;
  // Services: every request's latency (arrival to answer), its median and
  // p99 (nearest rank), and the fraction within the scenario's SLO.
  size_t requests = 0;
  uint64_t latency_p50_ns = 0, latency_p99_ns = 0;
  double slo_met = 0;
  // It failed as it must: a job is larger than HBM and the policy keeps jobs
  // in plain device memory (what exclusive use of the GPU cannot do).
  bool cannot_run = false;
  // nocheck gave up on a job that ran out of memory at every attempt: the
  // failure sharing without a memory check shows (not an error of the suite).
  bool out_of_memory = false;
  bool ok() const { return problem.empty(); }
};

struct PointResult {
  Point point;
  std::vector<PolicyResult> policies;  // in the scenario's order
  // The ideal: the longer of all jobs' kernel work back to back and
  // `link_bytes` crossing the link (at best wholly under kernels): Belady's
  // minimum host-to-device bytes for the jobs' accesses when the msched run
  // measured it (`link_from_belady`), else the bytes beyond HBM, once (or
  // once per work unit where every byte is used in every unit). No policy
  // can do better on a GPU that runs one kernel at a time and must move what
  // does not fit.
  uint64_t compute_ns = 0, excess_bytes = 0, link_bytes = 0, ideal_ns = 0;
  bool link_from_belady = false;
  const PolicyResult* Find(Policy p) const;
  // The run the Gantt plot sets beside msched's: exclusive, else fifo, else
  // the first policy that is not msched's.
  const PolicyResult* Baseline() const;
};

// How a job's templates, fitted from small profiling runs, predict what it
// touches at the scenario's first point: one work unit traced at that size
// and checked with `msched-profile check`.
struct TemplateAccuracy {
  std::string label, workload;
  uint64_t touched_bytes = 0, predicted_bytes = 0, fn_bytes = 0, fp_bytes = 0;
  std::string table;  // msched-profile's per-kernel table (a file)
  std::string error;  // why it could not be measured ("" when measured)
};

struct ScenarioResult {
  const Scenario* scenario = nullptr;
  bool quick = false;  // run in the quick form (targets apply to the full form)
  std::vector<PointResult> points;
  std::vector<TemplateAccuracy> template_accuracy;  // one per job kind with templates
};

// What the scenarios' jobs need before they run: every trace they replay
// in this form, decompressed into the work directory with its footprint;
// and the templates file for each kind of job, keyed by TemplatesKey,
// fitted by msched-profile from a replayed program's own trace, or from
// profiling runs of a workload at different sizes, fitted together.
struct Prepared {
  TraceFiles traces;
  std::map<std::string, std::string> templates;
};
Result<Prepared> Prepare(const std::vector<const Scenario*>& scenarios, const BenchPaths& paths, const SuiteOptions& o);
std::string TemplatesKey(const ScenarioJob& job);

ScenarioResult RunScenario(const Scenario& s, const DeviceFacts& device, const Prepared& prepared,
                           const BenchPaths& paths, const SuiteOptions& o);

}  // namespace msched::bench

// A benchmark scenario (bench/scenarios/*.json): a set of jobs, the
// footprints (percent of HBM) it is run at, the policies compared, and the
// paper's figures to print beside ours. Expanding a scenario at one point
// gives the JobSpecs the runner starts. Value types; thread-compatible.
// Used by msched bench and its tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "msched/status.h"
#include "suite/runner.h"

namespace msched::bench {

// When the jobs of one kind are submitted, in milliseconds of device time:
// an explicit trace, or a seeded Poisson process (exponential gaps at
// `per_s` jobs per second from `start_ms`). Unset: all at time 0.
struct Arrivals {
  std::vector<double> at_ms;
  double per_s = 0;
  uint64_t seed = 1;
  double start_ms = 0;
  bool set() const { return !at_ms.empty() || per_s > 0; }
  // The arrival of each of `count` jobs, in nanoseconds, non-decreasing.
  std::vector<uint64_t> Times(int count) const;
};

// One kind of job in a scenario, started `count` times.
struct ScenarioJob {
  std::string label;
  int count = 1;  // 0: as many as `hbm_share` gives at the point's footprint
  std::string user = "user";
  JobClass job_class = JobClass::kUnset;
  int priority = 0;  // MSCHED_PRIORITY (an urgent job: above 0)
  Arrivals full_arrivals, quick_arrivals;
  std::string workload;  // under bench/workloads
  // How its device buffers are allocated: "" as the workload says, "vmm"
  // (msim-run --vmm: mapped through the VMM API, as vLLM's allocator) or
  // "expandable" (--expandable: PyTorch's expandable segments).
  std::string allocator;
  // Or a real program's profile trace under bench/traces (xz), replayed
  // (msim-run --replay); the quick form may name a smaller one. Such a job's
  // footprint is its program's, its work one run: `share` is then the part
  // of the point's footprint its instances make up together (1 when unset).
  std::string trace_full, trace_quick;
  double share = 0;          // of the point's total footprint, per job
  double hbm_share = 0;      // of HBM, per job (when share is 0)
  std::string work_var;      // the variable counting its work units (TASKS, STEPS)
  std::string instance_var;  // set to each instance's index from 0 (a service's MODEL)
  std::string unit;          // what a work unit is, for reports ("tasks", "tokens")
  std::map<std::string, int64_t> vars, full_vars, quick_vars;
  // Variables of each profiling run (beside quick_vars), for shapes that
  // must differ between runs for msched-profile to tell how extents scale:
  // three distinct sizes tell a product of two arguments from a line. Empty:
  // two runs with quick_vars, differing only in footprint.
  std::vector<std::map<std::string, int64_t>> profile_vars;
};

// A policy as the scenario names it: "msched-fixed-20ms" is msched with
// fixed 20 ms slices.
struct PolicyVariant {
  std::string name;
  Policy policy = Policy::kMsched;
  uint64_t fixed_slice_ns = 0;
  // Its jobs declare no memory though the scenario's do: the coordinator
  // learns each job's size only as it allocates.
  bool undeclared = false;
};

struct Scenario {
  std::string name, title, description;
  // Reported as users feel it (waits, OOMs, completion by user), not as a
  // throughput sweep; jobs declare their memory and class.
  bool multiuser = false;
  // Every job declares its footprint (MSCHED_MEM), as multi-user jobs do.
  bool declare_memory = false;
  bool headline = false;                                // its msched speedups go in the headline table
  std::string hbm_full = "profile", hbm_quick = "64M";  // "profile": the device profile's HBM
  std::vector<int> points_full, points_quick;           // total footprint, percent of HBM
  std::vector<PolicyVariant> policies;
  double oversubscribe = 4.0;  // the coordinator's admission ratio
  // What the multi-user report checks msched against (0: not checked):
  // short jobs' mean wait over exclusive's, makespan over exclusive's, GPU
  // busy at most this many points below the best baseline, the users'
  // completion spread below every baseline's, the urgent job's time over
  // its time alone plus one swap of its memory at 90% of the link, and
  // services' p99 latency over the model-swapping server's.
  struct Targets {
    double short_wait_vs_exclusive = 0, makespan_vs_exclusive = 0, busy_points = 0, urgent_vs_alone = 0;
    double p99_vs_swap = 0;  // services: msched's p99 request latency over the swap server's
    bool spread_below_baselines = false;
  } targets;
  // Why a target is missed, by its name in "targets" ("ooms" for msched's
  // OOMs), as found when it was analysed: the report prints it under a miss.
  std::map<std::string, std::string> shortfalls;
  // Services: a request answered within this many milliseconds meets its
  // SLO; the swap policy runs this workload, with the first job kind's
  // variables and its own, once in place of the service instances.
  double slo_ms_full = 0, slo_ms_quick = 0;
  std::string swap_workload;
  std::map<std::string, int64_t> swap_vars;
  // nocheck: how long after a crash a job is submitted again.
  double retry_delay_ms_full = 0, retry_delay_ms_quick = 0;
  // How often per work unit every byte beyond HBM must cross the link (a job
  // that streams all its data once per step: 1). 0: at least once in all.
  // The ideal counts the bytes beyond HBM that many times.
  double link_passes_per_unit = 0;
  std::vector<ScenarioJob> jobs;
  // Where its jobs come from when not the simulator's own kernels, for the
  // headline table ("replayed from an H200 trace").
  std::string source;
  std::map<int, double> paper_speedup;  // msched over um, by footprint percent
  std::string paper_note;
};

// Reads every scenario in `dir`, in the order of their "order" fields;
// "jobs_from" takes another scenario's HBM and jobs.
Result<std::vector<Scenario>> LoadScenarios(const std::string& dir);

// The jobs of `s` at `percent` of `hbm_bytes`. Quick runs compute results
// (checksums); full runs model time only, so they neither write inputs nor
// hold data in host memory.
struct Point {
  int percent = 0;  // as asked
  uint64_t hbm_bytes = 0;
  uint64_t footprint = 0;  // of all jobs together
  std::vector<JobSpec> jobs;
  std::vector<uint64_t> work;  // work units of each job
  std::vector<std::string> units;
  std::vector<size_t> kinds;  // each job's entry in Scenario::jobs
  uint64_t total_work() const {
    uint64_t sum = 0;
    for (uint64_t w : work) sum += w;
    return sum;
  }
};
// A replayed trace, decompressed: where it lies and its program's peak
// allocated bytes. By file name under bench/traces.
struct TraceFile {
  std::string path;
  uint64_t footprint = 0;
};
using TraceFiles = std::map<std::string, TraceFile>;

// The trace a job replays at this form ("" for a workload's job).
const std::string& TraceOf(const ScenarioJob& job, bool quick);

// HBM "programs": twice the largest replayed program, so that each fits
// alone with room for another as large.
uint64_t ProgramsHbm(const Scenario& s, bool quick, const TraceFiles& traces);

// A trace job's instances: as many of its program as make up `share` of the
// point's footprint, at least one.
Point Expand(const Scenario& s, int percent, uint64_t hbm_bytes, bool quick, const TraceFiles& traces = {});

// The swap policy's one job at `p`: Scenario::swap_workload over the first
// service instance's variables and footprint, with swap_vars, answering every
// request (MODEL -1).
JobSpec SwapServer(const Scenario& s, const Point& p);

}  // namespace msched::bench

// Running a set of jobs (msim-run workloads, each its own process) on one
// fresh simulated GPU under one policy, and collecting what each job did:
// its exit, checksums, when it started and finished on the device clock,
// faults, migrations and kernel time (from the simulator's statistics), and
// what libmsched did (from the hook's).
// Policies:
//   off, um, alloc         all jobs at once, uncoordinated (msched modes off/um/alloc)
//   msched                 all at once under a coordinator (templates + OPT + time slices)
//   msched-alloc           the same with whole-allocation prediction (ablation)
//   msched-lru             the same with LRU eviction in each job (ablation)
//   exclusive              one job at a time in arrival order (mode off): what a
//                          scheduler that gives each job a whole GPU (a Slurm
//                          gres) does
//   nocheck                all at once on arrival in plain device memory, with
//                          no memory check (plain CUDA or MPS): a job that runs
//                          out of memory crashes, loses its work and is run
//                          again from the start `retry_delay_ns` later, up to
//                          `max_attempts` runs
//   swap                   the scenario's model-swapping server (Scenario::swap_server)
//                          in place of its service instances, plain device memory
// Every job arrives at its JobSpec::arrival_ns on the device clock. Jobs that
// run together start together (the simulator's start barrier) and then each
// waits for its arrival in virtual time, so runs repeat; under exclusive a
// job starts at its arrival or at its predecessor's end, whichever is later.
// With a trace path, the run's timeline goes there (docs/tracing.md): the
// coordinator's, the jobs' own (MSCHED_TRACE), and for runs without a
// coordinator each job's span from its first launch to its end, merged.
// Thread-compatible. Used by msched bench and the coordinator's process tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "msched/config.h"
#include "msched/status.h"

namespace msched::bench {

// A simulated device (MSIM_DEVICE) of this benchmark's own: named with
// `prefix`, the process id and a serial, removed from /dev/shm when this
// goes. A device already under that name is a dead run's (pids are unique
// among live processes; a killed run leaves its devices), so it is removed
// first: one made by an older simulator would refuse the jobs.
class ScratchDevice {
 public:
  explicit ScratchDevice(const std::string& prefix);
  ~ScratchDevice();
  ScratchDevice(const ScratchDevice&) = delete;
  ScratchDevice& operator=(const ScratchDevice&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

struct BenchPaths {
  std::string msim_run;  // the workload runner
  std::string msched_profile;
  std::string libmsched;
  std::string sim_lib_dir;    // holds the simulator's libcuda.so.1
  std::string workloads_dir;  // bench/workloads
  std::string traces_dir;     // bench/traces: real programs' profile traces (xz)
  std::string scenarios_dir;  // bench/scenarios
  std::string devices_dir;    // the simulator's device profiles
  // Beside the running program: a build tree (tools/, sim/, hook/) or an install.
  static Result<BenchPaths> Locate();
};

struct JobSpec {
  std::string label;  // for reports: "vadd-1"
  std::string user = "user";
  std::string workload;   // file name under the workloads directory
  std::string trace;      // or a profile trace to replay (msim-run --replay), its path
  std::string allocator;  // ScenarioJob::allocator: msim-run --vmm or --expandable when set
  std::map<std::string, int64_t> vars;
  uint64_t footprint = 0;  // bytes (for reports and MSCHED_MEM)
  bool declare_memory = false;
  JobClass job_class = JobClass::kUnset;
  int priority = 0;
  uint64_t work_units = 0;  // tasks or tokens the job completes, for throughput
  std::string templates;    // MSCHED_TEMPLATES for this job; empty: RunOptions::templates
  uint64_t arrival_ns = 0;  // when it is submitted, on the device clock
};

enum class Policy { kOff, kUm, kAlloc, kMsched, kMschedAlloc, kMschedLru, kExclusive, kNoCheck, kSwap };
const char* PolicyName(Policy p);
Result<Policy> ParsePolicy(const std::string& name);

struct RunOptions {
  Policy policy = Policy::kMsched;
  std::string device_profile = "rtx5080-pcie5";
  uint64_t hbm_bytes = 0;        // 0: the profile's
  bool host_kernels = true;      // compute results (checksums) or only model the timing
  double oversubscribe = 4.0;    // coordinator admission ratio
  uint64_t fixed_slice_ns = 0;   // 0: adaptive slices
  int max_attempts = 3;          // nocheck: runs of a job that keeps running out of memory
  uint64_t retry_delay_ns = 0;   // nocheck: from a crash to the job's next run
  uint64_t timeout_ms = 600000;  // per run, real time
  std::string templates;         // MSCHED_TEMPLATES for the jobs ("": none)
  std::string trace_path;        // where the run's timeline goes ("": none)
  bool belady = false;           // log msched's accesses and compute Belady's minimum
  // The simulated device's own tracks join that timeline (MSIM_TRACE): one
  // span per stretch of each engine's work, many in a long run, so only for
  // timelines asked for (msched bench --trace).
  bool device_trace = false;
};

struct JobOutcome {
  int status = -1;       // the job's exit status
  int ooms = 0;          // runs that ran out of device memory
  uint64_t lost_ns = 0;  // device time those runs had worked before they crashed
  std::string error;     // the last attempt's message, if it failed
  std::map<std::string, std::string> checksums;
  uint64_t arrival_ns = 0;   // device clock when it was submitted
  uint64_t started_ns = 0;   // device clock when its first kernel was queued
  uint64_t finished_ns = 0;  // device clock at its end
  uint64_t faults = 0, fault_stall_ns = 0, kernel_ns = 0;
  uint64_t compute_ns = 0;  // kernel work alone, as if all its data were resident
  uint64_t h2d_fault_bytes = 0, h2d_prefetch_bytes = 0, h2d_copy_bytes = 0, d2h_bytes = 0;
  // Belady's minimum host-to-device bytes for the accesses this run made,
  // on its GPU (suite/belady.h), when RunOptions::belady asked for it; or
  // why it could not be had.
  uint64_t belady_h2d_bytes = 0;
  // OPT's bytes with each kernel's memory resident at once, on all of HBM
  // and on a lone job's working-set budget (BeladyBound), and that budget.
  uint64_t opt_kernel_h2d_bytes = 0, opt_kernel_budget_h2d_bytes = 0, opt_budget_bytes = 0;
  std::string belady_error;
  uint64_t coordinator_wait_ns = 0;    // blocked at its gate (hook statistics)
  std::vector<uint64_t> latencies_ns;  // a service's requests, arrival to answer
  bool ok() const { return status == 0; }
};

struct RunOutcome {
  Policy policy = Policy::kMsched;
  std::vector<JobOutcome> jobs;  // in JobSpec order
  uint64_t makespan_ns = 0;      // the last job's end
  uint64_t switches = 0;         // coordinator switches (msched policies)
  std::string error;             // the run itself failed (not a job)
  std::string trace_error;       // the timeline is missing or incomplete (the run may be fine)
  bool belady = false;           // its jobs' Belady minima were computed (JobOutcome)
};

// Runs `jobs` (submitted together, in this order) under `o`.
RunOutcome RunJobs(const std::vector<JobSpec>& jobs, const RunOptions& o, const BenchPaths& paths);

}  // namespace msched::bench

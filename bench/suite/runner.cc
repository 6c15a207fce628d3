#include "suite/runner.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/chrome_trace.h"
#include "base/libmsched_path.h"
#include "base/subprocess.h"
#include "coord/coord_server.h"
#include "coord/timeline.h"
#include "msched/json_checked.h"
#include "msched/trace_layout.h"
#include "suite/belady.h"
#include "suite/json_file.h"

namespace msched::bench {

ScratchDevice::ScratchDevice(const std::string& prefix) {
  static std::atomic<int> serial{0};
  name_ = prefix + std::to_string(getpid()) + "_" + std::to_string(serial++);
  ::unlink(("/dev/shm/msim-" + name_).c_str());
}

ScratchDevice::~ScratchDevice() { ::unlink(("/dev/shm/msim-" + name_).c_str()); }

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::pair<Policy, const char*> kPolicies[] = {{Policy::kOff, "off"},
                                                        {Policy::kUm, "um"},
                                                        {Policy::kAlloc, "alloc"},
                                                        {Policy::kMsched, "msched"},
                                                        {Policy::kMschedAlloc, "msched-alloc"},
                                                        {Policy::kMschedLru, "msched-lru"},
                                                        {Policy::kExclusive, "exclusive"},
                                                        {Policy::kNoCheck, "nocheck"},
                                                        {Policy::kSwap, "swap"}};

bool Coordinated(Policy p) { return p == Policy::kMsched || p == Policy::kMschedAlloc || p == Policy::kMschedLru; }

const char* ModeFor(Policy p) {
  switch (p) {
    case Policy::kUm: return "um";
    case Policy::kAlloc:
    case Policy::kMschedAlloc: return "alloc";
    case Policy::kMsched:
    case Policy::kMschedLru: return "msched";
    default: return "off";
  }
}

// A run's statistics; discarded when missing or unreadable (the run failed).
json ReadJson(const std::string& path) {
  std::string error;
  return ReadJsonFile(path, &error);
}

std::string Slurp(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

// One run's scratch directory, simulated device and (for msched) coordinator.
class Stage {
 public:
  Stage(const RunOptions& o, const BenchPaths& paths) : o_(o), paths_(paths) {
    static int serial = 0;
    const char* tmp = std::getenv("TMPDIR");
    const std::string id = std::to_string(getpid()) + "_" + std::to_string(serial++);
    dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/msched-bench-" + id;
    fs::create_directories(dir_);
    ::chmod(dir_.c_str(), 0700);
    if (!o_.trace_path.empty()) fs::create_directories(JobTraceDir());
  }
  ~Stage() {
    if (server_) {
      server_->Shutdown();
      thread_.join();
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The coordinator's policy for these runs (hbm_bytes 0: learnt from the
  // first job's device).
  SchedulerOptions Policy() const {
    SchedulerOptions p;
    p.hbm_bytes = o_.hbm_bytes;
    p.oversubscribe = o_.oversubscribe;
    p.fixed_slice_ns = o_.fixed_slice_ns;
    return p;
  }

  Status StartCoordinator() {
    ServerOptions so;
    so.socket_path = dir_ + "/coord.sock";
    so.policy = Policy();
    if (!o_.trace_path.empty()) so.trace_path = CoordTracePath();
    Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(so);
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->Run(); });
    return Status::Ok();
  }
  uint64_t switches() const { return server_ ? server_->switches() : 0; }

  // A job's span, as the runner saw it (for the timeline of runs without a
  // coordinator).
  struct JobSpan {
    int64_t pid;
    std::string label;
    uint64_t started_ns, finished_ns;
  };
  // Stops the coordinator (closing its timeline) and merges the run's
  // timeline into RunOptions::trace_path.
  Status WriteTrace(const std::vector<JobSpan>& spans) {
    if (server_) {
      server_->Shutdown();
      thread_.join();
      server_.reset();
    }
    std::vector<std::string> inputs;
    if (fs::exists(CoordTracePath())) inputs.push_back(CoordTracePath());
    if (!spans.empty()) {
      const std::string runner = dir_ + "/runner.trace.json";
      Result<std::unique_ptr<trace::Writer>> w = trace::Writer::Create(runner, kMaxTraceBytes);
      if (!w.ok()) return w.status();
      for (const JobSpan& a : spans) {
        (*w)->Write(trace::ProcessName(a.pid, a.label));
        (*w)->Write(trace::ThreadName(a.pid, trace::kJobStateTid, "state (msched bench: first launch to end)"));
        if (a.finished_ns > a.started_ns) {
          (*w)->Write({'X', trace::kRunning, "job", a.started_ns, a.finished_ns - a.started_ns, a.pid,
                       trace::kJobStateTid, nullptr});
        }
      }
      if (Status s = (*w)->Close(); !s.ok()) return s;
      inputs.push_back(runner);
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(JobTraceDir(), ec)) inputs.push_back(entry.path().string());
    return trace::MergeTraceFiles(inputs, o_.trace_path, kMaxTraceBytes);
  }

  // Starts job `i`; `barrier` > 1 makes it start with that many others.
  Result<Subprocess> Spawn(const JobSpec& job, size_t i, size_t barrier) const {
    std::vector<std::string> argv = {paths_.msim_run};
    if (job.trace.empty()) {
      argv.push_back(paths_.workloads_dir + "/" + job.workload);
    } else {
      argv.insert(argv.end(), {"--replay", job.trace});
    }
    argv.insert(argv.end(), {"--json", File(i, "json")});
    if (!job.allocator.empty()) argv.push_back("--" + job.allocator);
    for (const auto& [k, v] : job.vars) argv.insert(argv.end(), {"--set", k + "=" + std::to_string(v)});
    if (!o_.host_kernels) argv.push_back("--no-checksum");
    if (job.arrival_ns > 0) argv.insert(argv.end(), {"--arrive-ns", std::to_string(job.arrival_ns)});
    if (o_.policy == Policy::kNoCheck) {
      argv.insert(argv.end(), {"--attempts", std::to_string(o_.max_attempts), "--retry-delay-ns",
                               std::to_string(o_.retry_delay_ns)});
    }
    SpawnOptions s;
    s.env = {{"LD_LIBRARY_PATH", paths_.sim_lib_dir},
             {"MSIM_DEVICE", device_.name()},
             {"MSIM_PROFILE", o_.device_profile},
             {"MSIM_STATS", File(i, "sim.json")},
             {"MSIM_RANK", std::to_string(i)},  // calls at equal virtual times go in job order
             {"LD_PRELOAD", paths_.libmsched},
             {"MSCHED_MODE", ModeFor(o_.policy)},
             {"MSCHED_STATS", File(i, "hook.json")},
             {"MSCHED_JOB_NAME", job.label},
             {"MSCHED_TEMPLATES", job.templates.empty() ? o_.templates : job.templates},
             {"MSCHED_COORD", Coordinated(o_.policy) ? "required" : "off"},
             {"MSCHED_SOCKET", dir_ + "/coord.sock"},
             {"MSCHED_PRIORITY", std::to_string(job.priority)}};
    if (!o_.trace_path.empty()) s.env["MSCHED_TRACE"] = JobTraceDir();
    if (o_.hbm_bytes > 0) s.env["MSIM_HBM_BYTES"] = std::to_string(o_.hbm_bytes);
    if (!o_.host_kernels) s.env["MSIM_HOST_KERNELS"] = "off";
    if (barrier > 1) s.env["MSIM_START_BARRIER"] = std::to_string(barrier);
    if (job.declare_memory) s.env["MSCHED_MEM"] = std::to_string(job.footprint);
    if (job.job_class != JobClass::kUnset) s.env["MSCHED_CLASS"] = JobClassName(job.job_class);
    if (o_.policy == Policy::kMschedLru) s.env["MSCHED_EVICTION"] = "lru";
    if (LogsAccesses()) s.env["MSIM_ACCESS_LOG"] = File(i, "access");
    s.unset_env = {"MSCHED_GPU_MEMORY", "MSCHED_LOG", "MSCHED_LOG_LEVEL", "MSCHED_UNKNOWN"};
    if (o_.trace_path.empty()) s.unset_env.push_back("MSCHED_TRACE");
    if (!o_.trace_path.empty() && o_.device_trace) {
      s.env["MSIM_TRACE"] = JobTraceDir();
    } else {
      s.unset_env.push_back("MSIM_TRACE");
    }
    if (s.env["MSCHED_TEMPLATES"].empty()) s.unset_env.push_back("MSCHED_TEMPLATES"), s.env.erase("MSCHED_TEMPLATES");
    s.stdout_path = File(i, "out");
    s.stderr_path = File(i, "err");
    return Subprocess::Spawn(argv, s);
  }

  // Reads what job `i` left behind.
  void Collect(size_t i, int status, JobOutcome* out) const {
    out->status = status;
    const std::string err = Slurp(File(i, "err"));
    out->error = status == 0 ? "" : err.substr(0, err.find('\n'));
    const json run = ReadJson(File(i, "json"));
    const json sim = ReadJson(File(i, "sim.json"));
    const json hook = ReadJson(File(i, "hook.json"));
    out->ooms = static_cast<int>(JsonU64(run, {"ooms"}));
    out->lost_ns = JsonU64(run, {"lost_ns"});
    out->checksums.clear();
    if (run.is_object() && run.contains("checksums")) {
      for (const auto& [k, v] : run["checksums"].items()) out->checksums[k] = v.get<std::string>();
    }
    out->started_ns = JsonU64(run, {"first_launch_ns"});
    out->finished_ns = JsonU64(run, {"virtual_time_ns"});
    out->faults = JsonU64(sim, {"faults"});
    out->fault_stall_ns = JsonU64(sim, {"fault_stall_ns"});
    out->kernel_ns = JsonU64(sim, {"kernel_ns"});
    out->compute_ns = JsonU64(sim, {"compute_ns"});
    out->h2d_fault_bytes = JsonU64(sim, {"bytes", "h2d", "fault"});
    out->h2d_prefetch_bytes = JsonU64(sim, {"bytes", "h2d", "prefetch"});
    out->h2d_copy_bytes = JsonU64(sim, {"bytes", "h2d", "memcpy"});
    out->d2h_bytes = JsonU64(sim, {"bytes", "d2h", "eviction"}) + JsonU64(sim, {"bytes", "d2h", "prefetch"});
    if (LogsAccesses() && status == 0) {
      // A job alone gets the coordinator's whole working-set budget.
      SchedulerOptions alone = Policy();
      alone.hbm_bytes = JsonU64(sim, {"device", "hbm_bytes"});
      const uint64_t budget = UsableHbm(alone);
      Result<BeladyBound> bound = BeladyMinimum(File(i, "access"), alone.hbm_bytes, budget);
      if (bound.ok()) {
        out->belady_h2d_bytes = bound->h2d_bytes;
        out->opt_kernel_h2d_bytes = bound->whole_operation_h2d_bytes;
        out->opt_kernel_budget_h2d_bytes = bound->whole_operation_budget_h2d_bytes;
        out->opt_budget_bytes = budget;
      } else {
        out->belady_error = bound.status().message();
      }
    }
    out->coordinator_wait_ns = JsonU64(hook, {"coordinator", "wait_ns"});
    out->latencies_ns.clear();
    if (run.is_object() && run.contains("latency_ns") && run["latency_ns"].is_array()) {
      for (const json& l : run["latency_ns"]) {
        if (l.is_number_unsigned()) out->latencies_ns.push_back(l.get<uint64_t>());
      }
    }
  }

 private:
  static constexpr uint64_t kMaxTraceBytes = uint64_t{256} << 20;

  std::string File(size_t i, const char* ext) const { return dir_ + "/job" + std::to_string(i) + "." + ext; }
  // msched's runs are set beside Belady's minimum for their accesses.
  bool LogsAccesses() const { return o_.belady && o_.policy == Policy::kMsched; }
  std::string CoordTracePath() const { return dir_ + "/coord.trace.json"; }
  std::string JobTraceDir() const { return dir_ + "/traces"; }

  const RunOptions& o_;
  const BenchPaths& paths_;
  std::string dir_;
  ScratchDevice device_{"bench"};
  std::unique_ptr<CoordServer> server_;
  std::thread thread_;
};

struct Running {
  Subprocess process;
  size_t job;
};

}  // namespace

const char* PolicyName(Policy p) {
  for (const auto& [value, name] : kPolicies) {
    if (value == p) return name;
  }
  return "?";
}

Result<Policy> ParsePolicy(const std::string& name) {
  for (const auto& [value, n] : kPolicies) {
    if (name == n) return value;
  }
  return Status::InvalidArgument("unknown policy '" + name + "'");
}

Result<BenchPaths> BenchPaths::Locate() {
  BenchPaths p;
  const std::string dir = ExecutableDir();
  Result<std::string> lib = FindLibmsched();
  if (!lib.ok()) return lib.status();
  p.libmsched = *lib;
  p.msched_profile = dir + "/msched-profile";
  // An installed msched finds the suite's data in <datadir>/msched
  // (packaging/install_layout.cmake); one in a build tree, the source tree's.
  const std::string share = dir + "/" MSCHED_DATADIR_FROM_BINDIR;
  const bool installed = access((share + "/bench/scenarios").c_str(), R_OK) == 0;
  p.workloads_dir = installed ? share + "/bench/workloads" : MSCHED_BENCH_DIR "/workloads";
  p.scenarios_dir = installed ? share + "/bench/scenarios" : MSCHED_BENCH_DIR "/scenarios";
  p.traces_dir = installed ? share + "/bench/traces" : MSCHED_BENCH_DIR "/traces";
  p.devices_dir = installed ? share + "/templates/devices" : MSCHED_DEVICES_DIR;
  // The simulated GPU is never installed: MSCHED_SIM_DIR names one (a build
  // tree's sim/); msched in a build tree uses its own.
  const char* sim = std::getenv("MSCHED_SIM_DIR");
  const std::string sim_dir = sim != nullptr && *sim != '\0' ? sim : dir + "/../sim";
  p.msim_run = sim_dir + "/msim-run";
  p.sim_lib_dir = sim_dir + "/lib";
  for (const std::string& need : {p.msim_run, p.sim_lib_dir + "/libcuda.so.1", p.workloads_dir, p.msched_profile}) {
    if (access(need.c_str(), R_OK) != 0) {
      return Status::NotFound("the benchmark needs " + need +
                              " (it runs on the simulated GPU: set MSCHED_SIM_DIR to a build tree's sim/)");
    }
  }
  return p;
}

RunOutcome RunJobs(const std::vector<JobSpec>& jobs, const RunOptions& o, const BenchPaths& paths) {
  RunOutcome out;
  out.policy = o.policy;
  out.belady = o.belady && o.policy == Policy::kMsched;
  out.jobs.resize(jobs.size());
  Stage stage(o, paths);
  if (Coordinated(o.policy)) {
    if (Status s = stage.StartCoordinator(); !s.ok()) {
      out.error = s.message();
      return out;
    }
  }
  const bool together = o.policy != Policy::kExclusive;
  const size_t slots = together ? jobs.size() : 1;
  std::vector<size_t> queue(jobs.size());  // in arrival order (submission order among equals)
  for (size_t i = 0; i < jobs.size(); ++i) queue[i] = i;
  std::stable_sort(queue.begin(), queue.end(),
                   [&](size_t a, size_t b) { return jobs[a].arrival_ns < jobs[b].arrival_ns; });
  size_t next = 0;
  std::vector<Running> running;
  std::vector<Stage::JobSpan> spans;  // for the timeline, when no coordinator draws one
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
  while (next < queue.size() || !running.empty()) {
    while (next < queue.size() && running.size() < slots) {
      const size_t i = queue[next++];
      Result<Subprocess> p = stage.Spawn(jobs[i], i, together ? jobs.size() : 0);
      if (!p.ok()) {
        out.jobs[i].error = p.status().message();
        continue;
      }
      running.push_back({std::move(*p), i});
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (Running& r : running) r.process.Kill(SIGKILL), r.process.Wait();
      out.error = "timed out after " + std::to_string(o.timeout_ms / 1000) + " s";
      break;
    }
    bool progressed = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (!it->process.Poll(&status)) {
        ++it;
        continue;
      }
      progressed = true;
      JobOutcome& j = out.jobs[it->job];
      stage.Collect(it->job, status, &j);
      j.arrival_ns = jobs[it->job].arrival_ns;  // as submitted (a job may start later: exclusive)
      if (!Coordinated(o.policy)) {
        spans.push_back({it->process.pid(), jobs[it->job].label, j.started_ns, j.finished_ns});
      }
      it = running.erase(it);
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const JobOutcome& j : out.jobs) out.makespan_ns = std::max(out.makespan_ns, j.finished_ns);
  out.switches = stage.switches();
  if (!o.trace_path.empty()) {
    if (Status s = stage.WriteTrace(spans); !s.ok()) out.trace_error = s.message();
  }
  return out;
}

}  // namespace msched::bench

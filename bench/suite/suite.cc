#include "suite/suite.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "msched/config.h"
#include "profile/trace.h"
#include "suite/json_file.h"

namespace msched::bench {
namespace {

using json = nlohmann::json;

// Footprint of profiling run k: small, and different in every run, so that a
// linear rule can be told from a fixed one.
int64_t ProfileFoot(size_t run) { return static_cast<int64_t>(2 + run) << 20; }

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Whether `run` of job set `point` is correct beside `reference`: every job
// finished, and (when results were computed) with the same checksums.
std::string Check(const RunOutcome& run, const RunOutcome* reference, const Point& point) {
  if (!run.error.empty()) return run.error;
  for (size_t i = 0; i < run.jobs.size(); ++i) {
    const JobOutcome& j = run.jobs[i];
    if (!j.ok())
      return point.jobs[i].label + " failed: " + (j.error.empty() ? "exit " + std::to_string(j.status) : j.error);
    if (reference != nullptr && reference->jobs[i].ok() && j.checksums != reference->jobs[i].checksums) {
      return point.jobs[i].label + ": results differ from the reference run's";
    }
  }
  return "";
}

// The nearest-rank percentile `q` of sorted `v` (0 when empty).
uint64_t Percentile(const std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0;
  return v[std::max<size_t>(1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())))) - 1];
}

PolicyResult Derive(const PolicyVariant& v, RunOutcome run, const Point& point, uint64_t slo_ns) {
  PolicyResult r;
  r.variant = v;
  r.run = std::move(run);
  r.seconds = static_cast<double>(r.run.makespan_ns) / 1e9;
  for (const JobOutcome& j : r.run.jobs) {
    r.faults += j.faults;
    r.h2d_bytes += j.h2d_fault_bytes + j.h2d_prefetch_bytes + j.h2d_copy_bytes;
    r.prefetch_bytes += j.h2d_prefetch_bytes;
    r.paging_h2d_bytes += j.h2d_fault_bytes + j.h2d_prefetch_bytes;
    r.belady_h2d_bytes += j.belady_h2d_bytes;
    r.opt_kernel_h2d_bytes += j.opt_kernel_h2d_bytes;
    r.opt_kernel_budget_h2d_bytes += j.opt_kernel_budget_h2d_bytes;
    r.opt_budget_bytes = std::max(r.opt_budget_bytes, j.opt_budget_bytes);
    if (!j.belady_error.empty() && r.belady_error.empty()) r.belady_error = j.belady_error;
    r.d2h_bytes += j.d2h_bytes;
    r.compute_ns += j.compute_ns;
    r.stall_ns += j.fault_stall_ns;
    r.wait_ns += j.coordinator_wait_ns;
  }
  r.throughput = r.seconds > 0 ? static_cast<double>(point.total_work()) / r.seconds : 0;
  std::vector<uint64_t> waits;
  uint64_t short_wait = 0, shorts = 0;
  for (size_t i = 0; i < r.run.jobs.size(); ++i) {
    const JobOutcome& j = r.run.jobs[i];
    r.ooms += j.ooms;
    r.lost_ns += j.lost_ns;
    const uint64_t wait = j.started_ns > j.arrival_ns ? j.started_ns - j.arrival_ns : 0;
    waits.push_back(wait);
    if (point.jobs[i].job_class == JobClass::kShort) short_wait += wait, ++shorts;
    if (point.jobs[i].priority > 0 && j.finished_ns > j.arrival_ns) {
      r.urgent_ns = std::max(r.urgent_ns, j.finished_ns - j.arrival_ns);
    }
  }
  if (!waits.empty()) {
    std::sort(waits.begin(), waits.end());
    uint64_t sum = 0;
    for (uint64_t w : waits) sum += w;
    r.wait_mean_ns = sum / waits.size();
    r.wait_p95_ns = Percentile(waits, 0.95);
  }
  std::vector<uint64_t> latencies;
  for (const JobOutcome& j : r.run.jobs)
    latencies.insert(latencies.end(), j.latencies_ns.begin(), j.latencies_ns.end());
  std::sort(latencies.begin(), latencies.end());
  r.requests = latencies.size();
  r.latency_p50_ns = Percentile(latencies, 0.50);
  r.latency_p99_ns = Percentile(latencies, 0.99);
  const size_t met =
      static_cast<size_t>(std::upper_bound(latencies.begin(), latencies.end(), slo_ns) - latencies.begin());
  r.slo_met = latencies.empty() ? 0 : static_cast<double>(met) / static_cast<double>(latencies.size());
  r.short_wait_mean_ns = shorts ? short_wait / shorts : 0;
  r.busy = r.run.makespan_ns ? static_cast<double>(r.compute_ns) / static_cast<double>(r.run.makespan_ns) : 0;
  return r;
}

// Per user, the mean completion and slowdown of its jobs in every run of
// `pr`, each job's time alone taken from the exclusive run (when it ran),
// and the spread of the users' slowdowns.
void DeriveFairness(PointResult* pr) {
  const PolicyResult* alone = pr->Find(Policy::kExclusive);
  const bool have_alone = alone != nullptr && alone->ok();
  for (PolicyResult& r : pr->policies) {
    std::map<std::string, std::pair<double, double>> sums;  // user: completion ms, slowdown
    std::map<std::string, int> counts;
    for (size_t i = 0; i < r.run.jobs.size(); ++i) {
      const JobOutcome& j = r.run.jobs[i];
      const std::string& user = pr->point.jobs[i].user;
      const double completion = j.finished_ns > j.arrival_ns ? static_cast<double>(j.finished_ns - j.arrival_ns) : 0;
      sums[user].first += completion / 1e6;
      if (have_alone) {
        const JobOutcome& a = alone->run.jobs[i];
        const double solo = a.finished_ns > a.started_ns ? static_cast<double>(a.finished_ns - a.started_ns) : 0;
        sums[user].second += solo > 0 ? completion / solo : 0;
      }
      ++counts[user];
    }
    std::vector<double> spread;
    for (const auto& [user, sum] : sums) {
      r.user_completion_ms[user] = sum.first / counts[user];
      if (have_alone) r.user_slowdown[user] = sum.second / counts[user];
      spread.push_back(have_alone ? r.user_slowdown[user] : r.user_completion_ms[user]);
    }
    double mean = 0, var = 0;
    for (double v : spread) mean += v / static_cast<double>(spread.size());
    for (double v : spread) var += (v - mean) * (v - mean) / static_cast<double>(spread.size());
    r.user_cv = mean > 0 ? std::sqrt(var) / mean : 0;
  }
}

}  // namespace

const PolicyResult* PointResult::Find(Policy p) const {
  for (const PolicyResult& r : policies) {
    if (r.variant.policy == p && r.variant.fixed_slice_ns == 0 && !r.variant.undeclared) return &r;
  }
  return nullptr;
}

const PolicyResult* PointResult::Baseline() const {
  for (Policy p : {Policy::kExclusive, Policy::kNoCheck}) {
    if (const PolicyResult* r = Find(p)) return r;
  }
  for (const PolicyResult& r : policies) {
    if (&r != Find(Policy::kMsched)) return &r;
  }
  return nullptr;
}

Result<DeviceFacts> LoadDeviceFacts(const std::string& profile, const BenchPaths& paths) {
  const std::string path =
      profile.find('/') != std::string::npos ? profile : paths.devices_dir + "/" + profile + ".json";
  std::string error;
  const json j = ReadJsonFile(path, &error);
  if (j.is_discarded()) return Status::NotFound("no device profile '" + profile + "' (" + error + ")");
  if (!j.is_object() || !j.contains("hbm_bytes") || !j.contains("h2d_gbps") || !j.contains("d2h_gbps")) {
    return Status::NotFound("no device profile '" + profile + "' (looked for " + path + ")");
  }
  DeviceFacts d;
  d.name = j.value("name", profile);
  d.hbm_bytes = d.card_hbm_bytes = j["hbm_bytes"].get<uint64_t>();
  d.h2d_gbps = j["h2d_gbps"].get<double>();
  d.d2h_gbps = j["d2h_gbps"].get<double>();
  if (d.hbm_bytes == 0 || d.h2d_gbps <= 0 || d.d2h_gbps <= 0)
    return Status::InvalidArgument(path + ": zero capacity or bandwidth");
  return d;
}

std::string TemplatesKey(const ScenarioJob& job) {
  if (!job.trace_full.empty()) return "trace:" + job.trace_full + "," + job.trace_quick;
  std::string key = job.workload;
  std::map<std::string, int64_t> vars = job.vars;
  for (const auto& [k, v] : job.quick_vars) vars[k] = v;
  for (const auto& [k, v] : vars) key += "," + k + "=" + std::to_string(v);
  for (const auto& run : job.profile_vars) {
    for (const auto& [k, v] : run) key += ";" + k + "=" + std::to_string(v);
  }
  return key;
}

namespace {

// Runs `argv` to its end with its output in `stem`.log and .err; the
// error names `what` and the first line it printed on stderr.
Status RunTool(const std::vector<std::string>& argv, const std::string& stem, const std::string& what,
               SpawnOptions so = {}) {
  so.stdout_path = so.stdout_path.empty() ? stem + ".log" : so.stdout_path;
  so.stderr_path = stem + ".err";
  Result<Subprocess> p = Subprocess::Spawn(argv, so);
  if (!p.ok()) return p.status();
  if (p->Wait() == 0) return Status::Ok();
  std::ifstream err(so.stderr_path);
  std::string first;
  std::getline(err, first);
  return Status::Internal(what + " failed: " + first + " (see " + so.stderr_path + ")");
}

// Each trace the scenarios' jobs replay in this form, decompressed into
// the work directory, with its program's peak allocated bytes.
Result<TraceFiles> DecompressTraces(const std::vector<const Scenario*>& scenarios, const BenchPaths& paths,
                                    const SuiteOptions& o) {
  TraceFiles out;
  for (const Scenario* s : scenarios) {
    for (const ScenarioJob& job : s->jobs) {
      const std::string& name = TraceOf(job, o.quick);
      if (name.empty() || out.count(name)) continue;
      const std::string stem = o.work_dir + "/" + name.substr(0, name.size() - 3);  // without ".xz"
      SpawnOptions so;
      so.stdout_path = stem;
      MSCHED_RETURN_IF_ERROR(
          RunTool({"xz", "-dc", paths.traces_dir + "/" + name}, stem + ".xz", "decompressing " + name, so));
      TraceReadResult read = ReadTrace(stem);
      if (!read.status.ok()) return read.status;
      TraceFile file{stem, 0};
      uint64_t live = 0;
      std::map<uint64_t, uint64_t> sizes;
      for (const TraceAllocEvent& e : read.trace.allocs) {
        if (e.alloc) {
          live += e.size;
          sizes[e.base] = e.size;
          file.footprint = std::max(file.footprint, live);
        } else if (auto it = sizes.find(e.base); it != sizes.end()) {
          live -= it->second;
          sizes.erase(it);
        }
      }
      if (file.footprint == 0) return Status::InvalidArgument(name + " allocates nothing");
      out[name] = file;
    }
  }
  return out;
}

}  // namespace

Result<Prepared> Prepare(const std::vector<const Scenario*>& scenarios, const BenchPaths& paths,
                         const SuiteOptions& o) {
  Prepared prepared;
  Result<TraceFiles> replayed = DecompressTraces(scenarios, paths, o);
  if (!replayed.ok()) return replayed.status();
  prepared.traces = std::move(*replayed);
  std::map<std::string, std::string>& out = prepared.templates;
  for (const Scenario* s : scenarios) {
    for (const ScenarioJob& job : s->jobs) {
      const std::string key = TemplatesKey(job);
      if (out.count(key)) continue;
      const std::string stem = o.work_dir + "/profile" + std::to_string(out.size());
      if (const std::string& name = TraceOf(job, o.quick); !name.empty()) {
        // A real program: fitted from its own trace, as a user would.
        if (o.progress) o.progress("fitting templates to " + name + " (" + job.label + ") with msched-profile");
        const std::string templates = stem + ".templates.json";
        MSCHED_RETURN_IF_ERROR(RunTool({paths.msched_profile, "analyze", prepared.traces.at(name).path, "-o", templates,
                                        "--report", stem + ".report.md"},
                                       stem + ".analyze", "msched-profile analyze of " + name));
        out[key] = templates;
        continue;
      }
      if (o.progress) o.progress("profiling " + job.workload + " (" + job.label + ") with msched-profile");
      std::vector<std::string> traces;
      const size_t runs = std::max<size_t>(2, job.profile_vars.size());
      for (size_t run = 0; run < runs; ++run) {
        const int64_t foot = ProfileFoot(run);
        const std::string trace = stem + "_" + std::to_string(foot >> 20) + "M.jsonl";
        std::vector<std::string> argv = {
            paths.msched_profile,  "--trace", trace,          "-o",
            stem + ".unused.json", "--",      paths.msim_run, paths.workloads_dir + "/" + job.workload};
        std::map<std::string, int64_t> vars = job.vars;
        for (const auto& [k, v] : job.quick_vars) vars[k] = v;
        if (run < job.profile_vars.size()) {
          for (const auto& [k, v] : job.profile_vars[run]) vars[k] = v;
        }
        vars["FOOT"] = foot;
        vars[job.work_var] = 1;
        for (const auto& [k, v] : vars) argv.insert(argv.end(), {"--set", k + "=" + std::to_string(v)});
        const ScratchDevice device("benchprof");
        SpawnOptions so;
        so.env = {{"LD_LIBRARY_PATH", paths.sim_lib_dir},
                  {"MSIM_PROFILE", o.device_profile},
                  {"MSIM_DEVICE", device.name()},
                  {"MSIM_HOST_KERNELS", "off"}};
        MSCHED_RETURN_IF_ERROR(RunTool(argv, stem, "profiling " + job.workload, so));
        traces.push_back(trace);
      }
      const std::string templates = stem + ".templates.json";
      std::vector<std::string> argv = {paths.msched_profile, "analyze"};
      argv.insert(argv.end(), traces.begin(), traces.end());
      argv.insert(argv.end(), {"-o", templates, "--report", stem + ".report.md"});
      MSCHED_RETURN_IF_ERROR(RunTool(argv, stem + ".analyze", "msched-profile analyze for " + job.workload));
      out[key] = templates;
    }
  }
  return prepared;
}

// Scores `templates` on `trace` with `msched-profile check` into `a`
// (its per-kernel table beside `stem`).
void CheckOnTrace(const std::string& templates, const std::string& trace, const BenchPaths& paths,
                  const std::string& stem, TemplateAccuracy* a) {
  a->table = stem + ".md";
  const std::string json_path = stem + ".json";
  SpawnOptions quiet;
  quiet.stdout_path = "/dev/null";
  if (Status s = RunTool({paths.msched_profile, "check", templates, trace, "--report", a->table, "--json", json_path},
                         stem + ".check", "msched-profile check", quiet);
      !s.ok()) {
    a->error = s.message();
    return;
  }
  std::string error;
  const nlohmann::json j = ReadJsonFile(json_path, &error);
  if (!j.is_object() || !j.contains("total") || !j["total"].is_object()) {
    a->error = "unreadable check result: " + (error.empty() ? json_path : error);
    return;
  }
  const nlohmann::json& t = j["total"];
  a->touched_bytes = t.value("touched_bytes", uint64_t{0});
  a->predicted_bytes = t.value("predicted_bytes", uint64_t{0});
  a->fn_bytes = t.value("fn_bytes", uint64_t{0});
  a->fp_bytes = t.value("fp_bytes", uint64_t{0});
}

// How `job`'s templates predict what it touches: a replayed program on its
// own trace; a workload traced for one work unit at its size in the point
// (all memory managed, so that any size runs).
TemplateAccuracy CheckAtSize(const JobSpec& job, const ScenarioJob& kind, uint64_t hbm, const BenchPaths& paths,
                             const SuiteOptions& o, const std::string& stem) {
  TemplateAccuracy a;
  a.label = kind.label;
  a.workload = job.trace.empty() ? job.workload : TraceOf(kind, o.quick);
  if (!job.trace.empty()) {
    CheckOnTrace(job.templates, job.trace, paths, stem, &a);
    return a;
  }
  const std::string trace = stem + ".jsonl";
  std::vector<std::string> argv = {
      paths.msched_profile,  "--trace",      trace,          "-o",
      stem + ".unused.json", "--",           paths.msim_run, paths.workloads_dir + "/" + job.workload,
      "--managed",           "--no-checksum"};
  std::map<std::string, int64_t> vars = job.vars;
  vars[kind.work_var] = 1;
  for (const auto& [k, v] : vars) argv.insert(argv.end(), {"--set", k + "=" + std::to_string(v)});
  const ScratchDevice device("benchcheck");
  SpawnOptions so;
  so.env = {{"LD_LIBRARY_PATH", paths.sim_lib_dir},
            {"MSIM_PROFILE", o.device_profile},
            {"MSIM_DEVICE", device.name()},
            {"MSIM_HOST_KERNELS", "off"},
            {"MSIM_HBM_BYTES", std::to_string(hbm)}};
  if (Status s = RunTool(argv, stem, "the traced run", so); !s.ok()) {
    a.error = s.message();
    return a;
  }
  CheckOnTrace(job.templates, trace, paths, stem, &a);
  std::remove(trace.c_str());  // can be large; the table keeps what it showed
  return a;
}

ScenarioResult RunScenario(const Scenario& s, const DeviceFacts& device, const Prepared& prepared,
                           const BenchPaths& paths, const SuiteOptions& o) {
  ScenarioResult out;
  out.scenario = &s;
  out.quick = o.quick;
  const std::string hbm_text = o.quick ? s.hbm_quick : s.hbm_full;
  uint64_t hbm = device.hbm_bytes;
  if (hbm_text == "programs") {
    hbm = ProgramsHbm(s, o.quick, prepared.traces);
  } else if (hbm_text != "profile") {
    Result<uint64_t> parsed = ParseBytes(hbm_text);
    if (parsed.ok()) hbm = *parsed;
  }
  const std::vector<int>& percents = o.quick ? s.points_quick : s.points_full;
  for (int percent : percents) {
    PointResult pr;
    pr.point = Expand(s, percent, hbm, o.quick, prepared.traces);
    for (size_t i = 0; i < pr.point.jobs.size(); ++i) {
      const auto it = prepared.templates.find(TemplatesKey(s.jobs[pr.point.kinds[i]]));
      if (it != prepared.templates.end()) pr.point.jobs[i].templates = it->second;
    }
    for (size_t kind = 0; percent == percents.front() && kind < s.jobs.size(); ++kind) {
      for (size_t i = 0; i < pr.point.jobs.size(); ++i) {
        if (pr.point.kinds[i] != kind || pr.point.jobs[i].templates.empty()) continue;
        if (o.progress)
          o.progress("checking " + s.jobs[kind].label + "'s templates at " + std::to_string(percent) + "%");
        out.template_accuracy.push_back(CheckAtSize(pr.point.jobs[i], s.jobs[kind], hbm, paths, o,
                                                    o.work_dir + "/check-" + s.name + "-" + s.jobs[kind].label));
        break;
      }
    }
    // The report's Gantt plot draws two of the last point's runs (msched's
    // and PointResult::Baseline), so that point is always traced.
    const std::string trace_dir = !o.trace_dir.empty()         ? o.trace_dir
                                  : percent == percents.back() ? o.work_dir + "/traces"
                                                               : "";
    for (const PolicyVariant& v : s.policies) {
      RunOptions ro;
      ro.policy = v.policy;
      ro.device_profile = o.device_profile;
      ro.hbm_bytes = hbm;
      ro.host_kernels = o.quick;
      ro.belady = !s.multiuser;  // the sweep tables set msched beside it
      ro.oversubscribe = s.oversubscribe;
      ro.fixed_slice_ns = v.fixed_slice_ns;
      ro.retry_delay_ns = static_cast<uint64_t>((o.quick ? s.retry_delay_ms_quick : s.retry_delay_ms_full) * 1e6);
      if (!trace_dir.empty()) {
        std::filesystem::create_directories(trace_dir);
        ro.trace_path = trace_dir + "/" + s.name + "-" + std::to_string(percent) + "-" + v.name + ".json";
        ro.device_trace = !o.trace_dir.empty();
      }
      const auto start = std::chrono::steady_clock::now();
      std::vector<JobSpec> jobs =
          v.policy == Policy::kSwap ? std::vector<JobSpec>{SwapServer(s, pr.point)} : pr.point.jobs;
      if (v.undeclared) {
        for (JobSpec& j : jobs) j.declare_memory = false;
      }
      RunOutcome run = RunJobs(jobs, ro, paths);
      const double real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      pr.policies.push_back(
          Derive(v, std::move(run), pr.point, static_cast<uint64_t>((o.quick ? s.slo_ms_quick : s.slo_ms_full) * 1e6)));
      PolicyResult& done = pr.policies.back();
      if (!done.run.trace_error.empty() && o.progress) o.progress("timeline: " + done.run.trace_error);
      if (!ro.trace_path.empty() && std::filesystem::exists(ro.trace_path)) done.trace = ro.trace_path;
      if (o.progress) {
        o.progress(s.name + " " + std::to_string(percent) + "% " + v.name + ": " +
                   Fixed(pr.policies.back().seconds * 1e3, 1) + " ms simulated, " + Fixed(real_s, 1) + " s real");
      }
    }
    // The reference for results: a policy that ran every job in plain device
    // memory (exclusive or off) when the scenario has one that succeeded,
    // else the first that succeeded.
    const PolicyResult* reference = nullptr;
    for (const PolicyResult& r : pr.policies) {
      if (r.variant.policy == Policy::kSwap) continue;
      const bool plain = r.variant.policy == Policy::kExclusive || r.variant.policy == Policy::kOff;
      if (Check(r.run, nullptr, pr.point).empty() && (reference == nullptr || plain)) reference = &r;
    }
    uint64_t largest = 0;  // the largest job: plain device memory cannot run one beyond HBM
    for (const JobSpec& j : pr.point.jobs) largest = std::max(largest, j.footprint);
    for (PolicyResult& r : pr.policies) {
      // The swap server is another program than the instances: nothing to compare its results with.
      const bool comparable = o.quick && reference != nullptr && r.variant.policy != Policy::kSwap;
      r.problem = Check(r.run, comparable ? &reference->run : nullptr, pr.point);
      const bool plain = r.variant.policy == Policy::kExclusive || r.variant.policy == Policy::kOff ||
                         r.variant.policy == Policy::kNoCheck;
      r.cannot_run = !r.ok() && plain && largest > hbm;
      r.out_of_memory = !r.ok() && !r.cannot_run && r.variant.policy == Policy::kNoCheck && r.ooms > 0;
    }
    DeriveFairness(&pr);
    for (size_t i = 0; i < pr.point.jobs.size(); ++i) {
      uint64_t least = 0;
      for (const PolicyResult& r : pr.policies) {
        if (r.run.jobs.size() != pr.point.jobs.size()) continue;  // the swap server ran other jobs
        const uint64_t c = r.run.jobs[i].compute_ns;
        if (r.run.jobs[i].ok() && c > 0 && (least == 0 || c < least)) least = c;
      }
      pr.compute_ns += least;
    }
    // A lower bound for any policy on one GPU: every job's kernels run (on
    // one device, one after another), and the bytes no placement can avoid
    // moving cross the link, at best entirely under those kernels. Those are
    // Belady's minimum host-to-device bytes for the jobs' accesses, each job
    // with all of HBM (suite/belady.h), from the msched run, which logged
    // them; without it, the bytes that cannot all stay in HBM, once (per
    // work unit where every byte is used in every unit), in whichever
    // direction is faster. (Counting the first pass too, that estimate
    // exceeded Belady's minimum where first touches move nothing.)
    pr.excess_bytes = pr.point.footprint > hbm ? pr.point.footprint - hbm : 0;
    const PolicyResult* bounded = pr.Find(Policy::kMsched);
    pr.link_from_belady = bounded != nullptr && bounded->ok() && bounded->HasBelady();
    double link_ns = 0;
    if (pr.link_from_belady) {
      pr.link_bytes = bounded->belady_h2d_bytes;
      link_ns = static_cast<double>(pr.link_bytes) / device.h2d_gbps;
    } else {
      const double passes = std::max(1.0, s.link_passes_per_unit * static_cast<double>(pr.point.total_work()));
      pr.link_bytes = static_cast<uint64_t>(passes * static_cast<double>(pr.excess_bytes));
      link_ns = static_cast<double>(pr.link_bytes) / std::max(device.h2d_gbps, device.d2h_gbps);
    }
    pr.ideal_ns = std::max(pr.compute_ns, static_cast<uint64_t>(link_ns));
    out.points.push_back(std::move(pr));
  }
  return out;
}

}  // namespace msched::bench

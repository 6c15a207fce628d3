#include "suite/scenario.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "msched/config.h"
#include "msched/seeded_draws.h"
#include "suite/json_file.h"

namespace msched::bench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Malformed files are reported with the file and the field, never thrown past LoadScenarios.
struct Bad {
  std::string what;
};

// `obj`, named `what` in errors: an object of integer variables.
std::map<std::string, int64_t> VarsOf(const json& obj, const std::string& what) {
  std::map<std::string, int64_t> out;
  if (!obj.is_object()) throw Bad{what + ": must be an object"};
  for (const auto& [k, v] : obj.items()) {
    if (!v.is_number_integer()) throw Bad{what + "." + k + ": must be an integer"};
    out[k] = v.get<int64_t>();
  }
  return out;
}

std::map<std::string, int64_t> Vars(const json& j, const char* key) {
  return j.contains(key) ? VarsOf(j[key], key) : std::map<std::string, int64_t>{};
}

std::vector<int> Points(const json& j, const char* key) {
  std::vector<int> out;
  for (const json& p : j.at("points").at(key)) {
    if (!p.is_number_integer() || p.get<int>() <= 0 || p.get<int>() > 1000) {
      throw Bad{std::string("points.") + key + ": each a percentage from 1 to 1000"};
    }
    out.push_back(p.get<int>());
  }
  return out;
}

PolicyVariant Variant(const json& p) {
  PolicyVariant v;
  const std::string policy = p.is_string() ? p.get<std::string>() : p.at("policy").get<std::string>();
  Result<Policy> parsed = ParsePolicy(policy);
  if (!parsed.ok()) throw Bad{"policies: " + parsed.status().message()};
  v.policy = *parsed;
  v.name = p.is_string() ? policy : p.at("name").get<std::string>();
  if (p.is_object()) {
    v.fixed_slice_ns = p.value("fixed_slice_ms", uint64_t{0}) * 1'000'000;
    v.undeclared = p.value("undeclared", false);
  }
  return v;
}

Arrivals ArrivalsOf(const json& a, const std::string& what) {
  Arrivals out;
  if (!a.is_object()) throw Bad{what + ": an object with at_ms or poisson_per_s"};
  if (a.contains("at_ms")) {
    for (const json& t : a["at_ms"]) {
      if (!t.is_number() || t.get<double>() < 0) throw Bad{what + ".at_ms: times in milliseconds, none negative"};
      out.at_ms.push_back(t.get<double>());
    }
    if (out.at_ms.empty()) throw Bad{what + ".at_ms: at least one time"};
  } else {
    out.per_s = a.at("poisson_per_s").get<double>();
    if (!(out.per_s > 0 && out.per_s < 1e6)) throw Bad{what + ".poisson_per_s: a rate above 0"};
    out.seed = a.value("seed", uint64_t{1});
    out.start_ms = a.value("start_ms", 0.0);
    if (out.start_ms < 0) throw Bad{what + ".start_ms: not negative"};
  }
  return out;
}

ScenarioJob Job(const json& j) {
  ScenarioJob out;
  out.label = j.at("label").get<std::string>();
  // Unset: as many as the footprint calls for, where a job's size is known.
  out.count = j.value("count", j.contains("hbm_share") || j.contains("trace") ? 0 : 1);
  out.user = j.value("user", std::string("user"));
  if (const std::string c = j.value("class", std::string()); !c.empty()) {
    const std::optional<JobClass> named = JobClassNamed(c);
    if (!named) throw Bad{"jobs." + out.label + ".class: short, long or service"};
    out.job_class = *named;
  }
  out.priority = j.value("priority", 0);
  if (j.contains("arrivals")) {
    const json& a = j["arrivals"];
    const std::string what = "jobs." + out.label + ".arrivals";
    out.full_arrivals = ArrivalsOf(a.contains("full") ? a["full"] : a, what);
    out.quick_arrivals = ArrivalsOf(a.contains("quick") ? a["quick"] : a, what);
    for (const Arrivals* arr : {&out.full_arrivals, &out.quick_arrivals}) {
      if (!arr->at_ms.empty() && out.count > 0 && static_cast<int>(arr->at_ms.size()) != out.count) {
        throw Bad{what + ".at_ms: one time per job (count " + std::to_string(out.count) + ")"};
      }
    }
  }
  out.share = j.value("share", 0.0);
  out.hbm_share = j.value("hbm_share", 0.0);
  if (j.contains("trace")) {
    if (j.contains("workload")) throw Bad{"jobs." + out.label + ": a workload or a trace, not both"};
    const json& t = j["trace"];
    out.trace_full = t.is_string() ? t.get<std::string>() : t.at("full").get<std::string>();
    out.trace_quick = t.is_string() ? out.trace_full : t.at("quick").get<std::string>();
    for (const std::string& name : {out.trace_full, out.trace_quick}) {
      if (name.empty() || name.find('/') != std::string::npos || !name.ends_with(".trace.xz")) {
        throw Bad{"jobs." + out.label + ".trace: a NAME.trace.xz file under bench/traces"};
      }
    }
    if (out.hbm_share > 0 || out.share > 1)
      throw Bad{"jobs." + out.label + ": a trace job takes share (0 to 1), not hbm_share"};
    if (out.share <= 0) out.share = 1;
    out.unit = j.value("unit", std::string("runs"));
  } else {
    out.workload = j.at("workload").get<std::string>();
    if ((out.share > 0) == (out.hbm_share > 0) || out.share > 1 || out.hbm_share > 1) {
      throw Bad{"jobs." + out.label + ": exactly one of share and hbm_share, a fraction from 0 to 1"};
    }
    out.work_var = j.at("work").get<std::string>();
    out.unit = j.value("unit", std::string("tasks"));
  }
  if (out.count < 0 || out.count > 64) throw Bad{"jobs." + out.label + ".count: from 0 to 64"};
  out.instance_var = j.value("instance_var", std::string());
  out.vars = Vars(j, "vars");
  out.full_vars = Vars(j, "full_vars");
  out.quick_vars = Vars(j, "quick_vars");
  if (j.contains("profile_vars")) {
    const json& pv = j["profile_vars"];
    if (!pv.is_array() || pv.size() < 2 || pv.size() > 4) {
      throw Bad{"jobs." + out.label + ".profile_vars: an array of two to four objects"};
    }
    for (const json& run : pv) out.profile_vars.push_back(VarsOf(run, "profile_vars"));
  }
  return out;
}

Scenario Parse(const json& j, const std::map<std::string, json>& by_name) {
  if (j.value("format", std::string()) != "msched-scenario" || j.value("version", 0) != 1) {
    throw Bad{"expected \"format\": \"msched-scenario\", \"version\": 1"};
  }
  Scenario s;
  s.name = j.at("name").get<std::string>();
  s.title = j.at("title").get<std::string>();
  s.description = j.value("description", std::string());
  const std::string kind = j.value("kind", std::string("sweep"));
  if (kind != "sweep" && kind != "multiuser") throw Bad{"kind: sweep or multiuser"};
  s.multiuser = kind == "multiuser";
  s.headline = j.value("headline", false);
  s.declare_memory = j.value("declare_memory", false);
  const json* jobs_source = &j;
  if (j.contains("jobs_from")) {
    const auto it = by_name.find(j["jobs_from"].get<std::string>());
    if (it == by_name.end() || it->second.contains("jobs_from")) {
      throw Bad{"jobs_from: no scenario '" + j["jobs_from"].get<std::string>() + "' with jobs of its own"};
    }
    jobs_source = &it->second;
  }
  s.hbm_full = jobs_source->at("hbm").at("full").get<std::string>();
  s.hbm_quick = jobs_source->at("hbm").at("quick").get<std::string>();
  for (const json& job : jobs_source->at("jobs")) s.jobs.push_back(Job(job));
  if (s.jobs.empty()) throw Bad{"jobs: at least one"};
  s.points_full = Points(j, "full");
  s.points_quick = Points(j, "quick");
  for (const json& p : j.at("policies")) s.policies.push_back(Variant(p));
  if (s.policies.empty()) throw Bad{"policies: at least one"};
  s.oversubscribe = j.value("oversubscribe", 4.0);
  if (j.contains("targets")) {
    const json& t = j["targets"];
    s.targets.short_wait_vs_exclusive = t.value("short_wait_vs_exclusive", 0.0);
    s.targets.makespan_vs_exclusive = t.value("makespan_vs_exclusive", 0.0);
    s.targets.busy_points = t.value("busy_points", 0.0);
    s.targets.urgent_vs_alone = t.value("urgent_vs_alone", 0.0);
    s.targets.spread_below_baselines = t.value("spread_below_baselines", false);
    s.targets.p99_vs_swap = t.value("p99_vs_swap", 0.0);
  }
  if (j.contains("slo_ms")) {
    s.slo_ms_full = j["slo_ms"].at("full").get<double>();
    s.slo_ms_quick = j["slo_ms"].at("quick").get<double>();
  }
  if (j.contains("swap_server")) {
    s.swap_workload = j["swap_server"].at("workload").get<std::string>();
    s.swap_vars = Vars(j["swap_server"], "vars");
  }
  for (const PolicyVariant& v : s.policies) {
    if (v.policy == Policy::kSwap && s.swap_workload.empty()) throw Bad{"policies: swap needs a swap_server"};
  }
  if (j.contains("shortfalls")) {
    static const std::set<std::string> kTargets = {"ooms",        "short_wait_vs_exclusive", "makespan_vs_exclusive",
                                                   "busy_points", "spread_below_baselines",  "urgent_vs_alone",
                                                   "p99_vs_swap"};
    for (const auto& [target, why] : j["shortfalls"].items()) {
      if (!kTargets.count(target) || !why.is_string())
        throw Bad{"shortfalls." + target + ": a target's name and a text"};
      s.shortfalls[target] = why.get<std::string>();
    }
  }
  if (j.contains("retry_delay_ms")) {
    s.retry_delay_ms_full = j["retry_delay_ms"].at("full").get<double>();
    s.retry_delay_ms_quick = j["retry_delay_ms"].at("quick").get<double>();
    if (s.retry_delay_ms_full < 0 || s.retry_delay_ms_quick < 0) throw Bad{"retry_delay_ms: not negative"};
  }
  s.source = j.value("source", std::string());
  s.link_passes_per_unit = j.value("link_passes_per_unit", 0.0);
  if (s.link_passes_per_unit < 0 || s.link_passes_per_unit > 100) {
    throw Bad{"link_passes_per_unit: a number from 0 to 100"};
  }
  if (j.contains("paper")) {
    const json& paper = j["paper"];
    if (paper.contains("speedup")) {
      for (const auto& [pct, v] : paper["speedup"].items()) s.paper_speedup[std::stoi(pct)] = v.get<double>();
    }
    s.paper_note = j["paper"].value("note", std::string());
  }
  return s;
}

}  // namespace

Result<std::vector<Scenario>> LoadScenarios(const std::string& dir) {
  std::map<std::string, json> by_name;
  std::vector<std::pair<int, std::string>> order;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::string error;
    json j = ReadJsonFile(e.path().string(), &error);
    if (j.is_discarded()) return Status::InvalidArgument(error);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
      return Status::InvalidArgument(e.path().string() + ": not a scenario (a JSON object with a name)");
    }
    const std::string name = j["name"].get<std::string>();
    order.push_back({j.value("order", 1000), name});
    by_name[name] = std::move(j);
  }
  if (ec) return Status::IoError("cannot read " + dir + ": " + ec.message());
  std::sort(order.begin(), order.end());
  std::vector<Scenario> out;
  for (const auto& [unused, name] : order) {
    try {
      out.push_back(Parse(by_name[name], by_name));
    } catch (const Bad& b) {
      return Status::InvalidArgument("scenario " + name + ": " + b.what);
    } catch (const json::exception& e) {
      return Status::InvalidArgument("scenario " + name + ": " + e.what());
    }
  }
  return out;
}

JobSpec SwapServer(const Scenario& s, const Point& p) {
  JobSpec server = p.jobs.front();
  server.label = "swap-server";
  server.workload = s.swap_workload;
  server.templates.clear();
  for (const auto& [k, v] : s.swap_vars) server.vars[k] = v;
  server.vars.erase("MODEL");
  return server;
}

std::vector<uint64_t> Arrivals::Times(int count) const {
  std::vector<uint64_t> out;
  if (!at_ms.empty()) {
    for (int i = 0; i < count; ++i) out.push_back(static_cast<uint64_t>(at_ms[i % at_ms.size()] * 1e6));
    std::sort(out.begin(), out.end());
    return out;
  }
  if (per_s <= 0) return std::vector<uint64_t>(count, 0);
  SeededDraws draws(seed);  // the same seed gives the same trace anywhere
  double t_ms = start_ms;
  for (int i = 0; i < count; ++i) {
    t_ms += draws.ExponentialGapS(per_s) * 1e3;
    out.push_back(static_cast<uint64_t>(t_ms * 1e6));
  }
  return out;
}

const std::string& TraceOf(const ScenarioJob& job, bool quick) { return quick ? job.trace_quick : job.trace_full; }

uint64_t ProgramsHbm(const Scenario& s, bool quick, const TraceFiles& traces) {
  uint64_t largest = 0;
  for (const ScenarioJob& j : s.jobs) {
    const auto it = traces.find(TraceOf(j, quick));
    if (it != traces.end()) largest = std::max(largest, it->second.footprint);
  }
  constexpr uint64_t kBlock = 2 << 20;
  return (2 * largest + kBlock - 1) / kBlock * kBlock;
}

Point Expand(const Scenario& s, int percent, uint64_t hbm_bytes, bool quick, const TraceFiles& traces) {
  Point p;
  p.percent = percent;
  p.hbm_bytes = hbm_bytes;
  const double total = static_cast<double>(hbm_bytes) * percent / 100.0;
  for (size_t kind = 0; kind < s.jobs.size(); ++kind) {
    const ScenarioJob& j = s.jobs[kind];
    const std::string& trace = TraceOf(j, quick);
    const auto replayed = traces.find(trace);
    if (!trace.empty()) {
      // Without its file (not prepared) the job has no program: it fails
      // when run, saying so, rather than running something else.
      const TraceFile file = replayed != traces.end() ? replayed->second : TraceFile{};
      const int count =
          j.count > 0 ? j.count
          : file.footprint == 0
              ? 1
              : std::max(1, static_cast<int>(std::lround(total * j.share / static_cast<double>(file.footprint))));
      for (int i = 1; i <= count; ++i) {
        JobSpec spec;
        spec.label = count > 1 ? j.label + "-" + std::to_string(i) : j.label;
        spec.user = j.user;
        spec.trace = file.path.empty() ? trace : file.path;
        spec.footprint = file.footprint;
        spec.job_class = j.job_class;
        spec.declare_memory = s.multiuser || s.declare_memory;
        spec.priority = j.priority;
        spec.work_units = 1;
        p.footprint += spec.footprint;
        p.work.push_back(spec.work_units);
        p.units.push_back(j.unit);
        p.kinds.push_back(kind);
        p.jobs.push_back(std::move(spec));
      }
      continue;
    }
    const double each = j.share > 0 ? total * j.share : static_cast<double>(hbm_bytes) * j.hbm_share;
    const int count = j.count > 0 ? j.count : std::max(1, static_cast<int>(std::lround(total / each)));
    const std::vector<uint64_t> arrivals = (quick ? j.quick_arrivals : j.full_arrivals).Times(count);
    for (int i = 1; i <= count; ++i) {
      JobSpec spec;
      spec.label = count > 1 ? j.label + "-" + std::to_string(i) : j.label;
      spec.user = j.user;
      spec.workload = j.workload;
      spec.footprint = static_cast<uint64_t>(each) & ~uint64_t{0xffff};  // whole 64 KiB
      spec.job_class = j.job_class;
      spec.declare_memory = s.multiuser || s.declare_memory;
      spec.priority = j.priority;
      spec.arrival_ns = arrivals[i - 1];
      spec.vars = j.vars;
      for (const auto& [k, v] : quick ? j.quick_vars : j.full_vars) spec.vars[k] = v;
      spec.vars["FOOT"] = static_cast<int64_t>(spec.footprint);
      if (!j.instance_var.empty()) spec.vars[j.instance_var] = i - 1;
      if (!quick) spec.vars["INIT"] = 0;  // inputs would have to be held in host memory
      spec.work_units = spec.vars.count(j.work_var) ? static_cast<uint64_t>(spec.vars[j.work_var]) : 0;
      p.footprint += spec.footprint;
      p.work.push_back(spec.work_units);
      p.units.push_back(j.unit);
      p.kinds.push_back(kind);
      p.jobs.push_back(std::move(spec));
    }
  }
  return p;
}

}  // namespace msched::bench

#include "suite/scenario.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "msched/config.h"
#include "msched/json_checked.h"
#include "msched/leading_int.h"
#include "msched/seeded_draws.h"
#include "suite/json_file.h"

namespace msched::bench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A malformed file's problem, naming the field; LoadScenarios names the file.
Status Bad(std::string what) { return Status::InvalidArgument(std::move(what)); }

// j.at(key).get<std::string>().
Result<std::string> StringAt(const json& j, const std::string& key) {
  Result<const json*> field = JsonAt(j, key);
  if (!field.ok()) return field.status();
  return JsonGetString(**field);
}

// j.at(key).get<double>().
Result<double> NumberAt(const json& j, const std::string& key) {
  Result<const json*> field = JsonAt(j, key);
  if (!field.ok()) return field.status();
  return JsonGetNumber<double>(**field);
}

// `obj`, named `what` in errors: an object of integer variables.
Result<std::map<std::string, int64_t>> VarsOf(const json& obj, const std::string& what) {
  std::map<std::string, int64_t> out;
  if (!obj.is_object()) return Bad(what + ": must be an object");
  for (const auto& [k, v] : obj.items()) {
    if (!v.is_number_integer()) return Bad(what + "." + k + ": must be an integer");
    out[k] = v.get<int64_t>();
  }
  return out;
}

Result<std::map<std::string, int64_t>> Vars(const json& j, const char* key) {
  if (!j.contains(key)) return std::map<std::string, int64_t>{};
  return VarsOf(j[key], key);
}

Result<std::vector<int>> Points(const json& j, const char* key) {
  Result<const json*> points = JsonAt(j, "points");
  if (!points.ok()) return points.status();
  Result<const json*> list = JsonAt(**points, key);
  if (!list.ok()) return list.status();
  std::vector<int> out;
  for (const json& p : **list) {
    if (!p.is_number_integer() || p.get<int>() <= 0 || p.get<int>() > 1000) {
      return Bad(std::string("points.") + key + ": each a percentage from 1 to 1000");
    }
    out.push_back(p.get<int>());
  }
  return out;
}

Result<PolicyVariant> Variant(const json& p) {
  PolicyVariant v;
  const Result<std::string> policy = p.is_string() ? JsonGetString(p) : StringAt(p, "policy");
  if (!policy.ok()) return policy.status();
  Result<Policy> parsed = ParsePolicy(*policy);
  if (!parsed.ok()) return Bad("policies: " + parsed.status().message());
  v.policy = *parsed;
  if (p.is_string()) {
    v.name = *policy;
  } else {
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(p, "name"), &v.name));
  }
  if (p.is_object()) {
    const Result<uint64_t> fixed_slice_ms = JsonNumberOr(p, "fixed_slice_ms", uint64_t{0});
    if (!fixed_slice_ms.ok()) return fixed_slice_ms.status();
    v.fixed_slice_ns = *fixed_slice_ms * 1'000'000;
    MSCHED_RETURN_IF_ERROR(Assign(JsonBoolOr(p, "undeclared", false), &v.undeclared));
  }
  return v;
}

Result<Arrivals> ArrivalsOf(const json& a, const std::string& what) {
  Arrivals out;
  if (!a.is_object()) return Bad(what + ": an object with at_ms or poisson_per_s");
  if (a.contains("at_ms")) {
    for (const json& t : a["at_ms"]) {
      if (!t.is_number() || t.get<double>() < 0) return Bad(what + ".at_ms: times in milliseconds, none negative");
      out.at_ms.push_back(t.get<double>());
    }
    if (out.at_ms.empty()) return Bad(what + ".at_ms: at least one time");
    return out;
  }
  MSCHED_RETURN_IF_ERROR(Assign(NumberAt(a, "poisson_per_s"), &out.per_s));
  if (!(out.per_s > 0 && out.per_s < 1e6)) return Bad(what + ".poisson_per_s: a rate above 0");
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(a, "seed", uint64_t{1}), &out.seed));
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(a, "start_ms", 0.0), &out.start_ms));
  if (out.start_ms < 0) return Bad(what + ".start_ms: not negative");
  return out;
}

// A job's "arrivals": one form for both, or "full" and "quick".
Status JobArrivals(const json& j, ScenarioJob* out) {
  if (!j.contains("arrivals")) return Status::Ok();
  const json& a = j["arrivals"];
  const std::string what = "jobs." + out->label + ".arrivals";
  MSCHED_RETURN_IF_ERROR(Assign(ArrivalsOf(a.contains("full") ? a["full"] : a, what), &out->full_arrivals));
  MSCHED_RETURN_IF_ERROR(Assign(ArrivalsOf(a.contains("quick") ? a["quick"] : a, what), &out->quick_arrivals));
  for (const Arrivals* arr : {&out->full_arrivals, &out->quick_arrivals}) {
    if (!arr->at_ms.empty() && out->count > 0 && static_cast<int>(arr->at_ms.size()) != out->count) {
      return Bad(what + ".at_ms: one time per job (count " + std::to_string(out->count) + ")");
    }
  }
  return Status::Ok();
}

// What a job runs: a replayed trace or a workload, and its share.
Status JobProgram(const json& j, ScenarioJob* out) {
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(j, "share", 0.0), &out->share));
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(j, "hbm_share", 0.0), &out->hbm_share));
  if (!j.contains("trace")) {
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(j, "workload"), &out->workload));
    if ((out->share > 0) == (out->hbm_share > 0) || out->share > 1 || out->hbm_share > 1) {
      return Bad("jobs." + out->label + ": exactly one of share and hbm_share, a fraction from 0 to 1");
    }
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(j, "work"), &out->work_var));
    MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "allocator", ""), &out->allocator));
    if (!out->allocator.empty() && out->allocator != "vmm" && out->allocator != "expandable") {
      return Bad("jobs." + out->label + ".allocator: vmm or expandable");
    }
    return Assign(JsonStringOr(j, "unit", "tasks"), &out->unit);
  }
  if (j.contains("workload")) return Bad("jobs." + out->label + ": a workload or a trace, not both");
  if (j.contains("allocator")) return Bad("jobs." + out->label + ": a trace replays its program's allocations");
  const json& t = j["trace"];
  if (t.is_string()) {
    out->trace_full = out->trace_quick = t.get<std::string>();
  } else {
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(t, "full"), &out->trace_full));
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(t, "quick"), &out->trace_quick));
  }
  for (const std::string& name : {out->trace_full, out->trace_quick}) {
    if (name.empty() || name.find('/') != std::string::npos || !name.ends_with(".trace.xz")) {
      return Bad("jobs." + out->label + ".trace: a NAME.trace.xz file under bench/traces");
    }
  }
  if (out->hbm_share > 0 || out->share > 1) {
    return Bad("jobs." + out->label + ": a trace job takes share (0 to 1), not hbm_share");
  }
  if (out->share <= 0) out->share = 1;
  return Assign(JsonStringOr(j, "unit", "runs"), &out->unit);
}

// A job's variables: its own, each form's, and each profiling run's.
Status JobVars(const json& j, ScenarioJob* out) {
  MSCHED_RETURN_IF_ERROR(Assign(Vars(j, "vars"), &out->vars));
  MSCHED_RETURN_IF_ERROR(Assign(Vars(j, "full_vars"), &out->full_vars));
  MSCHED_RETURN_IF_ERROR(Assign(Vars(j, "quick_vars"), &out->quick_vars));
  if (!j.contains("profile_vars")) return Status::Ok();
  const json& pv = j["profile_vars"];
  if (!pv.is_array() || pv.size() < 2 || pv.size() > 4) {
    return Bad("jobs." + out->label + ".profile_vars: an array of two to four objects");
  }
  for (const json& run : pv) {
    Result<std::map<std::string, int64_t>> vars = VarsOf(run, "profile_vars");
    if (!vars.ok()) return vars.status();
    out->profile_vars.push_back(std::move(*vars));
  }
  return Status::Ok();
}

Result<ScenarioJob> Job(const json& j) {
  ScenarioJob out;
  MSCHED_RETURN_IF_ERROR(Assign(StringAt(j, "label"), &out.label));
  // Unset: as many as the footprint calls for, where a job's size is known.
  MSCHED_RETURN_IF_ERROR(
      Assign(JsonNumberOr(j, "count", j.contains("hbm_share") || j.contains("trace") ? 0 : 1), &out.count));
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "user", "user"), &out.user));
  std::string job_class;
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "class", ""), &job_class));
  if (!job_class.empty()) {
    const std::optional<JobClass> named = JobClassNamed(job_class);
    if (!named) return Bad("jobs." + out.label + ".class: short, long or service");
    out.job_class = *named;
  }
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(j, "priority", 0), &out.priority));
  MSCHED_RETURN_IF_ERROR(JobArrivals(j, &out));
  MSCHED_RETURN_IF_ERROR(JobProgram(j, &out));
  if (out.count < 0 || out.count > 64) return Bad("jobs." + out.label + ".count: from 0 to 64");
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "instance_var", ""), &out.instance_var));
  MSCHED_RETURN_IF_ERROR(JobVars(j, &out));
  return out;
}

// Each element of the array `key` of `j`, as `parse` reads it, appended to
// *out: at least one.
template <typename T>
Status EachOf(const json& j, const char* key, Result<T> (*parse)(const json&), std::vector<T>* out) {
  Result<const json*> list = JsonAt(j, key);
  if (!list.ok()) return list.status();
  for (const json& element : **list) {
    Result<T> parsed = parse(element);
    if (!parsed.ok()) return parsed.status();
    out->push_back(std::move(*parsed));
  }
  if (out->empty()) return Bad(std::string(key) + ": at least one");
  return Status::Ok();
}

// The HBM and the jobs: the scenario's own, or those of the one it names in
// "jobs_from" (which must have its own).
Status Jobs(const json& j, const std::map<std::string, json>& by_name, Scenario* s) {
  const json* source = &j;
  if (j.contains("jobs_from")) {
    Result<std::string> from = JsonGetString(j["jobs_from"]);
    if (!from.ok()) return from.status();
    const auto it = by_name.find(*from);
    if (it == by_name.end() || it->second.contains("jobs_from")) {
      return Bad("jobs_from: no scenario '" + *from + "' with jobs of its own");
    }
    source = &it->second;
  }
  Result<const json*> hbm = JsonAt(*source, "hbm");
  if (!hbm.ok()) return hbm.status();
  MSCHED_RETURN_IF_ERROR(Assign(StringAt(**hbm, "full"), &s->hbm_full));
  MSCHED_RETURN_IF_ERROR(Assign(StringAt(**hbm, "quick"), &s->hbm_quick));
  return EachOf(*source, "jobs", Job, &s->jobs);
}

// The footprints and the policies compared at each.
Status PointsAndPolicies(const json& j, Scenario* s) {
  MSCHED_RETURN_IF_ERROR(Assign(Points(j, "full"), &s->points_full));
  MSCHED_RETURN_IF_ERROR(Assign(Points(j, "quick"), &s->points_quick));
  return EachOf(j, "policies", Variant, &s->policies);
}

// "targets": what the multi-user report checks msched against.
Status Targets(const json& j, Scenario::Targets* out) {
  if (!j.contains("targets")) return Status::Ok();
  const json& t = j["targets"];
  for (auto [key, field] :
       {std::pair{"short_wait_vs_exclusive", &out->short_wait_vs_exclusive},
        std::pair{"makespan_vs_exclusive", &out->makespan_vs_exclusive}, std::pair{"busy_points", &out->busy_points},
        std::pair{"urgent_vs_alone", &out->urgent_vs_alone}}) {
    MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(t, key, 0.0), field));
  }
  MSCHED_RETURN_IF_ERROR(Assign(JsonBoolOr(t, "spread_below_baselines", false), &out->spread_below_baselines));
  return Assign(JsonNumberOr(t, "p99_vs_swap", 0.0), &out->p99_vs_swap);
}

// j[key]'s "full" and "quick" numbers, where `j` has `key`.
Status FullAndQuick(const json& j, const char* key, double* full, double* quick) {
  if (!j.contains(key)) return Status::Ok();
  MSCHED_RETURN_IF_ERROR(Assign(NumberAt(j[key], "full"), full));
  return Assign(NumberAt(j[key], "quick"), quick);
}

// Services: the SLO, and the swap server that the swap policy runs.
Status Services(const json& j, Scenario* s) {
  MSCHED_RETURN_IF_ERROR(FullAndQuick(j, "slo_ms", &s->slo_ms_full, &s->slo_ms_quick));
  if (j.contains("swap_server")) {
    MSCHED_RETURN_IF_ERROR(Assign(StringAt(j["swap_server"], "workload"), &s->swap_workload));
    MSCHED_RETURN_IF_ERROR(Assign(Vars(j["swap_server"], "vars"), &s->swap_vars));
  }
  for (const PolicyVariant& v : s->policies) {
    if (v.policy == Policy::kSwap && s->swap_workload.empty()) return Bad("policies: swap needs a swap_server");
  }
  return Status::Ok();
}

// "shortfalls": why a target is missed, by the target's name.
Status Shortfalls(const json& j, Scenario* s) {
  if (!j.contains("shortfalls")) return Status::Ok();
  static const std::set<std::string> kTargets = {"ooms",        "short_wait_vs_exclusive", "makespan_vs_exclusive",
                                                 "busy_points", "spread_below_baselines",  "urgent_vs_alone",
                                                 "p99_vs_swap"};
  for (const auto& [target, why] : j["shortfalls"].items()) {
    if (!kTargets.count(target) || !why.is_string())
      return Bad("shortfalls." + target + ": a target's name and a text");
    s->shortfalls[target] = why.get<std::string>();
  }
  return Status::Ok();
}

// "paper": its speedups by footprint percent, and a note.
Status Paper(const json& j, Scenario* s) {
  if (!j.contains("paper")) return Status::Ok();
  const json& paper = j["paper"];
  if (paper.contains("speedup")) {
    for (const auto& [pct, v] : paper["speedup"].items()) {
      const Result<double> speedup = JsonGetNumber<double>(v);
      if (!speedup.ok()) return speedup.status();
      const std::optional<int> percent = LeadingInt(pct);
      if (!percent) return Bad("paper.speedup." + pct + ": a footprint percentage");
      s->paper_speedup[*percent] = *speedup;
    }
  }
  return Assign(JsonStringOr(paper, "note", ""), &s->paper_note);
}

Result<Scenario> Parse(const json& j, const std::map<std::string, json>& by_name) {
  const Result<std::string> format = JsonStringOr(j, "format", "");
  if (!format.ok()) return format.status();
  const bool named = *format == "msched-scenario";
  const Result<int> version = named ? JsonNumberOr(j, "version", 0) : Result<int>(0);  // read only when named
  if (!version.ok()) return version.status();
  if (!named || *version != 1) return Bad("expected \"format\": \"msched-scenario\", \"version\": 1");
  Scenario s;
  MSCHED_RETURN_IF_ERROR(Assign(StringAt(j, "name"), &s.name));
  MSCHED_RETURN_IF_ERROR(Assign(StringAt(j, "title"), &s.title));
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "description", ""), &s.description));
  std::string kind;
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "kind", "sweep"), &kind));
  if (kind != "sweep" && kind != "multiuser") return Bad("kind: sweep or multiuser");
  s.multiuser = kind == "multiuser";
  MSCHED_RETURN_IF_ERROR(Assign(JsonBoolOr(j, "headline", false), &s.headline));
  MSCHED_RETURN_IF_ERROR(Assign(JsonBoolOr(j, "declare_memory", false), &s.declare_memory));
  MSCHED_RETURN_IF_ERROR(Jobs(j, by_name, &s));
  MSCHED_RETURN_IF_ERROR(PointsAndPolicies(j, &s));
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(j, "oversubscribe", 4.0), &s.oversubscribe));
  MSCHED_RETURN_IF_ERROR(Targets(j, &s.targets));
  MSCHED_RETURN_IF_ERROR(Services(j, &s));
  MSCHED_RETURN_IF_ERROR(Shortfalls(j, &s));
  MSCHED_RETURN_IF_ERROR(FullAndQuick(j, "retry_delay_ms", &s.retry_delay_ms_full, &s.retry_delay_ms_quick));
  if (s.retry_delay_ms_full < 0 || s.retry_delay_ms_quick < 0) return Bad("retry_delay_ms: not negative");
  MSCHED_RETURN_IF_ERROR(Assign(JsonStringOr(j, "source", ""), &s.source));
  MSCHED_RETURN_IF_ERROR(Assign(JsonNumberOr(j, "link_passes_per_unit", 0.0), &s.link_passes_per_unit));
  if (s.link_passes_per_unit < 0 || s.link_passes_per_unit > 100) {
    return Bad("link_passes_per_unit: a number from 0 to 100");
  }
  MSCHED_RETURN_IF_ERROR(Paper(j, &s));
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
    const Result<int> rank = JsonNumberOr(j, "order", 1000);
    if (!rank.ok()) return Status::InvalidArgument("scenario " + name + ": " + rank.status().message());
    order.push_back({*rank, name});
    by_name[name] = std::move(j);
  }
  if (ec) return Status::IoError("cannot read " + dir + ": " + ec.message());
  std::sort(order.begin(), order.end());
  std::vector<Scenario> out;
  for (const auto& [unused, name] : order) {
    Result<Scenario> s = Parse(by_name[name], by_name);
    if (!s.ok()) return Status::InvalidArgument("scenario " + name + ": " + s.status().message());
    out.push_back(std::move(*s));
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
      spec.allocator = j.allocator;
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

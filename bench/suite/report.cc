#include "suite/report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/subprocess.h"

namespace msched::bench {
namespace {

std::string Num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Mb(uint64_t bytes) { return Num(static_cast<double>(bytes) / 1e6, 1); }

double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// The footprint as run (job counts round it) beside the one asked for.
std::string Footprint(const Point& p) {
  const double actual = 100.0 * static_cast<double>(p.footprint) / static_cast<double>(p.hbm_bytes);
  return std::to_string(p.percent) + "% (" + Num(actual, 0) + "%)";
}

// The unit a point's jobs count their work in, or "work units" when mixed.
std::string Unit(const Point& p) {
  const std::set<std::string> units(p.units.begin(), p.units.end());
  return units.size() == 1 ? *units.begin() : "work units";
}

// Tokens per second of the LLM jobs of a run (0: none), each over its own span.
double TokensPerSecond(const PolicyResult& r, const Point& p) {
  uint64_t tokens = 0, end = 0;
  for (size_t i = 0; i < p.jobs.size(); ++i) {
    if (p.units[i] != "tokens") continue;
    tokens += p.work[i];
    end = std::max(end, r.run.jobs[i].finished_ns);
  }
  return tokens > 0 && end > 0 ? static_cast<double>(tokens) / (static_cast<double>(end) / 1e9) : 0;
}

// `base`'s time over r's at the same point: how many times faster r ran (0
// when either failed or `base` did not run there).
double Speedup(const PolicyResult& r, const PointResult& pr, Policy base = Policy::kUm) {
  const PolicyResult* b = pr.Find(base);
  return b != nullptr && b->ok() && r.ok() && r.seconds > 0 ? b->seconds / r.seconds : 0;
}

std::string Times(double x) { return x > 0 ? Num(x, 2) + "x" : "-"; }

double OfIdeal(const PolicyResult& r, const PointResult& pr) {
  return r.ok() && r.run.makespan_ns > 0 ? static_cast<double>(pr.ideal_ns) / static_cast<double>(r.run.makespan_ns)
                                         : 0;
}

std::string Where(const PolicyResult& r, const DeviceFacts& device) {
  const double total = static_cast<double>(r.run.makespan_ns);
  const double compute = static_cast<double>(r.compute_ns);
  const double stall = static_cast<double>(r.stall_ns);
  const double swap = static_cast<double>(r.prefetch_bytes) / device.h2d_gbps;
  const double rest = std::max(0.0, total - compute - stall - swap);
  auto pct = [&](double v) { return Num(100.0 * v / total, 0) + "%"; };
  return "kernels " + pct(compute) + ", fault stalls " + pct(stall) + ", prefetch transfers " + pct(swap) +
         " (not hidden behind other work), the rest " + pct(rest) +
         " (switch drains, control plane, kernels slowed by misses, idle); " + std::to_string(r.run.switches) +
         " switches";
}

// What became of a run, for the tables.
std::string Outcome(const PolicyResult& p) {
  if (p.ok()) return "ok";
  if (p.cannot_run) return "cannot run (a job is larger than HBM): " + p.problem;
  return p.problem;
}

// msched's paging (prefetched and faulted bytes) over Belady's minimum for
// the same accesses; "" for runs without a bound (other policies).
std::string BeladyRatio(const PolicyResult& p) {
  if (!p.ok() || !p.run.belady) return "";
  if (!p.belady_error.empty()) return "unknown: " + p.belady_error;
  if (p.belady_h2d_bytes > 0) {
    return Times(static_cast<double>(p.paging_h2d_bytes) / static_cast<double>(p.belady_h2d_bytes));
  }
  return p.paging_h2d_bytes == 0 ? "-" : "minimum 0";
}

// How far msched is from OPT at its own granularity: a kernel that runs
// without faulting needs all it touches resident at once, which Belady's
// minimum (unit by unit, all of HBM) does not ask. Each job's figure is its
// own, as alone on the GPU, like Belady's. "" without the figures.
std::string KernelGranularOpt(const PolicyResult& p, const PointResult& pr, const DeviceFacts& device) {
  if (!p.HasBelady() || p.belady_h2d_bytes == 0 || p.opt_kernel_budget_h2d_bytes == 0 || pr.point.hbm_bytes == 0) {
    return "";
  }
  const double belady = static_cast<double>(p.belady_h2d_bytes);
  const double link_ns = static_cast<double>(p.opt_kernel_budget_h2d_bytes) / device.h2d_gbps;
  const double ideal_ns = std::max(static_cast<double>(pr.compute_ns), link_ns);
  const double budget = static_cast<double>(p.opt_budget_bytes) / static_cast<double>(pr.point.hbm_bytes);
  return std::string(" OPT holding each kernel's memory at once") + (p.run.jobs.size() > 1 ? " (each job alone)" : "") +
         " moves " + Times(static_cast<double>(p.opt_kernel_h2d_bytes) / belady) +
         " Belady's bytes on all of HBM and " + Times(static_cast<double>(p.opt_kernel_budget_h2d_bytes) / belady) +
         " on the " + Num(100 * budget, 0) +
         "% of HBM the coordinator gives a job alone (msched's paging: " + BeladyRatio(p) +
         "); with those bytes the ideal would be " + Num(ideal_ns / 1e6, 1) + " ms, " +
         Num(100 * ideal_ns / static_cast<double>(p.run.makespan_ns), 1) + "% of msched's time.";
}

std::string SweepSection(const ScenarioResult& r, const DeviceFacts& device) {
  const Scenario& s = *r.scenario;
  std::ostringstream out;
  const bool llm = !r.points.empty() && TokensPerSecond(r.points[0].policies[0], r.points[0].point) > 0;
  out << "| footprint | policy | time ms | throughput | x um | x exclusive | % of ideal | faults | H2D MB | D2H MB |"
      << " paging H2D x Belady |" << (llm ? " tokens/s |" : "") << " paper x um | status |\n";
  out << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" << (llm ? "---:|" : "") << "---:|---|\n";
  std::vector<std::string> notes;
  for (const PointResult& pr : r.points) {
    const double work = static_cast<double>(pr.point.total_work());
    for (const PolicyResult& p : pr.policies) {
      const double speedup = Speedup(p, pr), ideal = OfIdeal(p, pr);
      const double vs_exclusive = Speedup(p, pr, Policy::kExclusive);
      const auto paper = s.paper_speedup.find(pr.point.percent);
      const bool is_msched = p.variant.name == "msched";
      out << "| " << Footprint(pr.point) << " | " << p.variant.name << " | " << Num(p.seconds * 1e3, 1) << " | "
          << Num(p.throughput, 2) << " " << Unit(pr.point) << "/s | " << Times(speedup) << " | " << Times(vs_exclusive)
          << " | " << (ideal > 0 ? Num(100 * ideal, 1) : "-") << " | " << p.faults << " | " << Mb(p.h2d_bytes) << " | "
          << Mb(p.d2h_bytes) << " | " << BeladyRatio(p) << " |";
      if (llm) out << " " << Num(TokensPerSecond(p, pr.point), 1) << " |";
      out << " " << (is_msched && paper != s.paper_speedup.end() ? Num(paper->second, 2) + "x" : "") << " | "
          << Outcome(p) << " |\n";
      // A row short of any of the three marks (90% of ideal, 0.95x the jobs run one at a time, the paper's
      // speedup) says where its time went, so that no shortfall stands without its reason.
      const bool short_of_paper = paper != s.paper_speedup.end() && speedup > 0 && speedup < paper->second;
      const bool short_of_exclusive = vs_exclusive > 0 && vs_exclusive < 0.95;
      if (is_msched && p.ok() && (ideal < 0.9 || short_of_exclusive || short_of_paper)) {
        notes.push_back("msched at " + std::to_string(pr.point.percent) + "%: " + Num(100 * ideal, 1) + "% of ideal" +
                        (short_of_exclusive ? ", " + Times(vs_exclusive) + " exclusive" : "") +
                        (short_of_paper ? ", below the paper's " + Num(paper->second, 2) + "x" : "") + ". Of its " +
                        Num(p.seconds * 1e3, 1) + " ms: " + Where(p, device) + "." + KernelGranularOpt(p, pr, device));
      }
    }
    out << "| " << Footprint(pr.point) << " | **ideal** | " << Num(Ms(pr.ideal_ns), 1) << " | "
        << Num(pr.ideal_ns > 0 ? work / (static_cast<double>(pr.ideal_ns) / 1e9) : 0, 2) << " " << Unit(pr.point)
        << "/s | | | 100.0 | | " << (pr.link_from_belady ? Mb(pr.link_bytes) : "") << " | | |" << (llm ? " |" : "")
        << " | the longer of kernels " << Num(Ms(pr.compute_ns), 1) << " ms and " << Mb(pr.link_bytes) << " MB "
        << (pr.link_from_belady ? "host to device (Belady's minimum for the jobs' accesses, each job with all of HBM)"
                                : "beyond HBM")
        << " at " << Num(pr.link_from_belady ? device.h2d_gbps : std::max(device.h2d_gbps, device.d2h_gbps), 1)
        << " GB/s |\n";
  }
  for (const std::string& n : notes) out << "\n- " << n;
  if (!notes.empty()) out << "\n";
  return out.str();
}

// Each of the scenario's targets, met or not, with the figures behind it.
std::vector<std::string> TargetNotes(const Scenario& s, const PointResult& pr, const DeviceFacts& device) {
  const Scenario::Targets& t = s.targets;
  const PolicyResult* ms = pr.Find(Policy::kMsched);
  const PolicyResult* ex = pr.Find(Policy::kExclusive);
  std::vector<std::string> notes;
  if (ms == nullptr || !ms->ok()) return {"msched did not complete: no target can be met"};
  // A target's line: met, or missed with the scenario's account of why.
  auto note = [&](bool met, const std::string& target, const std::string& text) {
    const auto why = s.shortfalls.find(target);
    notes.push_back(met ? "met: " + text
                        : "**missed**: " + text + (why != s.shortfalls.end() ? ". Why: " + why->second : ""));
  };
  note(ms->ooms == 0, "ooms", "0 OOMs under msched (" + std::to_string(ms->ooms) + ")");
  if (ex != nullptr && ex->ok()) {
    if (t.short_wait_vs_exclusive > 0 && ex->short_wait_mean_ns > 0) {
      const double x = static_cast<double>(ms->short_wait_mean_ns) / static_cast<double>(ex->short_wait_mean_ns);
      note(x <= t.short_wait_vs_exclusive, "short_wait_vs_exclusive",
           "short jobs' mean wait " + Num(Ms(ms->short_wait_mean_ns), 2) + " ms, " + Num(x, 2) +
               "x exclusive's (target " + Num(t.short_wait_vs_exclusive, 2) + "x)");
    }
    if (t.makespan_vs_exclusive > 0 && ex->run.makespan_ns > 0) {
      const double x = static_cast<double>(ms->run.makespan_ns) / static_cast<double>(ex->run.makespan_ns);
      note(x <= t.makespan_vs_exclusive, "makespan_vs_exclusive",
           "makespan " + Num(x, 3) + "x exclusive's (target " + Num(t.makespan_vs_exclusive, 2) + "x)");
    }
  }
  double best_busy = 0, best_spread = -1;
  for (const PolicyResult& p : pr.policies) {
    if (&p == ms || !p.ok() || p.variant.policy == Policy::kMsched) continue;
    best_busy = std::max(best_busy, p.busy);
    best_spread = best_spread < 0 ? p.user_cv : std::min(best_spread, p.user_cv);
  }
  if (t.busy_points > 0 && best_busy > 0) {
    const double gap = 100 * (best_busy - ms->busy);
    note(gap <= t.busy_points, "busy_points",
         "GPU busy " + Num(100 * ms->busy, 1) + "%, " + Num(gap, 1) + " points below the best baseline's " +
             Num(100 * best_busy, 1) + "% (target " + Num(t.busy_points, 0) + ")");
  }
  if (t.spread_below_baselines && best_spread >= 0) {
    note(ms->user_cv < best_spread, "spread_below_baselines",
         "spread of completion across users (CV) " + Num(ms->user_cv, 3) + " against the baselines' lowest " +
             Num(best_spread, 3));
  }
  if (t.urgent_vs_alone > 0 && ex != nullptr && ex->ok()) {
    for (size_t i = 0; i < pr.point.jobs.size(); ++i) {
      if (pr.point.jobs[i].priority <= 0) continue;
      const JobOutcome& a = ex->run.jobs[i];
      const JobOutcome& m = ms->run.jobs[i];
      const double alone = static_cast<double>(a.finished_ns - a.started_ns);
      const double swap = static_cast<double>(pr.point.jobs[i].footprint) / (0.9 * device.h2d_gbps);
      const double limit = t.urgent_vs_alone * alone + swap;
      const double took = static_cast<double>(m.finished_ns - m.arrival_ns);
      note(took <= limit, "urgent_vs_alone",
           "urgent " + pr.point.jobs[i].label + " took " + Num(took / 1e6, 1) + " ms from arrival to end; alone " +
               Num(alone / 1e6, 1) + " ms, limit " + Num(t.urgent_vs_alone, 2) + "x that + one swap of " +
               Mb(pr.point.jobs[i].footprint) + " MB at 90% of the link = " + Num(limit / 1e6, 1) + " ms");
    }
    notes.push_back("the jobs it displaced finished with their reference results after " +
                    std::to_string(ms->run.switches) + " switches (each one bulk swap out and back in)");
  }
  const PolicyResult* sw = pr.Find(Policy::kSwap);
  if (t.p99_vs_swap > 0 && sw != nullptr && sw->ok() && sw->latency_p99_ns > 0) {
    const double x = static_cast<double>(ms->latency_p99_ns) / static_cast<double>(sw->latency_p99_ns);
    note(x <= t.p99_vs_swap, "p99_vs_swap",
         "p99 request latency " + Num(Ms(ms->latency_p99_ns), 1) + " ms, " + Num(x, 2) +
             "x the model-swapping server's " + Num(Ms(sw->latency_p99_ns), 1) + " ms (target " +
             Num(t.p99_vs_swap, 2) + "x)");
  }
  return notes;
}

std::string MultiuserSection(const ScenarioResult& r, const DeviceFacts& device) {
  std::ostringstream out;
  for (const PointResult& pr : r.points) {
    if (r.points.size() > 1) out << "At " << Footprint(pr.point) << " of HBM:\n\n";
    bool services = false;
    for (const PolicyResult& p : pr.policies) services = services || p.requests > 0;
    out << "| policy | OOMs | GPU s lost | mean wait ms | p95 wait ms | short jobs' mean wait ms | GPU busy % | "
           "makespan ms | x exclusive | mean completion by user ms (slowdown) | user CV | urgent ms | "
        << (services ? "requests | p50 ms | p99 ms | within SLO % | " : "") << "status |\n"
        << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|" << (services ? "---:|---:|---:|---:|" : "")
        << "---|\n";
    for (const PolicyResult& p : pr.policies) {
      std::string users;
      for (const auto& [user, ms] : p.user_completion_ms) {
        const auto slow = p.user_slowdown.find(user);
        users += (users.empty() ? "" : ", ") + user + " " + Num(ms, 1) +
                 (slow != p.user_slowdown.end() ? " (" + Num(slow->second, 2) + "x)" : "");
      }
      out << "| " << p.variant.name << " | " << p.ooms << " | " << Num(static_cast<double>(p.lost_ns) / 1e9, 3) << " | "
          << Num(Ms(p.wait_mean_ns), 2) << " | " << Num(Ms(p.wait_p95_ns), 2) << " | "
          << Num(Ms(p.short_wait_mean_ns), 2) << " | " << Num(100 * p.busy, 1) << " | " << Num(p.seconds * 1e3, 1)
          << " | " << Times(Speedup(p, pr, Policy::kExclusive)) << " | " << users << " | " << Num(p.user_cv, 3) << " | "
          << (p.urgent_ns ? Num(Ms(p.urgent_ns), 1) : "") << " | ";
      if (services) {
        out << p.requests << " | " << Num(Ms(p.latency_p50_ns), 1) << " | " << Num(Ms(p.latency_p99_ns), 1) << " | "
            << Num(100 * p.slo_met, 1) << " | ";
      }
      out << Outcome(p) << " |\n";
    }
    if (r.quick) {
      out << "\nTargets apply to the full form (the quick form's small jobs spend most of their time writing their "
             "inputs).\n\n";
      continue;
    }
    out << "\nTargets:\n\n";
    for (const std::string& n : TargetNotes(*r.scenario, pr, device)) out << "- " << n << "\n";
    out << "\n";
  }
  return out.str();
}

}  // namespace

// How the templates extrapolate: fitted at profiling sizes, checked on one
// work unit of each job at the first point's size.
std::string TemplateSection(const ScenarioResult& r) {
  if (r.template_accuracy.empty()) return "";
  std::ostringstream out;
  out << "\nTemplates at size (one work unit of each job traced at the first point's size, checked with "
      << "`msched-profile check`; missed bytes fault, extra bytes waste the link):\n\n"
      << "| job | workload | touched MB | missed % of touched | extra % of predicted |\n|---|---|---:|---:|---:|\n";
  auto pct = [](uint64_t part, uint64_t whole) { return whole ? Num(100.0 * part / whole, 2) : std::string("-"); };
  for (const TemplateAccuracy& a : r.template_accuracy) {
    out << "| " << a.label << " | " << a.workload << " | ";
    if (!a.error.empty()) {
      out << a.error << " | | |\n";
      continue;
    }
    out << Mb(a.touched_bytes) << " | " << pct(a.fn_bytes, a.touched_bytes) << " | "
        << pct(a.fp_bytes, a.predicted_bytes) << " |\n";
  }
  return out.str();
}

std::string ScenarioSection(const ScenarioResult& r, const DeviceFacts& device) {
  const Scenario& s = *r.scenario;
  std::string out = "### " + s.title + "\n\n" + s.description + "\n\n";
  out += s.multiuser ? MultiuserSection(r, device) : SweepSection(r, device);
  out += TemplateSection(r);
  if (!s.paper_note.empty()) out += "\nPaper: " + s.paper_note + ".\n";
  return out;
}

std::string HeadlineTable(const std::vector<ScenarioResult>& results) {
  std::ostringstream out;
  double exclusive_low = 1e9, exclusive_high = 0;  // exclusive's share of the ideal at the rows shown
  out << "| scenario | footprint | msched x um | paper x um | msched x exclusive | msched % of ideal |\n"
      << "|---|---|---:|---:|---:|---:|\n";
  for (const ScenarioResult& r : results) {
    if (!r.scenario->headline) continue;
    for (const PointResult& pr : r.points) {
      const PolicyResult* ms = pr.Find(Policy::kMsched);
      if (ms == nullptr || pr.point.percent <= 100) continue;
      const auto paper = r.scenario->paper_speedup.find(pr.point.percent);
      const double speedup = Speedup(*ms, pr);
      out << "| " << r.scenario->name << (r.scenario->source.empty() ? "" : " (" + r.scenario->source + ")") << " | "
          << Footprint(pr.point) << " | "
          << (speedup > 0 ? Num(speedup, 2) + "x"
              : ms->ok()  ? "-"
                          : "failed")
          << " | " << (paper != r.scenario->paper_speedup.end() ? Num(paper->second, 2) + "x" : "") << " | "
          << Times(Speedup(*ms, pr, Policy::kExclusive)) << " | " << Num(100 * OfIdeal(*ms, pr), 1) << " |\n";
      if (const PolicyResult* ex = pr.Find(Policy::kExclusive); ex != nullptr && OfIdeal(*ex, pr) > 0) {
        exclusive_low = std::min(exclusive_low, OfIdeal(*ex, pr));
        exclusive_high = std::max(exclusive_high, OfIdeal(*ex, pr));
      }
    }
  }
  // The ideal is a bound, not a target: say beside it what the runs that
  // share nothing reach of it, so a low figure is read against that.
  if (exclusive_high > 0) {
    out << "\n% of ideal: of the longer of the jobs' kernels back to back and Belady's minimum bytes at the link's "
           "rate. It leaves out the inputs' copies and the launches' host time, which no policy avoids: the jobs run "
           "one at a time (exclusive) reach "
        << Num(100 * exclusive_low, 1)
        << (exclusive_high - exclusive_low > 0.0005 ? "-" + Num(100 * exclusive_high, 1) : "")
        << "% of it at these points.\n";
  }
  return out.str();
}

std::string MultiuserHeadline(const std::vector<ScenarioResult>& results) {
  std::ostringstream out;
  for (const ScenarioResult& r : results) {
    if (!r.scenario->multiuser) continue;
    for (const PointResult& pr : r.points) {
      const PolicyResult* ms = pr.Find(Policy::kMsched);
      const PolicyResult* ex = pr.Find(Policy::kExclusive);
      const PolicyResult* nc = pr.Find(Policy::kNoCheck);
      if (ms == nullptr) continue;
      if (out.tellp() == 0) {
        out << "| scenario | footprint | OOMs: nocheck, msched | mean wait ms: exclusive, msched | short jobs' wait "
               "x exclusive | msched makespan x exclusive | GPU busy %: exclusive, msched | urgent job ms: "
               "exclusive, msched | request p99 ms: swap, msched |\n|---|---|---|---|---:|---:|---|---|---|\n";
      }
      auto pair = [&](const PolicyResult* base, auto field) {
        return (base != nullptr ? field(*base) : std::string("-")) + ", " + field(*ms);
      };
      const bool shorts = ex != nullptr && ex->short_wait_mean_ns > 0 && ms->short_wait_mean_ns > 0;
      out << "| " << r.scenario->name << " | " << Footprint(pr.point) << " | "
          << pair(nc, [](const PolicyResult& p) { return std::to_string(p.ooms); }) << " | "
          << pair(ex, [](const PolicyResult& p) { return Num(Ms(p.wait_mean_ns), 1); }) << " | "
          << (shorts
                  ? Num(static_cast<double>(ms->short_wait_mean_ns) / static_cast<double>(ex->short_wait_mean_ns), 2) +
                        "x"
                  : "-")
          << " | " << (ex != nullptr && ex->ok() && ms->ok() ? Num(ms->seconds / ex->seconds, 2) + "x" : "-") << " | "
          << pair(ex, [](const PolicyResult& p) { return Num(100 * p.busy, 1); }) << " | "
          << (ms->urgent_ns ? pair(ex, [](const PolicyResult& p) { return Num(Ms(p.urgent_ns), 1); }) : "") << " | "
          << (ms->requests
                  ? pair(pr.Find(Policy::kSwap), [](const PolicyResult& p) { return Num(Ms(p.latency_p99_ns), 1); })
                  : "")
          << " |\n";
    }
  }
  return out.str();
}

std::string Csv(const std::vector<ScenarioResult>& results) {
  std::ostringstream out;
  out << "scenario,percent,footprint_bytes,hbm_bytes,policy,ok,makespan_ns,work_units,throughput_per_s,speedup_vs_um,"
         "speedup_vs_exclusive,fraction_of_ideal,ideal_ns,faults,h2d_bytes,d2h_bytes,prefetch_bytes,paging_h2d_bytes,"
         "belady_h2d_bytes,opt_kernel_h2d_bytes,opt_kernel_budget_h2d_bytes,compute_ns,fault_stall_ns,"
         "coordinator_wait_ns,switches,ooms,lost_ns,wait_mean_ns,wait_p95_ns,short_wait_mean_ns,busy,user_cv,urgent_ns,"
         "requests,latency_p50_ns,latency_p99_ns,slo_met,status\n";
  for (const ScenarioResult& r : results) {
    for (const PointResult& pr : r.points) {
      const uint64_t work = pr.point.total_work();
      for (const PolicyResult& p : pr.policies) {
        out << r.scenario->name << "," << pr.point.percent << "," << pr.point.footprint << "," << pr.point.hbm_bytes
            << "," << p.variant.name << "," << (p.ok() ? 1 : 0) << "," << p.run.makespan_ns << "," << work << ","
            << Num(p.throughput, 4) << "," << Num(Speedup(p, pr), 4) << ","
            << Num(Speedup(p, pr, Policy::kExclusive), 4) << "," << Num(OfIdeal(p, pr), 4) << "," << pr.ideal_ns << ","
            << p.faults << "," << p.h2d_bytes << "," << p.d2h_bytes << "," << p.prefetch_bytes << ","
            << p.paging_h2d_bytes << "," << p.belady_h2d_bytes << "," << p.opt_kernel_h2d_bytes << ","
            << p.opt_kernel_budget_h2d_bytes << "," << p.compute_ns << "," << p.stall_ns << "," << p.wait_ns << ","
            << p.run.switches << "," << p.ooms << "," << p.lost_ns << "," << p.wait_mean_ns << "," << p.wait_p95_ns
            << "," << p.short_wait_mean_ns << "," << Num(p.busy, 4) << "," << Num(p.user_cv, 4) << "," << p.urgent_ns
            << "," << p.requests << "," << p.latency_p50_ns << "," << p.latency_p99_ns << "," << Num(p.slo_met, 4)
            << ","
            << (p.ok()            ? "ok"
                : p.cannot_run    ? "cannot_run"
                : p.out_of_memory ? "out_of_memory"
                                  : "failed")
            << "\n";
      }
    }
  }
  return out.str();
}

// A multi-user scenario's plot: per policy, at its last point, the jobs'
// mean and p95 wait and the makespan, as clustered bars on a log scale.
Status WriteMultiuserPlot(const ScenarioResult& r, const std::string& dir) {
  if (r.points.empty()) return Status::Ok();
  const std::string name = r.scenario->name;
  std::ofstream dat(dir + "/" + name + ".dat");
  dat << "# policy mean_wait_ms p95_wait_ms makespan_ms (? where the run failed)\n";
  for (const PolicyResult& p : r.points.back().policies) {
    auto ms = [&](uint64_t ns) { return p.ok() ? Num(std::max(Ms(ns), 0.001), 3) : std::string("?"); };
    dat << p.variant.name << " " << ms(p.wait_mean_ns) << " " << ms(p.wait_p95_ns) << " " << ms(p.run.makespan_ns)
        << "\n";
  }
  dat.close();
  std::ofstream gp(dir + "/" + name + ".gp");
  gp << "set terminal pngcairo size 900,540\nset output '" << dir << "/" << name << ".png'\n"
     << "set title \"" << r.scenario->title << " (simulated, " << Footprint(r.points.back().point)
     << " of HBM)\" noenhanced font ',10'\n"
     << "set ylabel 'milliseconds of device time (log)'\nset logscale y\nset grid ytics\nset key outside right\n"
     << "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
     << "set datafile missing '?'\nplot '" << dir << "/" << name
     << ".dat' using 2:xtic(1) title 'mean wait', '' using 3 "
     << "title 'p95 wait', '' using 4 title 'makespan'\n";
  gp.close();
  return RunGnuplot(dir, name);
}

Status WritePlot(const ScenarioResult& r, const std::string& dir) {
  if (r.scenario->multiuser) return WriteMultiuserPlot(r, dir);
  if (r.points.size() < 2) return Status::Ok();
  const std::string name = r.scenario->name;
  std::ofstream dat(dir + "/" + name + ".dat");
  dat << "# footprint_percent";
  for (const PolicyResult& p : r.points[0].policies) dat << " " << p.variant.name;
  dat << " ideal\n";
  for (const PointResult& pr : r.points) {
    const double work = static_cast<double>(pr.point.total_work());
    dat << 100.0 * static_cast<double>(pr.point.footprint) / static_cast<double>(pr.point.hbm_bytes);
    for (const PolicyResult& p : pr.policies) dat << " " << (p.ok() && p.throughput > 0 ? Num(p.throughput, 4) : "?");
    dat << " " << (pr.ideal_ns > 0 ? Num(work / (static_cast<double>(pr.ideal_ns) / 1e9), 4) : "?") << "\n";
  }
  dat.close();
  std::ofstream gp(dir + "/" + name + ".gp");
  gp << "set terminal pngcairo size 900,540\nset output '" << dir << "/" << name << ".png'\n"
     << "set title \"" << r.scenario->title << " (simulated)\" noenhanced font ',10'\n"
     << "set xlabel 'total footprint, % of HBM'\nset ylabel 'throughput, " << Unit(r.points[0].point)
     << " per second (log)'\nset logscale y\nset grid\nset key outside right\nset datafile missing '?'\n"
     << "set arrow from 100, graph 0 to 100, graph 1 nohead dashtype 2\nplot ";
  const size_t n = r.points[0].policies.size();
  for (size_t i = 0; i <= n; ++i) {
    const std::string title = i < n ? r.points[0].policies[i].variant.name : "ideal";
    gp << (i ? ", " : "") << "'" << dir << "/" << name << ".dat' using 1:" << i + 2 << " with linespoints lw 2"
       << (i == n ? " dashtype 3" : "") << " title '" << title << "'";
  }
  gp << "\n";
  gp.close();
  return RunGnuplot(dir, name);
}

Status RunGnuplot(const std::string& dir, const std::string& name) {
  SpawnOptions so;
  so.stderr_path = dir + "/" + name + ".gnuplot.err";
  Result<Subprocess> p = Subprocess::Spawn({"gnuplot", dir + "/" + name + ".gp"}, so);
  if (!p.ok()) return Status::Unavailable("cannot run gnuplot (scripts/setup.sh installs it): " + p.status().message());
  if (p->Wait() != 0)
    return Status::Internal("gnuplot failed on " + dir + "/" + name + ".gp (see " + so.stderr_path + ")");
  ::unlink(so.stderr_path.c_str());
  return Status::Ok();
}

}  // namespace msched::bench

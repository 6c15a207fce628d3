#include "suite/gantt.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include "base/chrome_trace.h"
#include "msched/trace_layout.h"
#include "suite/report.h"

namespace msched::bench {
namespace {

using json = nlohmann::json;

constexpr double kHalfHeight = 0.35;  // of a bar, in rows
// Colours (0xRRGGBB): jobs' running spans cycle through the first; the rest are fixed.
constexpr int kJobColours[] = {0x4e79a7, 0x59a14f, 0xb07aa1, 0x76b7b2, 0xedc948, 0x9c755f, 0xff9da7, 0xbab0ac};
constexpr int kDrainColour = 0xcccccc;
constexpr int kIdleColour = 0xe15759;
constexpr int kSwapInColour = 0x1f77b4;
constexpr int kSwapOutColour = 0xf28e2b;

struct Bar {
  double from_ms, to_ms;
  int row;
  int colour;
};

// One run's timeline as rows of bars, time from its first span.
struct Panel {
  std::string title;
  std::vector<std::string> rows;  // bottom to top
  std::vector<Bar> bars;
  double length_ms = 0;
};

struct Span {
  double from_us, to_us;
};

double Ts(const json& e, const char* key) { return e.contains(key) && e[key].is_number() ? e[key].get<double>() : 0; }

// The coordinator names a job "job N: label"; msched bench names it "label".
std::string Label(const std::string& process_name) {
  const size_t colon = process_name.find(": ");
  return colon == std::string::npos ? process_name : process_name.substr(colon + 2);
}

Result<Panel> ReadPanel(const std::string& title, const std::string& path) {
  Result<std::vector<json>> events = trace::ReadTraceEvents(path);
  if (!events.ok()) return events.status();
  std::map<int64_t, std::string> names;
  for (const json& e : *events) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args")) {
      names[e.value("pid", int64_t{0})] = Label(e["args"].value("name", ""));
    }
  }
  // Spans by row key: a job's label (its attempts share a row), or a link direction.
  std::map<std::string, std::vector<Span>> running, draining;
  std::vector<std::pair<int64_t, Span>> swaps;
  std::map<std::string, double> first_run;
  double origin = -1;
  for (const json& e : *events) {
    if (e.value("ph", "") != "X") continue;
    const Span s{Ts(e, "ts"), Ts(e, "ts") + Ts(e, "dur")};
    const int64_t pid = e.value("pid", int64_t{0});
    const int64_t tid = e.value("tid", int64_t{0});
    const std::string name = e.value("name", "");
    if (pid == trace::kGpuPid && e.value("cat", "") == trace::kSwapCategory) {
      swaps.push_back({tid, s});
    } else if (tid == trace::kJobStateTid && (name == trace::kRunning || name == trace::kDraining)) {
      const std::string label = names.count(pid) ? names[pid] : "pid " + std::to_string(pid);
      (name == trace::kRunning ? running : draining)[label].push_back(s);
      if (name == trace::kRunning && (!first_run.count(label) || s.from_us < first_run[label]))
        first_run[label] = s.from_us;
    } else {
      continue;
    }
    origin = origin < 0 ? s.from_us : std::min(origin, s.from_us);
  }
  if (running.empty()) return Status::NotFound(path + ": no job ran in this timeline");
  Panel p;
  p.title = title;
  std::vector<std::pair<double, std::string>> jobs;
  for (const auto& [label, t] : first_run) jobs.push_back({t, label});
  std::sort(jobs.begin(), jobs.end());
  const int link_out = 0, link_in = 1, idle = 2;
  p.rows = {"link to host (swap-outs)", "link to device (swap-ins)", "GPU idle"};
  auto ms = [&](double us) { return (us - origin) / 1000.0; };
  std::vector<Span> all_running;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string& label = jobs[i].second;
    const int row = static_cast<int>(p.rows.size());
    p.rows.push_back(label);
    for (const Span& s : running[label]) {
      p.bars.push_back({ms(s.from_us), ms(s.to_us), row, kJobColours[i % std::size(kJobColours)]});
      all_running.push_back(s);
    }
    for (const Span& s : draining[label]) p.bars.push_back({ms(s.from_us), ms(s.to_us), row, kDrainColour});
  }
  for (const auto& [tid, s] : swaps) {
    const bool in = tid == trace::kLinkToDeviceTid;
    p.bars.push_back({ms(s.from_us), ms(s.to_us), in ? link_in : link_out, in ? kSwapInColour : kSwapOutColour});
  }
  // Idle: from the first span to the last job's end, wherever no job ran.
  std::sort(all_running.begin(), all_running.end(), [](const Span& a, const Span& b) { return a.from_us < b.from_us; });
  double covered = origin;
  for (const Span& s : all_running) {
    if (s.from_us > covered) p.bars.push_back({ms(covered), ms(s.from_us), idle, kIdleColour});
    covered = std::max(covered, s.to_us);
  }
  for (const Bar& b : p.bars) p.length_ms = std::max(p.length_ms, b.to_ms);
  return p;
}

}  // namespace

Status WriteGantt(const ScenarioResult& r, const std::string& dir) {
  if (r.points.empty()) return Status::Ok();
  const PointResult& last = r.points.back();
  std::vector<Panel> panels;
  std::string problems;
  for (const PolicyResult* run : {last.Find(Policy::kMsched), last.Baseline()}) {
    if (run == nullptr || run->trace.empty()) continue;
    Result<Panel> p =
        ReadPanel(run->variant.name + " at " + std::to_string(last.point.percent) + "% of HBM", run->trace);
    if (p.ok()) {
      panels.push_back(std::move(*p));
    } else {
      problems += (problems.empty() ? "" : "; ") + p.status().message();
    }
  }
  if (panels.empty()) return problems.empty() ? Status::Ok() : Status::NotFound(problems);
  const std::string name = r.scenario->name + "-gantt";
  double length = 0;
  size_t rows = 0;
  for (const Panel& p : panels) length = std::max(length, p.length_ms), rows += p.rows.size();
  std::ofstream gp(dir + "/" + name + ".gp");
  gp << "set terminal pngcairo size 1000," << 160 + 28 * rows << "\nset output '" << dir << "/" << name << ".png'\n"
     << "set multiplot layout " << panels.size() << ",1 title \"" << r.scenario->title
     << ": who held the GPU (simulated device time)\" noenhanced font ',10'\n"
     << "set xrange [0:" << length * 1.01 << "]\nset xlabel 'device time, ms'\nset grid xtics\nunset key\n"
     << "set style fill solid 1.0 noborder\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    const Panel& p = panels[i];
    const std::string dat = dir + "/" + name + "-" + std::to_string(i) + ".dat";
    std::ofstream out(dat);
    out << "# from_ms to_ms row colour\n";
    for (const Bar& b : p.bars) out << b.from_ms << " " << b.to_ms << " " << b.row << " " << b.colour << "\n";
    gp << "set title \"" << p.title << "\" noenhanced\nset yrange [-0.6:" << p.rows.size() - 0.4 << "]\nset ytics (";
    for (size_t row = 0; row < p.rows.size(); ++row) gp << (row ? ", " : "") << "\"" << p.rows[row] << "\" " << row;
    gp << ") noenhanced\nplot '" << dat << "' using (($1+$2)/2):3:1:2:($3-" << kHalfHeight << "):($3+" << kHalfHeight
       << "):4 with boxxyerror lc rgb variable\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  return RunGnuplot(dir, name);
}

}  // namespace msched::bench

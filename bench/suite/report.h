// What msched bench prints and writes: per scenario a Markdown table (which
// reads as well in a terminal), notes on where the time went wherever msched
// falls short of 90% of the ideal or of the paper, a CSV of every run, a
// gnuplot chart of throughput against footprint per policy, and the headline
// table with the paper's figures beside ours (the Gantt plot is gantt.h's).
// Pure formatting, apart from WritePlot and RunGnuplot, which run gnuplot.
#pragma once

#include <string>
#include <vector>

#include "msched/status.h"
#include "suite/suite.h"

namespace msched::bench {

// The scenario's table and notes, in Markdown.
std::string ScenarioSection(const ScenarioResult& r, const DeviceFacts& device);

// msched's speedup over um and fraction of ideal at every point of the
// end-to-end and micro scenarios, with the paper's speedups beside.
std::string HeadlineTable(const std::vector<ScenarioResult>& results);

// Per point of the multi-user scenarios: msched beside the baselines on
// what users feel (OOMs, waits, makespan, utilisation, spread across users,
// the urgent job). Empty when none ran.
std::string MultiuserHeadline(const std::vector<ScenarioResult>& results);

// One row per (scenario, point, policy), with a header row.
std::string Csv(const std::vector<ScenarioResult>& results);

// Draws `<dir>/<scenario>.png` with gnuplot, keeping the data and script
// beside it: throughput against footprint, one line per policy and one for
// the ideal (sweeps with fewer than two points have nothing to draw: OK),
// or for a multi-user scenario each policy's waits and makespan.
Status WritePlot(const ScenarioResult& r, const std::string& dir);

// Runs gnuplot on the script `<dir>/<name>.gp`, keeping its complaints in
// `<dir>/<name>.gnuplot.err` when it fails.
Status RunGnuplot(const std::string& dir, const std::string& name);

}  // namespace msched::bench

// The report's Gantt plot of a scenario: its last point's msched run and
// its baseline (PointResult::Baseline) one above the other on one time
// axis, drawn from their timelines (docs/tracing.md): a row per job with
// the spans it ran (and drained), a row marking when no job ran (the GPU
// idle), and a row per direction of the link with the swaps. Runs gnuplot,
// like the other plots. Thread-compatible.
#pragma once

#include <string>

#include "msched/status.h"
#include "suite/suite.h"

namespace msched::bench {

// Draws `<dir>/<scenario>-gantt.png`, keeping the data and script beside
// it. OK with nothing drawn when neither run was traced.
Status WriteGantt(const ScenarioResult& r, const std::string& dir);

}  // namespace msched::bench

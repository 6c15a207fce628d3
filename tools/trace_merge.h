// `msched trace merge OUT FILE...`: one timeline from the coordinator's
// (mschedd --trace) and the jobs' (MSCHED_TRACE) files, which share process
// ids and the clock, so their events merge by concatenation (docs/tracing.md).
#pragma once

#include <string>
#include <vector>

#include "msched/status.h"

namespace msched {

// Writes the events of every file in `inputs` (Chrome trace JSON: an array
// of events, one the coordinator could not close lacking its final ']', or
// an object with "traceEvents") to `out` as one array, in the inputs'
// order. Refuses to write over one of its inputs. Returns how many events.
Result<size_t> MergeTraces(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace msched

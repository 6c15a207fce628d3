// Reading a workload file (bench/workloads/*.json) into a
// Workload (workload.h). Every field is checked before it is used; nothing
// throws. Stateless; thread-safe. Used by msim-run and the workload fuzzer.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "msched/status.h"
#include "workload.h"

namespace msim {

// Parses the workload at `path` (module paths are relative to it), with
// `overrides` replacing variables. On any problem, an InvalidArgument whose
// message starts with `path` ("w.json: steps[2].op: unknown op 'lanch'").
msched::Result<Workload> LoadWorkload(const std::string& path, const std::map<std::string, int64_t>& overrides);

}  // namespace msim

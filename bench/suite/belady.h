// Belady's minimum: the fewest bytes any placement policy must move from
// host to device for a job's access sequence on a GPU of a given size, the
// sequence being the simulator's access log of the job's run
// (msim/access_log.h). OPT, evicting the unit needed furthest ahead, misses
// least (Belady 1966); each unit is taken as accessed on its own, which can
// only lower the count (a policy must hold all of an operation's units at
// once), so the figure is a lower bound. A unit's first access is free, as
// in the benchmark's full form, where no input is written before the job
// starts (a job whose host wrote its memory first pays that load in any
// policy, and the bound leaves it out). Used by the benchmark only.
#pragma once

#include <cstdint>
#include <string>

#include "msched/status.h"

namespace msched::bench {

struct BeladyBound {
  uint64_t h2d_bytes = 0;  // capacity misses x the unit
  // What OPT moves when each operation's units must be resident together, as
  // a kernel that runs without faulting needs them (msched's prefetch): on
  // all of HBM, and on the working-set budget the coordinator gives a job
  // alone. Victims still go by furthest next use, which is not proven
  // optimal for such batched requests, so these are OPT's figures at that
  // granularity, not bounds: they say how much of a gap to Belady's minimum
  // the granularity and the budget explain.
  uint64_t whole_operation_h2d_bytes = 0;
  uint64_t whole_operation_budget_h2d_bytes = 0;
  uint64_t accesses = 0;  // unit accesses replayed
  uint64_t units = 0;     // distinct units of memory touched
};

// Replays the log at `path` on `capacity_bytes` of HBM (and, operation by
// operation, on `budget_bytes`). A missing or malformed log is an error
// saying where it went wrong.
Result<BeladyBound> BeladyMinimum(const std::string& path, uint64_t capacity_bytes, uint64_t budget_bytes);

}  // namespace msched::bench

// msim-run --replay: a real program's profile trace (src/profile/trace.h,
// recorded by msched-profile on a GPU) turned into a Workload (workload.h)
// that makes the program's driver calls again on the simulated GPU:
//   - every recorded allocation, with its recorded size, through cuMemAlloc
//     (so that libmsched sees it as the program's own), and every free, in
//     the recorded order, on the default stream;
//   - every launch, of a kernel of the recorded name and parameter layout,
//     with the recorded argument bytes: each aligned 8-byte word that
//     pointed into (or just past) a live allocation is moved to the same
//     offset of its replayed allocation, struct arguments included;
//   - each launch comes after the program's recorded host time before it
//     (the trace's host_ns), or, for a trace without it, after a stated
//     host time a launch (--host-ns-per-launch), or at once;
//   - each launch touches the recorded ranges, moved likewise and cut to
//     their allocations (msimSetNextLaunch), and runs for the trace's clean
//     duration when it has one, or else as the simulator models it: its
//     kernel launch time plus the touched bytes at its HBM bandwidth;
//   - each launch stamps the first word of every range it writes with a mix
//     of that word and the launch's place in the trace (the kernels' one
//     host implementation), so the allocations' final contents, which
//     msim-run checksums, depend on every write and on their order.
// What a trace cannot say is skipped and counted, never guessed: ranges
// outside every allocation, frees of unknown addresses, allocations no GPU
// could make (past 256 TiB, or wrapping the address space), launches whose
// kernel name holds a NUL, whose dimensions or parameter layout the driver
// would refuse or that disagree with an earlier launch of the same kernel;
// a duration past MSIM_MAX_KERNEL_NS is modelled rather than taken. Stateless; thread-safe. Used
// by msim-run only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "msched/status.h"
#include "profile/trace.h"
#include "workload.h"

namespace msim {

struct ReplayedTrace {
  Workload workload;
  uint64_t launches = 0;               // launches replayed
  uint64_t clean_durations = 0;        // of those, timed by the trace's duration_ns
  uint64_t allocations = 0;            // allocations replayed
  uint64_t skipped_launches = 0;       // launches the driver would refuse (see above)
  uint64_t dropped_ranges = 0;         // touched ranges outside every live allocation
  uint64_t unknown_frees = 0;          // frees of addresses no live allocation starts at
  uint64_t replaced_allocations = 0;   // live allocations a later one overlapped (taken as freed)
  uint64_t skipped_allocations = 0;    // sizes past 256 TiB, or past the end of the address space
  uint64_t implausible_durations = 0;  // durations past MSIM_MAX_KERNEL_NS, modelled instead
  uint64_t recorded_host = 0;          // launches after the trace's own host time (host_ns)
  uint64_t stated_host = 0;            // launches after the stated host time a launch
  std::vector<std::string> problems;   // trace lines the reader skipped ("file:line: what")
};

// The trace at `path` as a workload named after the file. An error when
// the file cannot be read or is not a trace. `host_ns_per_launch`: the host
// time before each launch the trace gives none for (0: none).
msched::Result<ReplayedTrace> ReplayTrace(const std::string& path, uint64_t host_ns_per_launch = 0);
// The same for a trace already read.
ReplayedTrace ReplayOf(const msched::Trace& trace, const std::string& name, uint64_t host_ns_per_launch = 0);

}  // namespace msim

// Running a parsed Workload (workload.h) through the driver API, in this
// process, on whatever libcuda.so.1 it loaded (the simulated one, alone or
// under libmsched.so). Nothing throws: a failure ends the run and is
// reported in RunResult::error. Confined to one thread (it drives the
// calling thread's CUDA context). Used by msim-run only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workload.h"

namespace msim {

struct RunResult {
  std::map<std::string, uint64_t> checksums;  // FNV-1a 64 of each buffer's final bytes
  uint64_t launches = 0;
  uint64_t first_launch_ns = 0;           // the clock once the first launch was queued (a job's start, past any wait)
  uint64_t started_ns = 0;                // the process's virtual clock at its start (a shared device's runs on)
  uint64_t virtual_ns = 0;                // the process's virtual clock at the end
  std::map<std::string, uint64_t> marks;  // virtual time at each "mark" step (after synchronising)
  std::vector<uint64_t> latencies_ns;     // each request a "serve" step answered, arrival to answer
  uint64_t arrival_ns = 0;                // when the job was submitted (RunOptions::arrival_ns, or its start)
  std::optional<uint64_t> free_bytes;     // the device memory free as the last "meminfo" step saw it
  int attempts = 0;                       // runs of the program, the last one included
  int ooms = 0;                           // attempts that ran out of device memory and were run again
  uint64_t lost_ns = 0;                   // device time those attempts ran before failing (work lost)
  // Empty on success. On a failure, the reason, with virtual_ns and what
  // was counted before it (arrival, attempts, OOMs, checksums read so far,
  // the free memory seen);
  // launches, marks and latencies stay empty.
  std::string error;
};

struct RunOptions {
  bool force_managed = false;     // every device buffer as cuMemAllocManaged (a unified-memory program)
  bool force_vmm = false;         // every device buffer mapped through the VMM API (kind vmm: a serving engine's)
  bool force_expandable = false;  // every device buffer in expandable segments (kind expandable: PyTorch's)
  bool checksums = true;          // read the checksum buffers back at the end
  uint64_t arrival_ns = 0;        // virtual time the job is submitted at (0: at once)
  // An attempt that runs out of device memory is discarded and the program
  // run again from the start after retry_delay_ns, up to max_attempts runs.
  int max_attempts = 1;
  uint64_t retry_delay_ns = 0;
};

// Executes the workload through the driver API.
RunResult RunWorkload(const Workload& w, const RunOptions& options);

}  // namespace msim

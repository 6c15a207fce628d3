// What mschedd learns of its GPU by itself, never from a job: the GPU's
// memory, and the clock that jobs' times are checked against
// (docs/coordinator.md, "What the coordinator takes from a job"). Found once,
// at start, in this order:
//   - the simulated GPU, when MSIM_DEVICE names a shared one: its HBM and
//     its virtual clock, read through msimObserveDevice of the driver that
//     MSCHED_REAL_LIBCUDA names (libcuda.so.1 by default), which observes
//     the device without joining it;
//   - NVML (libnvidia-ml.so.1, which nvidia-smi reads, and which needs no
//     CUDA context, which would cost the card memory): the GPU's total
//     memory; the clock is CLOCK_MONOTONIC, which jobs on a real GPU report;
//   - neither: the size is unknown (--gpu-memory, or the first job of root
//     or of the coordinator's own user, says it) and the clock is
//     CLOCK_MONOTONIC.
// Used by mschedd only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace msched {

struct DeviceView {
  uint64_t total_bytes = 0;         // 0: unknown
  std::string source;               // where the figures come from, for the log
  std::function<uint64_t()> clock;  // the device clock as the coordinator reads it
};

// The view of machine GPU `machine_gpu` (as nvidia-smi numbers it).
DeviceView ObserveDevice(int machine_gpu);

}  // namespace msched

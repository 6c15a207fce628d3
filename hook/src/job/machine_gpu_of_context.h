// Which GPU of the machine (src/base/machine_gpu.h) the current context's
// device is: what picks the coordinator a job joins. Used by hook/ only.
#pragma once

#include "msched/status.h"

namespace msched::hook {

// The machine index of the current context's device; Unavailable when no
// context is current, NotFound when the device cannot be told apart (see
// MachineGpuIndex), saying why.
Result<int> MachineGpuOfCurrentContext();

}  // namespace msched::hook

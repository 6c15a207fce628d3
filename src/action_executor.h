// Carrying out a MemoryManager's plan through DeviceOps: evictions (ordered
// after the launch stream's queued work when a victim may still be in use),
// then loads in access order, then the launch stream waits for them. A
// transfer that fails is undone in the manager's view, and the error is
// returned; the launch itself goes on (missing data faults in).
// Externally synchronized. Used by the hook and the coordinator client.
#pragma once

#include "device_ops.h"
#include "memory_manager.h"

namespace msched {

Status ExecuteActions(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, MemoryManager& manager);

}  // namespace msched

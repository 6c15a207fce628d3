// Carrying out a MemoryManager's plan through DeviceOps: read-mostly advice,
// then evictions (ordered after the last queued operation that used a
// victim, when it may not have run yet) and loads in access order (after
// earlier plans' evictions; beside this plan's), then the launch stream
// waits for the loads. A transfer that fails is undone in the manager's
// view, and the error is returned; the launch itself goes on (missing data
// faults in).
// Externally synchronized. Used by JobMemory.
#pragma once

#include "model/device_ops.h"
#include "model/memory_manager.h"

namespace msched {

// The bytes whose transfers were queued without error.
struct MovedBytes {
  uint64_t loaded = 0;
  uint64_t evicted = 0;
};

Status ExecuteActions(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, MemoryManager& manager,
                      MovedBytes* moved = nullptr);

}  // namespace msched

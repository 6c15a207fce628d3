// What the allocation hooks tell the job of an allocation they saw made or
// freed: the allocation map and the memory manager (through JobMemory), the
// statistics, and the profile being recorded. Used by the hooks of the
// allocation family and of memory msched cannot manage.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "base/thread_annotations.h"
#include "job/runtime.h"

namespace msched::hook {

// Records an allocation msched knows about. A pool block's memory is its
// chunk's, which the allocation map already holds (CudaPoolOps).
void RecordAllocation(Runtime& rt, CUdeviceptr base, size_t size, AllocKind kind) MSCHED_REQUIRES(rt.mu());

// Forgets the allocation at `base`, if msched knows it.
void ForgetAllocation(Runtime& rt, CUdeviceptr base) MSCHED_REQUIRES(rt.mu());

}  // namespace msched::hook

// What the allocation hooks tell the job of an allocation they saw made or
// freed: the allocation map and the memory manager (through JobMemory), the
// statistics, and the profile being recorded; and the coordinator: the
// registration at the first allocation, and what the job has allocated.
// Used by the hooks of the allocation family, of VMM memory and of memory
// imported from another process.
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

// Records memory shared with another process outside VMM (an IPC import, a
// block of a pool created to be exported): pinned in the allocation map and
// counted against the budget as shared (JobMemory::AddShared).
void RecordShared(Runtime& rt, CUdeviceptr base, size_t size) MSCHED_REQUIRES(rt.mu());

// Forgets the allocation at `base`, with what it shared, if RecordShared
// recorded it (the only pinned memory a program frees by its address);
// false when it did not.
bool ForgetShared(Runtime& rt, CUdeviceptr base) MSCHED_REQUIRES(rt.mu());

// Registers the job with the coordinator at its first allocation (of any
// kind), waiting while it is queued. The error the allocation must fail
// with, or success.
CUresult Admit(Runtime& rt, size_t bytes) MSCHED_EXCLUDES(rt.mu());

// Tells the coordinator what the job has allocated now, and `coming` bytes
// more that it is about to (CoordClient::ReportUsage).
void ReportUsage(Runtime& rt, uint64_t coming = 0) MSCHED_EXCLUDES(rt.mu());

}  // namespace msched::hook

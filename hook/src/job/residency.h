// The hook's side of JobMemory (src/model/job_memory.h): its moves carried out on
// the real driver (CudaDeviceOps for the calling thread's context) and
// counted in the job's statistics. Launches and device-side copies make
// their predicted working set resident before they are queued; the
// coordinator client reloads, evicts and fits the budget through the same.
// REQUIRES: the Runtime's lock. Used by hook/ only.
#pragma once

#include <cuda.h>

#include <functional>
#include <vector>

#include "base/thread_annotations.h"
#include "interpose/entry_table.h"
#include "job/runtime.h"

namespace msched::hook {

// `load` kLeaveToFaults: the launch faults its regions in (MSCHED_UNKNOWN=
// fault); they are counted as the job's, and room is made for them within
// the budget.
void PrepareResidency(Runtime& rt, const std::vector<PredictedRegion>& regions, CUstream stream,
                      JobMemory::Load load = JobMemory::Load::kPrefetch) MSCHED_REQUIRES(rt.mu());

// The bytes of the job's managed memory on the device: the driver's own
// count where it keeps one (the simulator: DeviceEnv::ResidentBytes); on a GPU, which has no residency
// query, the memory manager's count, which includes what launches faulted
// in within their predicted regions, misses what kernels touched beyond
// them, and still counts what the driver evicted on its own until msched
// evicts it.
uint64_t DeviceResidentBytes(Runtime& rt) MSCHED_REQUIRES(rt.mu());

// Once all the job's work is complete (its launches synchronised, or drained
// for a stop): raises the peak of what it holds beyond its budget
// (HookCounters::peak_over_budget), which its reports carry to `msched
// status`. Only then does the count include everything its kernels faulted
// in. Not for the launch path (the simulator counts chunk by chunk).
void NoteOverBudget(Runtime& rt) MSCHED_REQUIRES(rt.mu());

// Carries out `move` (one of JobMemory's moves, given the operations to act
// through) on the calling thread's context and counts what it did; nothing
// moves when there is no context. Not for the launch path (it allocates).
// `move` runs with the lock held: annotate the lambda MSCHED_REQUIRES(rt.mu()).
MoveOutcome MoveMemory(Runtime& rt, const std::function<MoveOutcome(DeviceOps&)>& move) MSCHED_REQUIRES(rt.mu());

// Before the first launch msched cannot fully predict: takes read-mostly
// advice off every allocation and stops giving it (an unpredicted kernel may
// write to duplicated data, which then collapses fault by fault). Runs once
// per process; every later call is one atomic load, so the launch path
// calls it without checking first.
void ForgoReadMostly(Runtime& rt) MSCHED_REQUIRES(rt.mu());

// The stream a call really uses: handle 0 on a per-thread (_ptsz/_ptds)
// entry point is the per-thread default stream.
inline CUstream EffectiveStream(Entry e, CUstream s) {
  return s == nullptr && Info(e).flavour != 0 ? CU_STREAM_PER_THREAD : s;
}

}  // namespace msched::hook

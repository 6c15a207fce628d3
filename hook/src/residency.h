// Making a device operation's predicted working set resident before it is
// queued: the memory manager plans evictions and loads within the budget,
// and CudaDeviceOps carries them out on the transfer stream, ordered before
// the operation on `stream`. Shared by launches and device-side copies.
// REQUIRES: the Runtime's lock. Used by hook/ only.
#pragma once

#include <cuda.h>

#include <vector>

#include "entry_table.h"
#include "runtime.h"

namespace msched::hook {

void PrepareResidency(Runtime& rt, const std::vector<PredictedRegion>& regions, CUstream stream);

// The stream a call really uses: handle 0 on a per-thread (_ptsz/_ptds)
// entry point is the per-thread default stream.
inline CUstream EffectiveStream(Entry e, CUstream s) {
  return s == nullptr && Info(e).flavour != 0 ? CU_STREAM_PER_THREAD : s;
}

}  // namespace msched::hook

#include "residency.h"

#include "action_executor.h"
#include "cuda_device_ops.h"
#include "log.h"

namespace msched::hook {

void PrepareResidency(Runtime& rt, const std::vector<PredictedRegion>& regions, CUstream stream) {
  if (regions.empty() || rt.capturing.load(std::memory_order_relaxed) > 0) return;
  HookCounters& c = rt.counters();
  uint64_t predicted = 0;
  for (const PredictedRegion& r : regions) predicted += r.range.size();
  c.bytes_predicted->Add(predicted);
  if (rt.Budget() == 0) return;  // no context yet to ask: nothing can be planned
  MemoryActions actions;
  rt.memory().PlanAccess(regions, rt.NextSeq(), &actions);
  rt.streams_since_sync.insert(stream);
  if (actions.empty()) return;
  c.bytes_unserved->Add(actions.unserved_bytes);
  Result<CudaDeviceOps> ops = CudaDeviceOps::ForCurrentContext();
  Status s = ops.ok() ? ExecuteActions(actions, CudaDeviceOps::Handle(stream), *ops, rt.memory()) : ops.status();
  if (!s.ok()) {
    c.prefetch_errors->Add();
    if (!ops.ok()) rt.memory().Invalidate(actions);
    LogOnce("prefetch", spdlog::level::warn, "prefetch failed (" + s.ToString() + "); data will fault in instead");
    return;
  }
  c.bytes_prefetched->Add(actions.load_bytes);
  c.bytes_evicted->Add(actions.evict_bytes);
}

}  // namespace msched::hook

// Memory msched cannot move: memory imported from another process
// (cuIpcOpenMemHandle). The calls pass through; the mappings are recorded
// in the allocation map as pinned (a launch's prediction may point into
// them, and nothing moves them), and their bytes count against the job's
// budget for as long as they exist. (VMM memory is vmm_hooks.cc's.)
#include "interpose/allocation_record.h"
#include "interpose/driver_functions.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"

namespace msched::hook {

CUresult Hook_cuIpcOpenMemHandle(Entry e, CUdeviceptr_v2* pdptr, CUipcMemHandle_v1 handle, unsigned int flags) {
  return CallThenLearn<PFN_cuIpcOpenMemHandle_v11000>(
      e, [&](auto real) { return real(pdptr, handle, flags); },
      [&](Runtime& rt) {
        auto range = RealDriver().cuMemGetAddressRange_v2;
        CUdeviceptr base = 0;
        size_t size = 0;
        if (pdptr == nullptr || range == nullptr || range(&base, &size, *pdptr) != CUDA_SUCCESS) return;
        MutexLock lock(&rt.mu());
        RecordAllocation(rt, base, size, AllocKind::kPinned);
        rt.AddPinned(static_cast<int64_t>(size));
      });
}

CUresult Hook_cuIpcCloseMemHandle(Entry e, CUdeviceptr_v2 dptr) {
  return CallThenLearn<PFN_cuIpcCloseMemHandle_v4010>(
      e, [&](auto real) { return real(dptr); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        const Allocation* a = rt.allocs().Find(dptr);
        if (a == nullptr || a->kind != AllocKind::kPinned) return;
        rt.AddPinned(-static_cast<int64_t>(a->size));
        ForgetAllocation(rt, a->base);
      });
}

}  // namespace msched::hook

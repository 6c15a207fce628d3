// Memory msched cannot manage: physical allocations mapped by the program
// through the VMM API (cuMemCreate, cuMemMap) and memory imported from
// another process (cuIpcOpenMemHandle). The calls pass through; the
// mappings are recorded in the allocation map as pinned (a launch's
// prediction may point into them, and nothing moves them), and their bytes
// count against the job's budget for as long as they exist.
#include "interpose/allocation_record.h"
#include "interpose/driver_functions.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"

namespace msched::hook {

CUresult Hook_cuMemCreate(Entry e, CUmemGenericAllocationHandle_v1* handle, size_t size,
                          const CUmemAllocationProp_v1* prop, unsigned long long flags) {
  return CallThenLearn<PFN_cuMemCreate_v10020>(
      e, [&](auto real) { return real(handle, size, prop, flags); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.PhysicalCreated(*handle, size);
      });
}

CUresult Hook_cuMemRelease(Entry e, CUmemGenericAllocationHandle_v1 handle) {
  return CallThenLearn<PFN_cuMemRelease_v10020>(
      e, [&](auto real) { return real(handle); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.PhysicalReleased(handle);
      });
}

CUresult Hook_cuMemMap(Entry e, CUdeviceptr_v2 ptr, size_t size, size_t offset, CUmemGenericAllocationHandle_v1 handle,
                       unsigned long long flags) {
  return CallThenLearn<PFN_cuMemMap_v10020>(
      e, [&](auto real) { return real(ptr, size, offset, handle, flags); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        RecordAllocation(rt, ptr, size, AllocKind::kPinned);
      });
}

CUresult Hook_cuMemUnmap(Entry e, CUdeviceptr_v2 ptr, size_t size) {
  return CallThenLearn<PFN_cuMemUnmap_v10020>(
      e, [&](auto real) { return real(ptr, size); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        ForgetAllocation(rt, ptr);
      });
}

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

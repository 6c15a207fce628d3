// Memory shared through legacy IPC. Imports (cuIpcOpenMemHandle) are memory
// msched cannot move: the calls pass through; the mappings are recorded in
// the allocation map as pinned (a launch's prediction may point into them,
// and nothing moves them), and their bytes count against the job's budget,
// as shared memory, for as long as they exist. Exports (cuIpcGetMemHandle)
// pass through too; the driver refuses managed memory, which is what msched
// makes of cuMemAlloc's, so such a refusal is explained once, with the ways
// that work. (VMM memory is vmm_hooks.cc's; exportable pools alloc_hooks.cc's.)
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
        RecordShared(rt, base, size);
      });
}

CUresult Hook_cuIpcCloseMemHandle(Entry e, CUdeviceptr_v2 dptr) {
  return CallThenLearn<PFN_cuIpcCloseMemHandle_v4010>(
      e, [&](auto real) { return real(dptr); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        (void)ForgetShared(rt, dptr);
      });
}

CUresult Hook_cuIpcGetMemHandle(Entry e, CUipcMemHandle_v1* handle, CUdeviceptr_v2 dptr) {
  auto c = Enter<PFN_cuIpcGetMemHandle_v4010>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(handle, dptr);
  if (!c.act || r != CUDA_ERROR_INVALID_VALUE || !c.rt->converting()) return r;
  Safely(*c.rt, "cuIpcGetMemHandle", [&] {
    MutexLock lock(&c.rt->mu());
    const Allocation* a = c.rt->allocs().Find(dptr);
    if (a == nullptr || a->kind != AllocKind::kManaged) return;
    c.rt->counters().ipc_export_refused->Add();
    LogOnce(
        "ipc-export", spdlog::level::err,
        "cuIpcGetMemHandle: the driver cannot share managed memory through IPC, and under msched cuMemAlloc's "
        "memory is managed (so that msched can move it); memory shared from an exportable pool (cuMemPoolCreate with a "
        "handle type) or through VMM (cuMemExportToShareableHandle) is left to the driver and stays on the GPU, "
        "or run this job with MSCHED_MODE=off");
  });
  return r;
}

}  // namespace msched::hook

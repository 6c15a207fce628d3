// VMM memory: physical allocations the program makes and maps itself
// (cuMemCreate, cuMemMap: vLLM's and SGLang's allocators, NCCL, PyTorch's
// expandable segments). The calls go to the driver; JobMemory's VmmMemory
// (src/model/vmm_memory.h) records handles, mappings and access, so that
// the memory stays resident for a turn and moves whole between turns
// (coord_orders.cc). Every call here waits at the gate, as launches do: none
// runs while the job's memory may be out. Handles are translated both ways,
// so that the program keeps the values it was given. Mappings are recorded
// in the allocation map as pinned (a launch's prediction may point into
// them; the memory manager never prefetches them). The job registers with
// its coordinator at its first cuMemCreate, as at its first cuMemAlloc.
#include <chrono>

#include "client/coord_client.h"
#include "interpose/allocation_record.h"
#include "interpose/driver_functions.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "job/cuda_vmm_ops.h"

namespace msched::hook {
namespace {

// How long cuMemCreate waits for memory its turn's grant counted on.
constexpr std::chrono::milliseconds kMemoryWait{10000};

// VMM memory being made, for the coordinator's reports meanwhile
// (CoordClient::Creating), from before its report to the driver's answer.
class Creating {
 public:
  Creating(CoordClient* cc, uint64_t bytes) : cc_(cc), bytes_(static_cast<int64_t>(bytes)) {
    if (cc_ != nullptr) cc_->Creating(bytes_);
  }
  Creating(const Creating&) = delete;
  Creating& operator=(const Creating&) = delete;
  ~Creating() {
    if (cc_ != nullptr) cc_->Creating(-bytes_);
  }

 private:
  CoordClient* cc_;
  int64_t bytes_;
};

// Whether the job's grant holds its memory that cannot page with `size`
// more: then an out-of-memory answer is memory others still hold, not the
// job's own excess.
bool GrantCounts(Runtime& rt, uint64_t size) {
  bool counts = false;
  Safely(rt, "reading the grant", [&] {
    MutexLock lock(&rt.mu());
    const uint64_t granted = rt.job().budget().granted;
    counts = granted != 0 && rt.job().unpaged_bytes() + size <= granted;
  });
  return counts;
}

// Whether a VMM call changes what the job has allocated (its mappings are
// in the allocation map) or shares: then the coordinator hears of it.
enum class Usage : bool { kSame, kChanged };

// The shape of a VMM hook: through the gate, the real call with handles
// translated (`call(real, real_of)`, `real_of` mapping the program's handle
// to the driver's), then, when msched acts and the driver succeeded,
// `learn(runtime)` (which takes the runtime's lock) inside Safely, and the report
// of what the job has allocated if `usage` changed.
template <typename Fn, typename Call, typename Learn>
CUresult VmmCall(Entry e, Call&& call, Learn&& learn, Usage usage = Usage::kSame) {
  auto c = Enter<Fn>(e);
  if (!c.real) return NoRealFunction(e);
  const auto as_is = [](CUmemGenericAllocationHandle h) { return h; };
  if (!c.act) return call(c.real, as_is);
  HookScope scope;
  Runtime& rt = *c.rt;
  const GatePass pass = PassGate(rt);
  const auto real_of = [&rt](CUmemGenericAllocationHandle id) {
    CUmemGenericAllocationHandle real = id;
    Safely(rt, "translating a VMM handle", [&] {
      MutexLock lock(&rt.mu());
      real = rt.job().vmm().RealOf(id);
    });
    return real;
  };
  const CUresult r = call(c.real, real_of);
  if (r != CUDA_SUCCESS) return r;
  Safely(rt, Info(e).symbol, [&] {
    learn(rt);
    MutexLock lock(&rt.mu());
    rt.CountUnpaged();
  });
  if (usage == Usage::kChanged) Safely(rt, "reporting allocations", [&] { ReportUsage(rt); });
  return r;
}

}  // namespace

CUresult Hook_cuMemCreate(Entry e, CUmemGenericAllocationHandle_v1* handle, size_t size,
                          const CUmemAllocationProp_v1* prop, unsigned long long flags) {
  auto c = Enter<PFN_cuMemCreate_v10020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act || handle == nullptr || prop == nullptr || size == 0) return c.real(handle, size, prop, flags);
  HookScope scope;
  Runtime& rt = *c.rt;
  if (const CUresult refused = Admit(rt, size); refused != CUDA_SUCCESS) return refused;
  // Physical memory cannot be overcommitted: the coordinator hears of it
  // first, and the gate lets the call through once it has answered (making
  // room, or time-slicing the job with those it no longer fits beside).
  CoordClient* cc = CoordClient::Active();
  const Creating creating(cc, size);
  Safely(rt, "reporting allocations", [&] { ReportUsage(rt, size); });
  CUresult r = CUDA_SUCCESS;
  for (auto waited = std::chrono::milliseconds{0};; waited += CoordClient::kMemoryPause) {
    {
      const GatePass pass = PassGate(rt);
      r = c.real(handle, size, prop, flags);
    }
    // Out of memory although the turn's grant counted this memory: a job
    // stopped for the turn has not given its memory back yet (it answers
    // late: idle, or on a loaded host). The call waits for it, at most
    // kMemoryWait, outside the gate (a stop may come meanwhile), before the
    // driver's answer stands.
    if (r != CUDA_ERROR_OUT_OF_MEMORY || cc == nullptr || waited >= kMemoryWait || !GrantCounts(rt, size)) break;
    LogOnce("vmm-create-wait", spdlog::level::warn,
            "cuMemCreate: waiting for device memory that a stopped job is still giving back");
    cc->PauseForMemory();
  }
  if (r != CUDA_SUCCESS) return r;
  Safely(rt, "cuMemCreate", [&] {
    MutexLock lock(&rt.mu());
    *handle = rt.job().ChangeVmm()->Created(*handle, size, CudaVmmOps::Recipe(*prop));
    rt.CountUnpaged();
    rt.counters().alloc_pinned->Add();
    rt.counters().alloc_pinned_bytes->Add(size);
  });
  return r;
}

CUresult Hook_cuMemRelease(Entry e, CUmemGenericAllocationHandle_v1 handle) {
  auto c = Enter<PFN_cuMemRelease_v10020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act) return c.real(handle);
  HookScope scope;
  Runtime& rt = *c.rt;
  const GatePass pass = PassGate(rt);
  std::optional<uint64_t> real;
  Safely(rt, "cuMemRelease", [&] {
    MutexLock lock(&rt.mu());
    real = rt.job().ChangeVmm()->Releasing(handle);
    rt.CountUnpaged();
  });
  if (!real.has_value()) return c.real(handle);  // not one msched knows: the driver answers
  // msched holds one driver reference for all of the program's: it goes with the last.
  return *real != 0 ? c.real(*real) : CUDA_SUCCESS;
}

CUresult Hook_cuMemMap(Entry e, CUdeviceptr_v2 ptr, size_t size, size_t offset, CUmemGenericAllocationHandle_v1 handle,
                       unsigned long long flags) {
  return VmmCall<PFN_cuMemMap_v10020>(
      e, [&](auto real, auto real_of) { return real(ptr, size, offset, real_of(handle), flags); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.job().ChangeVmm()->Mapped(ptr, size, offset, handle);
        RecordAllocation(rt, ptr, size, AllocKind::kPinned);
      },
      Usage::kChanged);
}

CUresult Hook_cuMemUnmap(Entry e, CUdeviceptr_v2 ptr, size_t size) {
  return VmmCall<PFN_cuMemUnmap_v10020>(
      e, [&](auto real, auto) { return real(ptr, size); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.job().ChangeVmm()->Unmapped(ptr, size);
        // One call may unmap several mappings, laid end to end.
        for (uint64_t at = ptr; at < ptr + size;) {
          const Allocation* a = rt.allocs().Find(at);
          if (a == nullptr) break;
          at = a->base + a->size;
          ForgetAllocation(rt, a->base);
        }
      },
      Usage::kChanged);
}

CUresult Hook_cuMemSetAccess(Entry e, CUdeviceptr_v2 ptr, size_t size, const CUmemAccessDesc_v1* desc, size_t count) {
  return VmmCall<PFN_cuMemSetAccess_v10020>(
      e, [&](auto real, auto) { return real(ptr, size, desc, count); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        std::vector<VmmAccess> access;
        for (size_t i = 0; i < count; ++i) {
          access.push_back(
              {static_cast<int32_t>(desc[i].location.type), desc[i].location.id, static_cast<uint32_t>(desc[i].flags)});
        }
        rt.job().ChangeVmm()->AccessSet(ptr, size, access);
      });
}

CUresult Hook_cuMemRetainAllocationHandle(Entry e, CUmemGenericAllocationHandle_v1* handle, void* addr) {
  return VmmCall<PFN_cuMemRetainAllocationHandle_v11000>(
      e, [&](auto real, auto) { return real(handle, addr); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        const VmmMemory::Retain retain = rt.job().ChangeVmm()->Retained(*handle);
        if (retain.drop_driver_reference) {
          if (auto release = RealDriver().cuMemRelease) release(*handle);
        }
        *handle = retain.id;
      });
}

CUresult Hook_cuMemExportToShareableHandle(Entry e, void* shareable, CUmemGenericAllocationHandle_v1 handle,
                                           CUmemAllocationHandleType type, unsigned long long flags) {
  return VmmCall<PFN_cuMemExportToShareableHandle_v10020>(
      e, [&](auto real, auto real_of) { return real(shareable, real_of(handle), type, flags); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.job().ChangeVmm()->Exported(handle);
      },
      Usage::kChanged);  // the coordinator hears what is shared
}

CUresult Hook_cuMemImportFromShareableHandle(Entry e, CUmemGenericAllocationHandle_v1* handle, void* os_handle,
                                             CUmemAllocationHandleType type) {
  return VmmCall<PFN_cuMemImportFromShareableHandle_v10020>(
      e, [&](auto real, auto) { return real(handle, os_handle, type); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        // Another process's memory: never moved, and not counted as the job's.
        *handle = rt.job().ChangeVmm()->Imported(*handle, 0);
      },
      Usage::kChanged);
}

CUresult Hook_cuMemGetAllocationPropertiesFromHandle(Entry e, CUmemAllocationProp_v1* prop,
                                                     CUmemGenericAllocationHandle_v1 handle) {
  return VmmCall<PFN_cuMemGetAllocationPropertiesFromHandle_v10020>(
      e, [&](auto real, auto real_of) { return real(prop, real_of(handle)); }, [](Runtime&) {});
}

}  // namespace msched::hook

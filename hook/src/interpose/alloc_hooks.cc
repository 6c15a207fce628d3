// The allocation family. In um, alloc and msched modes (and profile mode)
// ordinary device allocations (cuMemAlloc, pitch, stream-ordered and pool)
// become managed memory, so that they can be moved and can exceed the GPU;
// the allocation map and the memory manager record them (memory that cannot
// be managed is pinned_memory_hooks.cc's). cuMemGetInfo reports the job's
// view: its budget and what it has allocated.
//
// cuMemAlloc and cuMemAllocPitch become one managed allocation each.
// Stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync) are
// served by msched's pool (src/model/managed_pool.h, through
// cuda_pool_ops.h): carved from large managed chunks and reused after
// cuMemFreeAsync in stream order, so that an allocator that allocates and
// frees per tensor pays no managed allocation, free or synchronisation per
// tensor. The allocation map records each block as the program sees it (for
// whole-allocation prediction, copies and profiles), within its chunk,
// whose entry holds the memory manager's chunks. One pool stands in for
// every CUmemoryPool but those created with an export handle type: another
// process may map their blocks (cuMemPoolExportPointer), which managed
// memory cannot serve, so their allocations are left to the driver, never
// moved, and counted as shared memory (JobMemory::AddShared). Calls on a
// stream that is capturing a graph are left to the driver (graph memory
// nodes), and a pool block freed during a capture is never reused (when
// the graph will free it is unknowable).
#include <optional>

#include "client/coord_client.h"
#include "interpose/allocation_record.h"
#include "interpose/driver_functions.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "job/cuda_device_ops.h"
#include "job/cuda_pool_ops.h"
#include "job/residency.h"

namespace msched::hook {
namespace {

constexpr size_t kPitchAlignment = 512;

// Records an allocation msched made in place of the program's (managed, or
// a block of its pool) and counts it as converted.
void RecordConverted(Runtime& rt, CUdeviceptr base, size_t size, AllocKind kind) {
  MutexLock lock(&rt.mu());
  RecordAllocation(rt, base, size, kind);
  rt.counters().alloc_converted->Add();
  rt.counters().alloc_converted_bytes->Add(size);
}

// After the driver freed `dptr`: msched forgets it (and what it shared, for
// a block of an exportable pool) and tells the coordinator.
void AfterRealFree(Runtime& rt, const char* where, CUdeviceptr dptr) {
  Safely(rt, where, [&] {
    {
      MutexLock lock(&rt.mu());
      if (!ForgetShared(rt, dptr)) ForgetAllocation(rt, dptr);
    }
    ReportUsage(rt);
  });
}

// Allocates `size` bytes of managed memory in place of an ordinary
// allocation. Falls back to `original` when conversion is off.
template <typename Original>
CUresult Convert(Runtime& rt, CUdeviceptr_v2* dptr, size_t size, Original&& original_call) {
  if (!rt.converting() || dptr == nullptr || size == 0) return original_call();
  auto managed = Real<PFN_cuMemAllocManaged_v6000>(Entry::cuMemAllocManaged);
  if (managed == nullptr) return original_call();
  if (const CUresult refused = Admit(rt, size); refused != CUDA_SUCCESS) return refused;
  const CUresult r = managed(dptr, size, CU_MEM_ATTACH_GLOBAL);
  Safely(rt, "converting an allocation", [&] {
    if (r != CUDA_SUCCESS) {
      rt.counters().alloc_failed->Add();
      return;
    }
    RecordConverted(rt, *dptr, size, AllocKind::kManaged);
  });
  if (r == CUDA_SUCCESS) Safely(rt, "reporting allocations", [&] { ReportUsage(rt); });
  return r;
}

// Whether `stream` is capturing into a graph.
bool Capturing(Runtime& rt, CUstream stream) {
  if (!rt.AnyCapturing()) return false;
  MutexLock lock(&rt.mu());
  return rt.Capturing(stream);
}

// Serves a stream-ordered allocation on `stream` (the effective stream)
// from msched's pool. Falls back to `original_call` when conversion is off,
// the driver has no managed memory, or the stream is capturing.
template <typename Original>
CUresult AllocateFromPool(Runtime& rt, CUdeviceptr_v2* dptr, size_t size, CUstream stream, Original&& original_call) {
  if (!rt.converting() || dptr == nullptr || size == 0 ||
      Real<PFN_cuMemAllocManaged_v6000>(Entry::cuMemAllocManaged) == nullptr || Capturing(rt, stream)) {
    return original_call();
  }
  if (const CUresult refused = Admit(rt, size); refused != CUDA_SUCCESS) return refused;
  CUresult r = CUDA_SUCCESS;
  const bool served = Safely(rt, "a stream-ordered allocation", [&] {
    MutexLock pool_lock(&rt.pool_mu());
    CudaPoolOps ops(rt);
    const Result<uint64_t> block = rt.pool().Allocate(size, CudaDeviceOps::Handle(stream), ops);
    if (!block.ok()) {
      r = ops.ErrorFor(block.status());
      rt.counters().alloc_failed->Add();
      return;
    }
    *dptr = *block;
    RecordConverted(rt, *dptr, size, AllocKind::kPooled);
  });
  if (!served) return original_call();
  if (r == CUDA_SUCCESS) Safely(rt, "reporting allocations", [&] { ReportUsage(rt); });
  return r;
}

// Whether `pool` was created to be exported (its allocations are the driver's).
bool Exportable(Runtime& rt, CUmemoryPool pool) {
  bool exportable = false;
  Safely(rt, "looking up a pool", [&] {
    MutexLock lock(&rt.mu());
    exportable = rt.exportable_pools().count(pool) != 0;
  });
  return exportable;
}

// Makes an allocation of an exportable pool through the driver, after
// admission, and counts it as shared.
template <typename Original>
CUresult AllocateShared(Runtime& rt, CUdeviceptr_v2* dptr, size_t size, Original&& original_call) {
  if (dptr == nullptr || size == 0) return original_call();
  if (const CUresult refused = Admit(rt, size); refused != CUDA_SUCCESS) return refused;
  const CUresult r = original_call();
  if (r != CUDA_SUCCESS) return r;
  Safely(rt, "an exportable pool's allocation", [&] {
    MutexLock lock(&rt.mu());
    RecordShared(rt, *dptr, size);
  });
  Safely(rt, "reporting allocations", [&] { ReportUsage(rt); });
  return r;
}

// Frees `dptr` into the pool if it is a pool block: in stream order on
// `stream`, or at once when `idle` (no queued work uses it). The program's
// answer, or nullopt when the pool does not hold `dptr`. A pool block never
// reaches the real driver, which would free its whole chunk: in
// pass-through it is kept, unused, for good.
std::optional<CUresult> FreeToPool(Runtime& rt, CUdeviceptr dptr, CUstream stream, bool idle) {
  std::optional<CUresult> answer;
  Safely(rt, "freeing a stream-ordered allocation", [&] {
    MutexLock pool_lock(&rt.pool_mu());
    ManagedPool& pool = rt.pool();
    if (!pool.Contains(dptr)) return;
    answer = CUDA_SUCCESS;
    if (rt.passthrough()) return;
    CudaPoolOps ops(rt);
    const bool capturing = !idle && Capturing(rt, stream);
    const Status s = idle        ? pool.FreeIdle(dptr)
                     : capturing ? pool.Retire(dptr)
                                 : pool.Free(dptr, CudaDeviceOps::Handle(stream), ops);
    if (s.code() == StatusCode::kInvalidArgument) {  // not the start of a live block
      answer = CUDA_ERROR_INVALID_VALUE;
      return;
    }
    if (capturing || !s.ok()) {
      rt.counters().pool_retired->Add();
      LogOnce("pool-retired", spdlog::level::warn,
              capturing
                  ? "a stream-ordered allocation was freed inside a graph capture: its memory is never reused"
                  : "a stream-ordered free could not be ordered (" + s.ToString() + "): its memory is never reused");
    }
    MutexLock lock(&rt.mu());
    ForgetAllocation(rt, dptr);
  });
  if (answer == CUDA_SUCCESS) Safely(rt, "reporting allocations", [&] { ReportUsage(rt); });
  return answer;
}

}  // namespace

CUresult Hook_cuMemAlloc(Entry e, CUdeviceptr_v2* dptr, size_t bytesize) {
  auto c = Enter<PFN_cuMemAlloc_v3020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act) return c.real(dptr, bytesize);
  HookScope scope;
  return Convert(*c.rt, dptr, bytesize, [&] { return c.real(dptr, bytesize); });
}

CUresult Hook_cuMemAllocPitch(Entry e, CUdeviceptr_v2* dptr, size_t* pitch, size_t width, size_t height,
                              unsigned int element_size) {
  auto c = Enter<PFN_cuMemAllocPitch_v3020>(e);
  if (!c.real) return NoRealFunction(e);
  auto original = [&] { return c.real(dptr, pitch, width, height, element_size); };
  if (!c.act || !c.rt->converting()) return original();
  // Validate as the driver does, then lay rows out at the common 512-byte
  // pitch alignment.
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0 ||
      (element_size != 4 && element_size != 8 && element_size != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (row / kPitchAlignment > SIZE_MAX / kPitchAlignment / height) return CUDA_ERROR_INVALID_VALUE;
  HookScope scope;
  const CUresult r = Convert(*c.rt, dptr, row * height, original);
  if (r == CUDA_SUCCESS) *pitch = row;
  return r;
}

CUresult Hook_cuMemAllocManaged(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, unsigned int flags) {
  auto c = Enter<PFN_cuMemAllocManaged_v6000>(e);
  if (!c.real) return NoRealFunction(e);
  if (c.act && dptr != nullptr && bytesize > 0) {
    HookScope scope;
    if (const CUresult refused = Admit(*c.rt, bytesize); refused != CUDA_SUCCESS) return refused;
  }
  const CUresult r = c.real(dptr, bytesize, flags);
  if (c.act && r == CUDA_SUCCESS) {
    Safely(*c.rt, "cuMemAllocManaged", [&] {
      {
        MutexLock lock(&c.rt->mu());
        RecordAllocation(*c.rt, *dptr, bytesize, AllocKind::kManaged);
      }
      ReportUsage(*c.rt);
    });
  }
  return r;
}

CUresult Hook_cuMemAllocAsync(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, CUstream stream) {
  auto c = Enter<PFN_cuMemAllocAsync_v11020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act) return c.real(dptr, bytesize, stream);
  HookScope scope;
  return AllocateFromPool(*c.rt, dptr, bytesize, EffectiveStream(e, stream),
                          [&] { return c.real(dptr, bytesize, stream); });
}

CUresult Hook_cuMemAllocFromPoolAsync(Entry e, CUdeviceptr_v2* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) {
  auto c = Enter<PFN_cuMemAllocFromPoolAsync_v11020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act || pool == nullptr) return c.real(dptr, bytesize, pool, stream);
  HookScope scope;
  if (Exportable(*c.rt, pool)) {
    return AllocateShared(*c.rt, dptr, bytesize, [&] { return c.real(dptr, bytesize, pool, stream); });
  }
  return AllocateFromPool(*c.rt, dptr, bytesize, EffectiveStream(e, stream),
                          [&] { return c.real(dptr, bytesize, pool, stream); });
}

CUresult Hook_cuMemFree(Entry e, CUdeviceptr_v2 dptr) {
  auto c = Enter<PFN_cuMemFree_v3020>(e);
  if (!c.real) return NoRealFunction(e);
  if (c.rt == nullptr || HookScope::Active()) return c.real(dptr);
  HookScope scope;
  // cuMemFree of stream-ordered memory does not synchronise: the program
  // has made sure no queued work still uses it.
  if (const std::optional<CUresult> pooled = FreeToPool(*c.rt, dptr, nullptr, /*idle=*/true)) return *pooled;
  const CUresult r = c.real(dptr);
  if (c.act && r == CUDA_SUCCESS) AfterRealFree(*c.rt, "cuMemFree", dptr);
  return r;
}

CUresult Hook_cuMemFreeAsync(Entry e, CUdeviceptr_v2 dptr, CUstream stream) {
  auto c = Enter<PFN_cuMemFreeAsync_v11020>(e);
  if (!c.real) return NoRealFunction(e);
  if (c.rt == nullptr || HookScope::Active()) return c.real(dptr, stream);
  HookScope scope;
  if (const std::optional<CUresult> pooled = FreeToPool(*c.rt, dptr, EffectiveStream(e, stream), /*idle=*/false)) {
    return *pooled;
  }
  // Not the pool's: memory the driver allocated (before msched converted,
  // or in a capture), or a converted cuMemAlloc, which the driver frees at once.
  const CUresult r = c.real(dptr, stream);
  if (c.act && r == CUDA_SUCCESS) AfterRealFree(*c.rt, "cuMemFreeAsync", dptr);
  return r;
}

CUresult Hook_cuMemPoolTrimTo(Entry e, CUmemoryPool pool, size_t min_bytes_to_keep) {
  auto c = Enter<PFN_cuMemPoolTrimTo_v11020>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(pool, min_bytes_to_keep);
  if (!c.act || r != CUDA_SUCCESS) return r;
  HookScope scope;
  // msched's one pool stands in for every pool: trimming any trims it, and
  // what may be kept counts all of its chunks.
  Safely(*c.rt, "cuMemPoolTrimTo", [&] {
    MutexLock pool_lock(&c.rt->pool_mu());
    CudaPoolOps ops(*c.rt);
    (void)c.rt->pool().Trim(min_bytes_to_keep, ops);
  });
  return r;
}

CUresult Hook_cuMemPoolCreate(Entry e, CUmemoryPool* pool, const CUmemPoolProps_v1* props) {
  return CallThenLearn<PFN_cuMemPoolCreate_v11020>(
      e, [&](auto real) { return real(pool, props); },
      [&](Runtime& rt) {
        if (props->handleTypes == CU_MEM_HANDLE_TYPE_NONE) return;
        MutexLock lock(&rt.mu());
        rt.exportable_pools().insert(*pool);
      });
}

// A destroyed pool's handle may come back for a new pool: it is forgotten.
CUresult Hook_cuMemPoolDestroy(Entry e, CUmemoryPool pool) {
  return CallThenLearn<PFN_cuMemPoolDestroy_v11020>(
      e, [&](auto real) { return real(pool); },
      [&](Runtime& rt) {
        MutexLock lock(&rt.mu());
        rt.exportable_pools().erase(pool);
      });
}

CUresult Hook_cuMemGetInfo(Entry e, size_t* free, size_t* total) {
  auto c = Enter<PFN_cuMemGetInfo_v3020>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act || !c.rt->converting() || free == nullptr || total == nullptr) return c.real(free, total);
  HookScope scope;
  const CUresult r = c.real(free, total);  // also checks that there is a context
  if (r != CUDA_SUCCESS) return r;
  Safely(*c.rt, "cuMemGetInfo", [&] {
    MutexLock lock(&c.rt->mu());
    c.rt->LearnDeviceMemory();
    const JobBudget& b = c.rt->job().budget();
    const uint64_t budget = b.Total();
    const uint64_t used = c.rt->job().manager().managed_bytes() + b.pinned;
    *total = budget;
    *free = used >= budget ? 0 : budget - used;
  });
  return r;
}

}  // namespace msched::hook

// Driver API: allocation of every kind but VMM (driver_vmm.cc), memory
// information, pointer attributes. Device memory is host memory reserved
// lazily (MAP_NORESERVE), so large footprints cost only what is touched; the
// HBM it would occupy is accounted on the shared device.
#include <sys/mman.h>

#include <atomic>
#include <cstring>

#include "access_log.h"
#include "api.h"

using msim::AccessLog;
using msim::Allocation;
using msim::AllocType;
using msim::Call;
using msim::DeviceLock;
using msim::kChunk;
using msim::kUnit;
using msim::NeedCtx;
using msim::Process;

namespace {

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

namespace msim {

uint64_t MapAligned(uint64_t size, uint64_t* map_size, uint64_t align) {
  static std::atomic<uint64_t> next{0};  // where the last mapping ended; a race only loses packing
  const uint64_t len = RoundUp(size, kChunk);
  if (const uint64_t hint = RoundUp(next.load(std::memory_order_relaxed), align); hint != 0) {
    void* m = mmap(reinterpret_cast<void*>(hint), len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != MAP_FAILED && reinterpret_cast<uint64_t>(m) == hint) {
      next.store(hint + len, std::memory_order_relaxed);
      *map_size = len;
      return hint;
    }
    if (m != MAP_FAILED) munmap(m, len);  // a kernel without MAP_FIXED_NOREPLACE placed it elsewhere
  }
  void* m = mmap(nullptr, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return 0;
  const auto raw = reinterpret_cast<uint64_t>(m);
  const uint64_t base = RoundUp(raw, align);
  if (base > raw) munmap(m, base - raw);
  if (raw + align > base) munmap(reinterpret_cast<void*>(base + len), raw + align - base);
  *map_size = len;
  next.store(base + len, std::memory_order_relaxed);
  return base;
}

bool ReserveHbm(Process& p, uint64_t bytes) {
  DeviceLock dl(p.dev);
  // An allocation returns once its memory is free: it waits, in virtual
  // time, for the evictions it causes.
  if (!p.dev->ReserveDevice(bytes)) {
    std::optional<uint64_t> room = MakeRoomForDevice(*p.dev, bytes, p.now(), &p.counters);
    if (room) p.AdvanceTo(*room);
    if (!room || !p.dev->ReserveDevice(bytes)) {
      if (p.dev->ReclaimDeadProcesses() == 0 || !p.dev->ReserveDevice(bytes)) return false;
    }
  }
  p.PublishClock();
  return true;
}

}  // namespace msim

namespace {

// Records a non-managed allocation holding HBM. Evicts managed memory if
// needed; fails with OUT_OF_MEMORY when it cannot fit.
CUresult AllocDevice(Process& p, uint64_t size, AllocType type, CUdeviceptr* out) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t hbm = RoundUp(size, kUnit);
  if (!msim::ReserveHbm(p, hbm)) return CUDA_ERROR_OUT_OF_MEMORY;
  Allocation a;
  a.base = msim::MapAligned(size, &a.map_size);
  if (a.base == 0) {
    DeviceLock dl(p.dev);
    p.dev->ReleaseDevice(hbm);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a.size = size;
  a.type = type;
  a.hbm_bytes = hbm;
  p.allocs[a.base] = a;
  *out = a.base;
  return CUDA_SUCCESS;
}

CUresult AllocManaged(Process& p, uint64_t size, CUdeviceptr* out) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  Allocation a;
  a.base = msim::MapAligned(size, &a.map_size);
  if (a.base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  a.size = size;
  a.type = AllocType::kManaged;
  const uint64_t blocks = RoundUp(size, kChunk) / kChunk;
  {
    DeviceLock dl(p.dev);
    for (uint64_t b = 0; b < blocks; ++b) {
      const uint64_t in_block = std::min(kChunk, size - b * kChunk);
      const uint64_t units = RoundUp(in_block, kUnit) / kUnit;
      const uint32_t mask = units >= 32 ? ~0u : (1u << units) - 1;
      const uint32_t idx = p.dev->AllocChunk(a.base + b * kChunk, mask);
      if (idx == msim::kNone) {
        for (uint32_t i : a.chunks) p.dev->FreeChunk(i);
        munmap(reinterpret_cast<void*>(a.base), a.map_size);
        return CUDA_ERROR_OUT_OF_MEMORY;  // the shared chunk table is full (MSIM_MAX_CHUNKS)
      }
      a.chunks.push_back(idx);
    }
  }
  p.allocs[a.base] = a;
  *out = a.base;
  return CUDA_SUCCESS;
}

CUresult FreeAlloc(Process& p, CUdeviceptr dptr, bool host) {
  auto it = p.allocs.find(dptr);
  if (it == p.allocs.end() || (it->second.type == AllocType::kHost) != host ||
      it->second.type == AllocType::kVmmMapped) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Allocation& a = it->second;
  if (AccessLog* log = AccessLog::Get(); log != nullptr && a.type == AllocType::kManaged) {
    log->Free(a.base, a.base + a.size);
  }
  {
    DeviceLock dl(p.dev);
    for (uint32_t i : a.chunks) p.dev->FreeChunk(i);
    if (a.hbm_bytes) p.dev->ReleaseDevice(a.hbm_bytes);
  }
  if (a.map_size) munmap(reinterpret_cast<void*>(a.base), a.map_size);
  p.allocs.erase(it);
  return CUDA_SUCCESS;
}

// A stream-ordered allocation is made at once: with eager execution the
// stream order is already the issue order. `pool` is null for the current
// pool (the device's default), else the default or one cuMemPoolCreate made.
CUresult AllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream, bool ptsz, CUmemoryPool pool = nullptr,
                    const char* entry = __builtin_FUNCTION()) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        msim::Stream* s = p.ResolveStream(stream, ptsz, &err);
        if (s == nullptr) return err;
        if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        if (pool != nullptr && !msim::KnownPool(p, pool)) return CUDA_ERROR_INVALID_VALUE;
        const auto made = p.pools.find(pool);
        const CUresult r = AllocDevice(p, bytesize, AllocType::kAsync, dptr);
        if (r == CUDA_SUCCESS && made != p.pools.end()) {
          p.allocs[*dptr].exportable = made->second != CU_MEM_HANDLE_TYPE_NONE;
        }
        return r;
      },
      entry);
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        if (p.ResolveStream(stream, ptsz, &err) == nullptr) return err;
        return FreeAlloc(p, dptr, false);
      },
      entry);
}

}  // namespace

MSIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) { return AllocDevice(p, bytesize, AllocType::kDevice, dptr); });
}

MSIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                        unsigned int element_size) {
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    const uint64_t row = RoundUp(width, 512);
    if (row > (uint64_t{1} << 40) / height) return CUDA_ERROR_INVALID_VALUE;
    const CUresult r = AllocDevice(p, row * height, AllocType::kPitch, dptr);
    if (r == CUDA_SUCCESS) *pitch = row;
    return r;
  });
}

MSIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (dptr == nullptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) { return AllocManaged(p, bytesize, dptr); });
}

MSIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  return Call(NeedCtx::kYes, [&](Process& p) { return FreeAlloc(p, dptr, false); });
}

MSIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* d, size_t n, CUstream s) { return AllocAsync(d, n, s, false); }
MSIM_DECLARE(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* d, size_t n, CUstream s) { return AllocAsync(d, n, s, true); }

MSIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* d, size_t n, CUmemoryPool pool, CUstream s) {
  return pool == nullptr ? CUDA_ERROR_INVALID_VALUE : AllocAsync(d, n, s, false, pool);
}
MSIM_DECLARE(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* d, size_t n, CUmemoryPool pool, CUstream s) {
  return pool == nullptr ? CUDA_ERROR_INVALID_VALUE : AllocAsync(d, n, s, true, pool);
}

MSIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) { return FreeAsync(d, s, false); }
MSIM_DECLARE(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { return FreeAsync(d, s, true); }

MSIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *pool = msim::DefaultPool();
  return CUDA_SUCCESS;
}
MSIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetDefaultMemPool(pool, dev);
}

// A pool keeps nothing beyond its live allocations (each is made and freed
// at once), so there is never anything to trim.
MSIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t) {
  return Call(NeedCtx::kNo,
              [&](Process& p) { return msim::KnownPool(p, pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; });
}

MSIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    Allocation a;
    a.base = msim::MapAligned(bytesize, &a.map_size);
    if (a.base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    a.size = bytesize;
    a.type = AllocType::kHost;
    p.allocs[a.base] = a;
    *pp = reinterpret_cast<void*>(a.base);
    return CUDA_SUCCESS;
  });
}
MSIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int) {
  return cuMemAllocHost_v2(pp, bytesize);
}

MSIM_EXPORT CUresult cuMemFreeHost(void* ptr) {
  return Call(NeedCtx::kNo, [&](Process& p) { return FreeAlloc(p, reinterpret_cast<CUdeviceptr>(ptr), true); });
}

MSIM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* ptr, unsigned int flags) {
  if (pdptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    Allocation* a = p.FindAlloc(reinterpret_cast<uint64_t>(ptr));
    if (a == nullptr || a->type != AllocType::kHost) return CUDA_ERROR_INVALID_VALUE;
    *pdptr = reinterpret_cast<CUdeviceptr>(ptr);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    DeviceLock dl(p.dev);
    // Memory whose eviction is under way counts as free: an allocation
    // waits for it rather than fail.
    p.dev->ApplyReleases(p.now());
    *total = p.dev->capacity();
    *free = p.dev->Free() + p.dev->pending_release_bytes();
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return Call(NeedCtx::kYes, [&](Process& p) {
    Allocation* a = p.FindAlloc(dptr);
    if (a == nullptr) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = a->base;
    if (psize) *psize = a->size;
    return CUDA_SUCCESS;
  });
}

namespace {

CUresult PointerAttribute(Process& p, void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  Allocation* a = p.FindAlloc(ptr);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool managed = a->type == AllocType::kManaged;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(&p.primary);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = a->type == AllocType::kHost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!managed && a->type != AllocType::kHost) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data) = managed; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = a->base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = a->size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<int*>(data) = 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = a->base; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

MSIM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) { return PointerAttribute(p, data, attribute, ptr); });
}

MSIM_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attributes, void** data,
                                            CUdeviceptr ptr) {
  if (attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    for (unsigned int i = 0; i < n; ++i) {
      if (data[i] == nullptr) continue;
      const CUresult r = PointerAttribute(p, data[i], attributes[i], ptr);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_SUPPORTED) return r;
    }
    return CUDA_SUCCESS;
  });
}

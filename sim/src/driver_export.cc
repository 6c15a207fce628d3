// Driver API: memory a program makes to share with another process, as far
// as the simulator models it. Pools made by cuMemPoolCreate serve
// stream-ordered allocations as the default pool does (driver_memory.cc);
// one created with an export handle type marks its allocations exportable,
// and cuMemPoolExportPointer exports those only. cuIpcGetMemHandle gives a
// handle for plain device memory and refuses managed memory, as the driver
// does (unified memory cannot be shared through legacy IPC). Importing in
// another process is not modelled: those calls keep the stubs' answer.
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "api.h"

using msim::Allocation;
using msim::AllocType;
using msim::Call;
using msim::NeedCtx;
using msim::Process;

MSIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (pool == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (props->location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE && props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return Call(NeedCtx::kNo, [&](Process& p) {
    // Handles are never dereferenced: distinct values above the default pool's.
    static std::atomic<uintptr_t> next{reinterpret_cast<uintptr_t>(msim::DefaultPool()) + 1};
    *pool = reinterpret_cast<CUmemoryPool>(next.fetch_add(1));
    p.pools[*pool] = props->handleTypes;
    return CUDA_SUCCESS;
  });
}

// Allocations still live keep their memory until freed, as on the driver.
MSIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  return Call(NeedCtx::kNo,
              [&](Process& p) { return p.pools.erase(pool) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; });
}

MSIM_EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* out, CUdeviceptr ptr) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    const auto it = p.allocs.find(ptr);
    if (it == p.allocs.end() || !it->second.exportable) return CUDA_ERROR_INVALID_VALUE;
    std::memset(out, 0, sizeof *out);
    std::memcpy(out->reserved, &ptr, sizeof ptr);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    const Allocation* a = p.FindAlloc(dptr);
    if (a == nullptr || (a->type != AllocType::kDevice && a->type != AllocType::kPitch)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::memset(handle, 0, sizeof *handle);
    const uint64_t who[2] = {static_cast<uint64_t>(getpid()), a->base};
    std::memcpy(handle->reserved, who, sizeof who);
    return CUDA_SUCCESS;
  });
}

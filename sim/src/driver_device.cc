// Driver API: initialisation, version, device queries, contexts.
#include <cstdio>
#include <cstring>
#include <string>

#include "api.h"

using msim::Call;
using msim::Context;
using msim::CurrentContext;
using msim::NeedCtx;
using msim::Process;

namespace msim {

bool ValidContext(Process& p) {
  CUcontext c = CurrentContext();
  if (c == nullptr) return false;
  auto* ctx = reinterpret_cast<Context*>(c);
  return ctx == &p.primary ? p.primary_refs > 0 || p.primary.primary : p.contexts.count(ctx) != 0;
}

}  // namespace msim

namespace {

// A device this process sees (its CUDA ordinal).
CUresult CheckDevice(const Process& p, CUdevice dev) {
  return dev >= 0 && static_cast<size_t>(dev) < p.visible.size() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// A device a context may be made on: ordinal 0, the one GPU the simulator
// models for this process (Process::visible).
CUresult CheckContextDevice(const Process& p, CUdevice dev) {
  if (CUresult r = CheckDevice(p, dev)) return r;
  if (dev == 0) return CUDA_SUCCESS;
  msim::ReportError("a context on CUDA device " + std::to_string(dev) + " (GPU " + std::to_string(p.visible[dev]) +
                    "): the simulator models one GPU per process, the first of CUDA_VISIBLE_DEVICES");
  return CUDA_ERROR_NOT_SUPPORTED;
}

// The current context stack (push/pop) beneath the current context.
std::vector<CUcontext>& ContextStack() {
  static thread_local std::vector<CUcontext> stack;
  return stack;
}

// The PCI bus of a device: its machine index plus one, so that every GPU
// of a node has its own bus id, as a real node's do.
int PciBus(const Process& p, CUdevice dev) { return p.visible[dev] + 1; }

}  // namespace

MSIM_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return Process::Init();
}

MSIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    *count = static_cast<int>(p.visible.size());
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, ordinal)) return r;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    std::strncpy(name, p.dev->profile().device_name, static_cast<size_t>(len) - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    *bytes = p.dev->capacity();
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    *major = p.dev->profile().cc_major;
    *minor = p.dev->profile().cc_minor;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    const msim::DeviceProfile& prof = p.dev->profile();
    switch (attrib) {
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
      case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = prof.sm_count; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = prof.cc_major; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = prof.cc_minor; break;
      case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *value = 1; break;
      case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *value = 0; break;
      case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 2; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
      case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = PciBus(p, dev); break;
      case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
      default: return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    std::memset(uuid->bytes, 0, sizeof uuid->bytes);
    std::memcpy(uuid->bytes, p.dev->profile().name, std::min(sizeof uuid->bytes, std::strlen(p.dev->profile().name)));
    uuid->bytes[sizeof uuid->bytes - 1] = static_cast<char>(p.visible[dev]);  // GPUs of one node differ
    return CUDA_SUCCESS;
  });
}
MSIM_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

MSIM_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (pciBusId == nullptr || len < 13) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", PciBus(p, dev));
    return CUDA_SUCCESS;
  });
}

// ---- Contexts -------------------------------------------------------------

MSIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckContextDevice(p, dev)) return r;
    p.primary.primary = true;
    ++p.primary_refs;
    *pctx = reinterpret_cast<CUcontext>(&p.primary);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    if (p.primary_refs > 0) --p.primary_refs;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    *flags = p.primary.flags;
    *active = p.primary_refs > 0;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckDevice(p, dev)) return r;
    p.primary.flags = flags;
    return CUDA_SUCCESS;
  });
}

MSIM_DECLARE(cuCtxCreate_v2, PFN_cuCtxCreate_v3020);
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (CUresult r = CheckContextDevice(p, dev)) return r;
    auto* ctx = new Context();
    ctx->flags = flags;
    p.contexts.insert(ctx);
    if (CurrentContext()) ContextStack().push_back(CurrentContext());
    CurrentContext() = reinterpret_cast<CUcontext>(ctx);
    *pctx = CurrentContext();
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  if (params != nullptr && (params->execAffinityParams || params->cigParams)) return CUDA_ERROR_NOT_SUPPORTED;
  return cuCtxCreate_v2(pctx, flags, dev);
}

MSIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* c = reinterpret_cast<Context*>(ctx);
    if (!p.contexts.erase(c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (CurrentContext() == ctx) CurrentContext() = nullptr;
    delete c;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* c = reinterpret_cast<Context*>(ctx);
    if (ctx != nullptr && c != &p.primary && !p.contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;
    CurrentContext() = ctx;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (Process::Current() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  *pctx = CurrentContext();
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUcontext prev = CurrentContext();
  const CUresult r = cuCtxSetCurrent(ctx);
  if (r == CUDA_SUCCESS && prev) ContextStack().push_back(prev);
  return r;
}

MSIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (Process::Current() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (CurrentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = CurrentContext();
  CurrentContext() = ContextStack().empty() ? nullptr : ContextStack().back();
  if (!ContextStack().empty()) ContextStack().pop_back();
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process&) {
    *device = 0;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* c = reinterpret_cast<Context*>(ctx ? ctx : CurrentContext());
    if (c == nullptr || (c != &p.primary && !p.contexts.count(c))) return CUDA_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxGetApiVersion(CUcontext, unsigned int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 3020;
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult cuCtxGetFlags(unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process&) {
    *flags = reinterpret_cast<Context*>(CurrentContext())->flags;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return Process::Current() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

// cuCtxSynchronize (both ABIs) lives with the streams in driver_stream.cc.

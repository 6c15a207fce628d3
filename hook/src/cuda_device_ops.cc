#include "cuda_device_ops.h"

#include <map>
#include <mutex>
#include <string>

#include "entry_table.h"
#include "real_driver.h"

namespace msched::hook {
namespace {

template <typename Fn>
Fn Sym(const char* name) {
  return reinterpret_cast<Fn>(RealSymbol(name));
}

Status Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  return Status::Unavailable(std::string(what) + " failed with CUresult " + std::to_string(r));
}

}  // namespace

struct CudaDeviceOps::PerContext {
  CUstream transfer = nullptr;
  CUevent queued = nullptr;  // recorded on a launch stream, waited on by `transfer`
  CUevent ready = nullptr;   // recorded on `transfer`, waited on by a launch stream
  CUdevice device = 0;
};

Result<CudaDeviceOps> CudaDeviceOps::ForCurrentContext() {
  static auto ctx_get_current = Sym<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  static auto ctx_get_device = Sym<CUresult (*)(CUdevice*)>("cuCtxGetDevice");
  static auto stream_create = Sym<CUresult (*)(CUstream*, unsigned)>("cuStreamCreate");
  static auto event_create = Sym<CUresult (*)(CUevent*, unsigned)>("cuEventCreate");
  static std::map<CUcontext, PerContext>* contexts = new std::map<CUcontext, PerContext>;
  if (!ctx_get_current || !ctx_get_device || !stream_create || !event_create) {
    return Status::Unavailable("the driver lacks cuCtxGetCurrent/cuStreamCreate/cuEventCreate");
  }
  CUcontext ctx = nullptr;
  if (ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return Status::Unavailable("no current context");
  auto it = contexts->find(ctx);
  if (it == contexts->end()) {
    PerContext pc;
    MSCHED_RETURN_IF_ERROR(Check(ctx_get_device(&pc.device), "cuCtxGetDevice"));
    MSCHED_RETURN_IF_ERROR(Check(stream_create(&pc.transfer, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    MSCHED_RETURN_IF_ERROR(Check(event_create(&pc.queued, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    MSCHED_RETURN_IF_ERROR(Check(event_create(&pc.ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    it = contexts->emplace(ctx, pc).first;
  }
  return CudaDeviceOps(&it->second);
}

Status CudaDeviceOps::Prefetch(const ByteRange& r, bool to_device) {
  using Fn = CUresult (*)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
  static auto prefetch = Sym<Fn>("cuMemPrefetchAsync_v2");
  if (!prefetch) return Status::Unavailable("the driver lacks cuMemPrefetchAsync_v2");
  CUmemLocation loc{};
  loc.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  loc.id = to_device ? c_->device : 0;
  return Check(prefetch(r.begin, r.size(), loc, 0, c_->transfer), "cuMemPrefetchAsync");
}

Status CudaDeviceOps::TransfersAfter(StreamHandle stream) {
  static auto record = Sym<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  static auto wait = Sym<CUresult (*)(CUstream, CUevent, unsigned)>("cuStreamWaitEvent");
  if (!record || !wait) return Status::Unavailable("the driver lacks cuEventRecord/cuStreamWaitEvent");
  MSCHED_RETURN_IF_ERROR(Check(record(c_->queued, reinterpret_cast<CUstream>(stream)), "cuEventRecord"));
  return Check(wait(c_->transfer, c_->queued, 0), "cuStreamWaitEvent");
}

Status CudaDeviceOps::StreamAfterTransfers(StreamHandle stream) {
  static auto record = Sym<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  static auto wait = Sym<CUresult (*)(CUstream, CUevent, unsigned)>("cuStreamWaitEvent");
  if (!record || !wait) return Status::Unavailable("the driver lacks cuEventRecord/cuStreamWaitEvent");
  MSCHED_RETURN_IF_ERROR(Check(record(c_->ready, c_->transfer), "cuEventRecord"));
  return Check(wait(reinterpret_cast<CUstream>(stream), c_->ready, 0), "cuStreamWaitEvent");
}

Status CudaDeviceOps::SynchronizeTransfers() {
  auto sync = Real<CUresult (*)(CUstream)>(Entry::cuStreamSynchronize);
  if (!sync) return Status::Unavailable("the driver lacks cuStreamSynchronize");
  return Check(sync(c_->transfer), "cuStreamSynchronize");
}

}  // namespace msched::hook

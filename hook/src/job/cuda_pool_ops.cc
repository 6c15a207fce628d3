#include "job/cuda_pool_ops.h"

#include <string>

#include "interpose/driver_functions.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

CUevent EventOf(FenceId fence) { return reinterpret_cast<CUevent>(fence); }
CUstream StreamOf(StreamHandle stream) { return reinterpret_cast<CUstream>(stream); }

}  // namespace

Result<uint64_t> CudaPoolOps::AllocateChunk(uint64_t bytes) {
  auto managed = Real<PFN_cuMemAllocManaged_v6000>(Entry::cuMemAllocManaged);
  CUdeviceptr base = 0;
  const CUresult r = managed != nullptr ? managed(&base, bytes, CU_MEM_ATTACH_GLOBAL) : CUDA_ERROR_NOT_SUPPORTED;
  if (r != CUDA_SUCCESS) {
    chunk_error_ = r;
    return CheckDriverCall(r, ("cuMemAllocManaged of a " + std::to_string(bytes) + "-byte pool chunk").c_str());
  }
  {
    MutexLock lock(&rt_.mu());
    (void)rt_.job().RecordPoolChunk(base, bytes);  // refused only over stale entries: then its blocks go unseen
  }
  rt_.counters().pool_chunks->Add();
  rt_.counters().pool_chunk_bytes->Add(bytes);
  return static_cast<uint64_t>(base);
}

Status CudaPoolOps::ReleaseChunk(uint64_t base, uint64_t bytes) {
  auto free = Real<PFN_cuMemFree_v3020>(Entry::cuMemFree_v2);
  MSCHED_RETURN_IF_ERROR(
      CheckDriverCall(free != nullptr ? free(base) : CUDA_ERROR_NOT_SUPPORTED, "cuMemFree of a pool chunk"));
  {
    MutexLock lock(&rt_.mu());
    (void)rt_.job().ForgetPoolChunk(base);
  }
  rt_.counters().pool_chunks_released->Add();
  LogDebug("gave back the pool chunk of {} bytes at {:#x}", bytes, base);
  return Status::Ok();
}

Result<FenceId> CudaPoolOps::RecordFence(StreamHandle stream) {
  const DriverFunctions& real = RealDriver();
  CUcontext ctx = nullptr;
  if (real.cuCtxGetCurrent && real.cuEventCreate && real.cuEventRecord && real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS &&
      ctx != nullptr) {
    rt_.pool_mu().AssertHeld();  // this object's contract (cuda_pool_ops.h)
    Runtime::FenceEvents& events = rt_.fence_events();
    std::vector<CUevent>& spare = events.spare[ctx];
    CUevent ev = nullptr;
    if (!spare.empty()) {
      ev = spare.back();
      spare.pop_back();
    } else if (real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
      events.context_of[ev] = ctx;
    }
    if (ev != nullptr) {
      if (real.cuEventRecord(ev, StreamOf(stream)) == CUDA_SUCCESS) {
        events.recorded_on[ev] = StreamOf(stream);
        return reinterpret_cast<FenceId>(ev);
      }
      spare.push_back(ev);
    }
  }
  // Without an event, the free waits for its stream here: then the block
  // needs no fence at all.
  if (!real.cuStreamSynchronize) return Status::Unavailable("the driver lacks cuEventRecord and cuStreamSynchronize");
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuStreamSynchronize(StreamOf(stream)), "cuStreamSynchronize"));
  return kNoFence;
}

bool CudaPoolOps::FenceDone(FenceId fence) {
  auto query = RealDriver().cuEventQuery;
  return query != nullptr && query(EventOf(fence)) == CUDA_SUCCESS;
}

Status CudaPoolOps::StreamWaitFence(StreamHandle stream, FenceId fence) {
  if (RecordedOn(fence, StreamOf(stream))) return Status::Ok();
  auto wait = RealDriver().cuStreamWaitEvent;
  if (!wait) return Status::Unavailable("the driver lacks cuStreamWaitEvent");
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(wait(StreamOf(stream), EventOf(fence), 0), "cuStreamWaitEvent"));
  rt_.counters().pool_stream_waits->Add();
  return Status::Ok();
}

Status CudaPoolOps::WaitFence(FenceId fence) {
  auto sync = RealDriver().cuEventSynchronize;
  if (!sync) return Status::Unavailable("the driver lacks cuEventSynchronize");
  return CheckDriverCall(sync(EventOf(fence)), "cuEventSynchronize");
}

void CudaPoolOps::DropFence(FenceId fence) {
  // A wait already queued on the event keeps the record it was made for:
  // recording the event again cannot change what that wait waits for.
  rt_.pool_mu().AssertHeld();  // this object's contract (cuda_pool_ops.h)
  Runtime::FenceEvents& events = rt_.fence_events();
  const CUevent ev = EventOf(fence);
  events.spare[events.context_of.at(ev)].push_back(ev);
}

bool CudaPoolOps::RecordedOn(FenceId fence, CUstream stream) {
  // A handle names one stream within a context (handle 0, the legacy
  // default stream, names one per context), except the per-thread default
  // stream's, which names another in each thread. A destroyed stream's
  // handle cannot name a new one before the old one's queued work is done:
  // the driver releases it only then (cuStreamDestroy).
  if (stream == CU_STREAM_PER_THREAD) return false;
  rt_.pool_mu().AssertHeld();  // this object's contract (cuda_pool_ops.h)
  const Runtime::FenceEvents& events = rt_.fence_events();
  const CUevent ev = EventOf(fence);
  if (events.recorded_on.at(ev) != stream) return false;
  auto current = RealDriver().cuCtxGetCurrent;
  CUcontext ctx = nullptr;
  return current != nullptr && current(&ctx) == CUDA_SUCCESS && ctx == events.context_of.at(ev);
}

CUresult CudaPoolOps::ErrorFor(const Status& s) const {
  if (chunk_error_ != CUDA_SUCCESS) return chunk_error_;
  return s.code() == StatusCode::kInvalidArgument ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
}

}  // namespace msched::hook

#include "job/cuda_device_ops.h"

#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "interpose/driver_functions.h"
#include "job/device_env.h"
#include "msched/no_destructor.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

// Makes `waiter` wait for the work queued so far on `signaller`, through `ev`.
Status WaitFor(CUstream waiter, CUstream signaller, CUevent ev) {
  const DriverFunctions& real = RealDriver();
  if (!real.cuEventRecord || !real.cuStreamWaitEvent) {
    return Status::Unavailable("the driver lacks cuEventRecord/cuStreamWaitEvent");
  }
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventRecord(ev, signaller), "cuEventRecord"));
  return CheckDriverCall(real.cuStreamWaitEvent(waiter, ev, 0), "cuStreamWaitEvent");
}

// The job's memory, its budget and its coordinator are those of one GPU, the
// first it prefetches for. Work on another still runs correctly (its data
// migrates where it is used) but is counted against that one GPU's budget:
// said once, since a job that spreads over GPUs may want one per process.
void WarnOfSecondDevice(CUdevice device) {
  static const CUdevice first = device;
  if (device == first) return;
  LogOnce("second-device", spdlog::level::warn,
          "this process uses CUDA devices " + std::to_string(first) + " and " + std::to_string(device) +
              ": msched budgets and schedules its memory as one GPU's (the first's, with that GPU's coordinator); "
              "run one process per GPU to have each GPU's share (docs/operate.md, \"Several GPUs\")");
}

}  // namespace

struct CudaDeviceOps::PerContext {
  CUstream transfer = nullptr;  // loads
  CUstream evict = nullptr;     // evictions
  CUevent queued = nullptr;     // recorded on a launch stream, waited on by `evict`
  CUevent ready = nullptr;      // recorded on `transfer`, waited on by a launch stream
  CUevent evicted = nullptr;    // recorded on `evict`, waited on by `transfer`
  CUdevice device = 0;
  // The last points marked in launch streams' queues, oldest overwritten
  // first: `next` is the first operation not queued before the event. An
  // eviction waits at the earliest one after its victims' last use, so the
  // link need not wait for the kernels queued after that use. A slot
  // recorded again loses its old point: cuStreamWaitEvent has taken the
  // state it needed at its call. Under memory pressure every operation is
  // marked (JobMemory::UnderPressure): 1024 marks reach back about as far
  // as a launch queue holds operations, and an eviction whose victim's use
  // is older than every mark waits for all the work queued.
  struct Mark {
    CUevent event = nullptr;  // made at the slot's first use
    bool valid = false;       // recorded at the point below
    CUstream stream = nullptr;
    uint64_t next = 0;
  };
  std::array<Mark, 1024> marks{};
  size_t newest = 0;  // the slot marked last
};

Result<CudaDeviceOps> CudaDeviceOps::ForCurrentContext() {
  const DriverFunctions& real = RealDriver();
  static NoDestructor<std::map<CUcontext, PerContext>> contexts;
  if (!real.cuCtxGetCurrent || !real.cuCtxGetDevice || !real.cuStreamCreate || !real.cuEventCreate) {
    return Status::Unavailable("the driver lacks cuCtxGetCurrent/cuStreamCreate/cuEventCreate");
  }
  CUcontext ctx = nullptr;
  if (real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return Status::Unavailable("no current context");
  auto it = contexts->find(ctx);
  if (it == contexts->end()) {
    PerContext pc;
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuCtxGetDevice(&pc.device), "cuCtxGetDevice"));
    WarnOfSecondDevice(pc.device);
    MSCHED_RETURN_IF_ERROR(
        CheckDriverCall(real.cuStreamCreate(&pc.transfer, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuStreamCreate(&pc.evict, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventCreate(&pc.queued, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventCreate(&pc.ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventCreate(&pc.evicted, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    it = contexts->emplace(ctx, pc).first;
  }
  return CudaDeviceOps(&it->second);
}

Status CudaDeviceOps::Prefetch(const ByteRange& r, bool to_device) {
  auto prefetch = RealDriver().cuMemPrefetchAsync_v2;
  if (!prefetch) return Status::Unavailable("the driver lacks cuMemPrefetchAsync_v2");
  CUmemLocation loc{};
  loc.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  loc.id = to_device ? c_->device : 0;
  const CUresult res = prefetch(r.begin, r.size(), loc, 0, to_device ? c_->transfer : c_->evict);
  if (res == CUDA_SUCCESS) return Status::Ok();
  // The range goes into the message: a failed prefetch is otherwise hard to
  // trace back to the template or copy that predicted it.
  char what[128];
  std::snprintf(what, sizeof what, "cuMemPrefetchAsync of [%#llx, %#llx) to the %s",
                static_cast<unsigned long long>(r.begin), static_cast<unsigned long long>(r.end),
                to_device ? "device" : "host");
  return CheckDriverCall(res, what);
}

Status CudaDeviceOps::MarkQueued(StreamHandle stream, uint64_t next) {
  const CUstream s = reinterpret_cast<CUstream>(stream);
  const PerContext::Mark& last = c_->marks[c_->newest];
  if (last.valid && last.stream == s && last.next >= next) return Status::Ok();  // marked already
  const DriverFunctions& real = RealDriver();
  if (!real.cuEventRecord) return Status::Unavailable("the driver lacks cuEventRecord");
  const size_t slot = (c_->newest + 1) % c_->marks.size();
  PerContext::Mark& m = c_->marks[slot];
  if (m.event == nullptr) {
    MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventCreate(&m.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  }
  m.valid = false;  // its old point may be overwritten even if recording fails
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(real.cuEventRecord(m.event, s), "cuEventRecord"));
  m = {m.event, true, s, next};
  c_->newest = slot;
  return Status::Ok();
}

Status CudaDeviceOps::EvictionsAfter(StreamHandle stream, uint64_t op) {
  const CUstream s = reinterpret_cast<CUstream>(stream);
  const PerContext::Mark* earliest = nullptr;
  for (const PerContext::Mark& m : c_->marks) {
    if (m.valid && m.stream == s && m.next > op && (earliest == nullptr || m.next < earliest->next)) {
      earliest = &m;
    }
  }
  if (earliest == nullptr) return WaitFor(c_->evict, s, c_->queued);
  const DriverFunctions& real = RealDriver();
  if (!real.cuStreamWaitEvent) return Status::Unavailable("the driver lacks cuStreamWaitEvent");
  return CheckDriverCall(real.cuStreamWaitEvent(c_->evict, earliest->event, 0), "cuStreamWaitEvent");
}

Status CudaDeviceOps::LoadsAfterEvictions() { return WaitFor(c_->transfer, c_->evict, c_->evicted); }

Status CudaDeviceOps::StreamAfterTransfers(StreamHandle stream) {
  return WaitFor(reinterpret_cast<CUstream>(stream), c_->transfer, c_->ready);
}

Status CudaDeviceOps::SetReadMostly(const ByteRange& r, bool on) {
  auto advise = RealDriver().cuMemAdvise_v2;
  if (!advise) return Status::Unavailable("the driver lacks cuMemAdvise_v2");
  CUmemLocation loc{};  // ignored for read-mostly advice
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = c_->device;
  return CheckDriverCall(
      advise(r.begin, r.size(), on ? CU_MEM_ADVISE_SET_READ_MOSTLY : CU_MEM_ADVISE_UNSET_READ_MOSTLY, loc),
      "cuMemAdvise");
}

uint64_t CudaDeviceOps::NowNs() { return DeviceEnv::Get().Now(); }

Status CudaDeviceOps::SynchronizeTransfers() {
  auto sync = RealDriver().cuStreamSynchronize;
  if (!sync) return Status::Unavailable("the driver lacks cuStreamSynchronize");
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(sync(c_->evict), "cuStreamSynchronize"));
  return CheckDriverCall(sync(c_->transfer), "cuStreamSynchronize");
}

}  // namespace msched::hook

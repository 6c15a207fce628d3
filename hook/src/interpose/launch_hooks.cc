// The launch family: cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel
// (each with its _ptsz variant); graphs are in graph_hooks.cc. Before the launch is
// queued, the kernel is identified (name and parameter layout, cached per
// handle), its arguments decoded in whichever form they came (kernelParams
// or the packed `extra` buffer), its working set predicted from its template
// (or, for a kernel without one, from each pointer argument to the end of
// its allocation, or as whole allocations: MSCHED_UNKNOWN; alloc mode always
// takes whole allocations), and made resident. Nothing is injected while a
// stream is capturing.
// In profile mode the launch runs under the profile recorder instead. With a
// coordinator, every launch first passes the job's gate (coord_client.h).
#include <chrono>
#include <cstdint>

#include "client/coord_client.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "interpose/launch_prediction.h"
#include "job/residency.h"
#include "model/predictor.h"
#include "observe/job_trace.h"
#include "observe/profile_recorder.h"

namespace msched::hook {
namespace {

// src/ decodes the `extra` form with its own copies of cuda.h's tokens.
static_assert(kLaunchParamEnd == CU_LAUNCH_PARAM_END_AS_INT);
static_assert(kLaunchParamBufferPointer == CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT);
static_assert(kLaunchParamBufferSize == CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT);

// One launch as the hooks see it, whatever entry point it came through.
struct LaunchSite {
  CUfunction f;
  LaunchDims dims;
  CUstream stream;  // the effective stream
  void** params;
  void** extra;
};

}  // namespace

// The cache never drops or moves an entry, so each thread keeps the handles
// it launched last (direct-mapped) and finds them again without the
// Runtime's lock.
const KernelInfo* KernelOf(Runtime& rt, CUfunction f) {
  struct Recent {
    CUfunction f = nullptr;
    const KernelInfo* k = nullptr;
  };
  static thread_local Recent recent[16];
  Recent& r = recent[(reinterpret_cast<uintptr_t>(f) >> 4) & 15];
  if (r.f == f && r.k != nullptr) return r.k;
  const KernelInfo* k = nullptr;
  {
    MutexLock lock(&rt.mu());
    k = rt.FindKernel(f);
  }
  if (k == nullptr) {
    KernelInfo info = ResolveKernel(f, rt.templates());  // asks the driver: outside the lock
    if (info.tmpl == nullptr && rt.predicting()) {
      LogOnce("unpredicted:" + info.name, spdlog::level::info,
              "kernel '" + info.name + "' is not predicted (" + info.why_unpredicted + ")");
    }
    MutexLock lock(&rt.mu());
    k = rt.RememberKernel(f, std::move(info));
  }
  r = {f, k};
  return k;
}

LaunchDims Dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared) {
  LaunchDims d;
  d.grid[0] = gx, d.grid[1] = gy, d.grid[2] = gz;
  d.block[0] = bx, d.block[1] = by, d.block[2] = bz;
  d.shared_mem = shared;
  return d;
}

ArgView LaunchArguments(const KernelInfo& k, void** params, void** extra) {
  if (!k.layout_known) return {};
  if (params != nullptr) return ArgView::FromKernelParams(k.layout, params);
  if (extra != nullptr) {
    if (Result<ArgView> r = ArgView::FromExtra(k.layout, extra); r.ok()) return *r;
  }
  return {};
}

namespace {

ArgView Arguments(const KernelInfo& k, const LaunchSite& s) { return LaunchArguments(k, s.params, s.extra); }

// The working set each launching thread predicts, reused across its
// launches so that, once grown, predicting allocates nothing. Per thread, so
// template evaluation needs no lock (destroyed at thread exit).
Prediction& ThreadPrediction() {
  static thread_local Prediction pred;
  return pred;
}

// The prediction's rules are LaunchPrediction's (model/predictor.h).
// Template evaluation reads only the template (immutable: Runtime::
// templates()) and this launch's arguments, so it runs outside the
// Runtime's lock; what reads or changes shared state (the allocation map,
// the extent memo, the memory manager) runs under it, in one hold.
void BeforeLaunch(Runtime& rt, const LaunchSite& s) {
  HookCounters& c = rt.counters();
  c.launches_total->Add();
  JobTrace* trace = JobTrace::Sampled();  // null unless the timeline samples this launch
  if (!rt.predicting()) {
    if (trace != nullptr) trace->Launch(nullptr);
    return;
  }
  static thread_local uint32_t launches = 0;
  const bool timed = (++launches & 15) == 0;  // sample the hook's own latency
  const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const KernelInfo* k = KernelOf(rt, s.f);
  if (trace != nullptr) trace->Launch(&k->name);
  if (rt.AnyCapturing()) {
    c.launches_in_capture->Add();
    return;
  }
  Prediction& pred = ThreadPrediction();
  pred.Clear();
  LaunchPrediction lp({rt.mode(), rt.unknown(), k->tmpl, Arguments(*k, s), s.dims}, &pred);
  switch (lp.source()) {
    case PredictionSource::kTemplate: c.launches_predicted->Add(); break;
    case PredictionSource::kPointers: c.launches_fallback->Add(); break;
    case PredictionSource::kWholeAllocations: c.launches_whole_allocation->Add(); break;
    case PredictionSource::kNone: c.launches_unknown->Add(); break;
  }
  {
    MutexLock lock(&rt.mu());
    lp.Judge(rt.allocs());
    if (lp.failed() > 0) c.eval_failures->Add(lp.failed());
    if (lp.leaves_data_unpredicted()) ForgoReadMostly(rt);
    // Left to faults, what its pointers reach is still the job's to account
    // for, keep within its budget and take back at a stop.
    if (rt.CompletePrediction(lp)) {
      PrepareResidency(rt, pred.regions(), s.stream,
                       lp.left_to_faults() ? JobMemory::Load::kLeaveToFaults : JobMemory::Load::kPrefetch);
    }
  }
  if (timed) {
    c.hook_latency_ns->Record(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
  }
}

// Runs the real launch `real` with msched's work around it.
template <typename Real>
CUresult Launch(Runtime& rt, const char* where, const LaunchSite& s, Real&& real) {
  HookScope scope;
  const GatePass pass = PassGate(rt);
  Safely(rt, where, [&] { BeforeLaunch(rt, s); });
  if (rt.mode() != Mode::kProfile) return real();
  ProfileRecorder* recorder = nullptr;
  const KernelInfo* k = nullptr;
  Safely(rt, where, [&] {
    recorder = ProfileRecorder::Get(rt);
    if (recorder && !rt.AnyCapturing()) k = KernelOf(rt, s.f);
  });
  if (k == nullptr) return real();
  CUresult result = CUDA_SUCCESS;
  bool launched = false;
  const std::function<CUresult()> run = [&] {
    launched = true;
    return result = real();
  };
  if (Safely(rt, where, [&] { recorder->Launch(rt, *k, Arguments(*k, s), s.dims, run); })) return result;
  return launched ? result : real();  // the recorder failed: launch exactly once all the same
}

}  // namespace

CUresult Hook_cuLaunchKernel(Entry e, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  auto c = Enter<PFN_cuLaunchKernel_v4000>(e);
  if (!c.real) return NoRealFunction(e);
  auto real = [&] { return c.real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra); };
  if (!c.act) return real();
  const LaunchSite s{f, Dims(gx, gy, gz, bx, by, bz, shared), EffectiveStream(e, stream), params, extra};
  return Launch(*c.rt, "cuLaunchKernel", s, real);
}

CUresult Hook_cuLaunchKernelEx(Entry e, const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  auto c = Enter<PFN_cuLaunchKernelEx_v11060>(e);
  if (!c.real) return NoRealFunction(e);
  auto real = [&] { return c.real(config, f, params, extra); };
  if (!c.act || config == nullptr) return real();
  const LaunchSite s{f,
                     Dims(config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                          config->blockDimZ, config->sharedMemBytes),
                     EffectiveStream(e, config->hStream), params, extra};
  return Launch(*c.rt, "cuLaunchKernelEx", s, real);
}

CUresult Hook_cuLaunchCooperativeKernel(Entry e, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params) {
  auto c = Enter<PFN_cuLaunchCooperativeKernel_v9000>(e);
  if (!c.real) return NoRealFunction(e);
  auto real = [&] { return c.real(f, gx, gy, gz, bx, by, bz, shared, stream, params); };
  if (!c.act) return real();
  const LaunchSite s{f, Dims(gx, gy, gz, bx, by, bz, shared), EffectiveStream(e, stream), params, nullptr};
  return Launch(*c.rt, "cuLaunchCooperativeKernel", s, real);
}

}  // namespace msched::hook

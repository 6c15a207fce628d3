// Driver API: the launch family (cuLaunchKernel, cuLaunchKernelEx,
// cooperative, per-thread variants; kernelParams and `extra` forms), and the
// scheduling of device-side operations shared with copies and graphs.
#include <bit>
#include <cstdlib>
#include <cstring>

#include "access_log.h"
#include "api.h"
#include "device_trace.h"

using msim::Call;
using msim::KernelDecl;
using msim::NeedCtx;
using msim::Process;
using msim::Stream;
using msim::TouchedRange;

namespace msim {
namespace {

// MSIM_HOST_KERNELS=off models kernels without computing their results, for
// benchmark footprints larger than the host can hold.
bool HostKernelsEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("MSIM_HOST_KERNELS");
    return v == nullptr || std::string(v) != "off";
  }();
  return enabled;
}

std::vector<msimRange>& LastAccesses() {
  static thread_local std::vector<msimRange> last;
  return last;
}

// msimSetNextLaunch's override, per thread, until that function's launch.
struct NextLaunch {
  const KernelDecl* kernel = nullptr;  // none pending
  std::vector<TouchedRange> ranges;
  uint64_t compute_ns = 0;
};

NextLaunch& PendingLaunch() {
  static thread_local NextLaunch next;
  return next;
}

}  // namespace

void SetLastAccesses(const std::vector<TouchedRange>& ranges) {
  std::vector<msimRange>& last = LastAccesses();
  last.clear();
  for (const TouchedRange& r : ranges) last.push_back({r.begin, r.end, r.mode, 0});
}

bool DeviceOp(Process& p, Stream* s, const std::string& name, const std::vector<TouchedRange>& ranges,
              uint64_t compute_ns) {
  std::vector<ChunkTouch> touches;
  if (!p.Touches(ranges, &touches)) return false;
  SetLastAccesses(ranges);
  const uint64_t ready = p.OpStart(s);
  DeviceLock dl(p.dev);
  if (AccessLog* log = AccessLog::Get()) {
    std::vector<std::pair<uint64_t, uint32_t>> blocks;
    blocks.reserve(touches.size());
    for (const ChunkTouch& t : touches) blocks.emplace_back(p.dev->chunk(t.idx).va, t.units);
    log->Operation(blocks);
  }
  const uint64_t start = std::max(ready, p.dev->compute_free());
  const KernelMemory m = ServiceAccesses(*p.dev, touches, start, &p.counters);
  const uint64_t end = std::max(start + compute_ns, m.wait_until) + m.stall_ns + m.remote_ns;
  p.dev->compute_free() = end;
  if (DeviceTrace* trace = DeviceTrace::Get()) trace->Span(DeviceTrace::Track::kCompute, name, start, end, 0);
  p.OpEnd(s, end);
  p.counters.kernel_ns += end - start;
  p.counters.compute_ns += compute_ns;
  p.PublishClock();
  return true;
}

CUresult RunKernel(Process& p, Stream* s, const KernelDecl* k, void* const* params, const msimLaunchInfo& dims) {
  if (s->capture) {  // recorded for replay, not run
    GraphNode node;
    node.id = ++p.graph_node_ids;
    node.kernel = k;
    if (!s->capture->nodes.empty()) node.deps.push_back(s->capture->nodes.size() - 1);  // stream order
    node.dims = dims;
    for (size_t i = 0; i < k->params.size(); ++i) {
      const auto* b = static_cast<const uint8_t*>(params[i]);
      node.params.emplace_back(b, b + k->params[i].second);
    }
    s->capture->nodes.push_back(std::move(node));
    return CUDA_SUCCESS;
  }
  const DeviceProfile& prof = p.dev->profile();
  p.Advance(UsToNs(prof.launch_api_us));
  LaunchArgs args{k, params, dims, ++p.launch_sequence};
  std::vector<TouchedRange> ranges;
  std::string error;
  auto read_u64 = [&p](uint64_t addr, uint64_t* out) {
    if (p.FindAlloc(addr, 8) == nullptr || !p.VmmAllows(addr, 8, false)) return false;
    std::memcpy(out, reinterpret_cast<const void*>(addr), 8);
    return true;
  };
  uint64_t compute = 0;
  if (NextLaunch& next = PendingLaunch(); next.kernel == k) {  // a replayed launch
    ranges = std::move(next.ranges);
    uint64_t bytes = 0;
    for (const TouchedRange& r : ranges) bytes += r.end - r.begin;
    compute = next.compute_ns != 0 ? next.compute_ns : UsToNs(prof.kernel_launch_us) + TransferNs(bytes, prof.hbm_gbps);
    next = NextLaunch{};
  } else {
    int64_t bytes = 0, flops = 0;
    if (!EvaluateAccesses(args, read_u64, &ranges, &error) || !EvaluateCost(args, &bytes, &flops)) {
      ReportError(error.empty() ? "kernel '" + k->name + "': cannot evaluate its cost" : error);
      return CUDA_ERROR_INVALID_VALUE;
    }
    compute = UsToNs(prof.kernel_launch_us) +
              std::max(TransferNs(static_cast<uint64_t>(bytes), prof.hbm_gbps),
                       static_cast<uint64_t>(static_cast<double>(flops) / (prof.tflops * 1e3)));
  }
  compute = std::min<uint64_t>(compute, MSIM_MAX_KERNEL_NS);
  ++p.counters.launches;
  // A kernel touching memory outside the process's allocations faults on a
  // real GPU: the error surfaces at the next synchronisation, and the host
  // implementation (which would touch that memory) does not run.
  if (!DeviceOp(p, s, k->name, ranges, compute)) {
    ++p.counters.illegal_accesses;
    p.sticky_error = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
  }
  if (!k->host_impl.empty() && HostKernelsEnabled()) {
    if (msimHostKernel fn = FindHostKernel(k->host_impl)) fn(params, &dims);
  }
  return CUDA_SUCCESS;
}

}  // namespace msim

namespace {

struct Launch {
  CUfunction f;
  msimLaunchInfo dims;
  CUstream stream;
  void** params;
  void** extra;
  bool ptsz;
};

CUresult DoLaunch(const Launch& l, const char* entry = __builtin_FUNCTION()) {
  const msimLaunchInfo& d = l.dims;
  for (int i = 0; i < 3; ++i) {
    if (d.grid[i] == 0 || d.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (uint64_t{d.block[0]} * d.block[1] * d.block[2] > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (l.params != nullptr && l.extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        if (p.sticky_error) return p.sticky_error;
        const auto* k = reinterpret_cast<const KernelDecl*>(l.f);
        if (!p.functions.count(k)) return CUDA_ERROR_INVALID_HANDLE;
        CUresult err = CUDA_SUCCESS;
        Stream* s = p.ResolveStream(l.stream, l.ptsz, &err);
        if (s == nullptr) return err;
        std::vector<void*> from_extra;
        void* const* params = l.params;
        if (l.extra != nullptr) {  // the packed form: slice the buffer by the layout
          const char* buffer = nullptr;
          size_t size = 0;
          for (int i = 0; i < 64 && l.extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (l.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
              buffer = static_cast<const char*>(l.extra[i + 1]);
            else if (l.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
              size = *static_cast<const size_t*>(l.extra[i + 1]);
            else
              return CUDA_ERROR_INVALID_VALUE;
          }
          if (buffer == nullptr) return CUDA_ERROR_INVALID_VALUE;
          for (const auto& [offset, psize] : k->params) {
            if (offset + psize > size) return CUDA_ERROR_INVALID_VALUE;
            from_extra.push_back(const_cast<char*>(buffer + offset));
          }
          params = from_extra.data();
        } else if (params == nullptr && !k->params.empty()) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        return msim::RunKernel(p, s, k, params, d);
      },
      entry);
}

msimLaunchInfo Dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  return msimLaunchInfo{{gx, gy, gz}, {bx, by, bz}};
}

CUresult LaunchEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool ptsz,
                  const char* entry = __builtin_FUNCTION()) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return DoLaunch({f, Dims(c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ), c->hStream,
                   params, extra, ptsz},
                  entry);
}

}  // namespace

MSIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned, CUstream s, void** params, void** extra) {
  return DoLaunch({f, Dims(gx, gy, gz, bx, by, bz), s, params, extra, false});
}
MSIM_DECLARE(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned, CUstream s, void** params, void** extra) {
  return DoLaunch({f, Dims(gx, gy, gz, bx, by, bz), s, params, extra, true});
}

MSIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return LaunchEx(c, f, params, extra, false);
}
MSIM_DECLARE(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return LaunchEx(c, f, params, extra, true);
}

MSIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                               unsigned by, unsigned bz, unsigned, CUstream s, void** params) {
  return DoLaunch({f, Dims(gx, gy, gz, bx, by, bz), s, params, nullptr, false});
}
MSIM_DECLARE(cuLaunchCooperativeKernel_ptsz, PFN_cuLaunchCooperativeKernel_v9000_ptsz);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned, CUstream s, void** params) {
  return DoLaunch({f, Dims(gx, gy, gz, bx, by, bz), s, params, nullptr, true});
}

// ---- Simulator-only entry points (msim/msim.h) ----------------------------

MSIM_EXPORT CUresult msimGetTime(uint64_t* now_ns) {
  if (now_ns == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  *now_ns = p->now();
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimDeviceTime(uint64_t* now_ns) {
  if (now_ns == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  msim::DeviceLock dl(p->dev);
  p->PublishClock();
  *now_ns = p->dev->device_now();
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimAdvanceTo(uint64_t t_ns) {
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  static thread_local bool in_alarm = false;  // the alarm never fires from within itself
  for (;;) {
    msimIdleAlarmFn alarm = nullptr;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      const uint64_t due = in_alarm ? 0 : p->IdleAlarmDue(t_ns);
      p->AdvanceTo(due != 0 ? due : t_ns);
      msim::DeviceLock dl(p->dev);
      p->PublishClock();
      if (due != 0) alarm = p->idle_alarm_fn();
    }
    if (alarm == nullptr) return CUDA_SUCCESS;
    in_alarm = true;
    alarm();
    in_alarm = false;
  }
}

MSIM_EXPORT CUresult msimSetIdleAlarm(uint64_t idle_ns, msimIdleAlarmFn fn) {
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  p->SetIdleAlarm(idle_ns, fn);
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimSetBlocked(int blocked, uint64_t wakeups_seen) {
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  p->dev->SetBlocked(blocked != 0, wakeups_seen);
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimWaitForTurn(void) {
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  p->dev->WaitForTurnOutsideCall(p->now_relaxed());
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimPeerBlocked(int pid, int* blocked, uint64_t* wakeups_seen) {
  if (blocked == nullptr || wakeups_seen == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  *wakeups_seen = 0;
  *blocked = p->dev->PeerBlocked(pid, wakeups_seen) ? 1 : 0;
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimLastLaunchAccesses(msimRange* out, size_t capacity, size_t* count) {
  if (count == nullptr || (out == nullptr && capacity > 0)) return CUDA_ERROR_INVALID_VALUE;
  const std::vector<msimRange>& last = msim::LastAccesses();
  *count = last.size();
  for (size_t i = 0; i < last.size() && i < capacity; ++i) out[i] = last[i];
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimSetNextLaunch(CUfunction f, const msimRange* ranges, size_t count, uint64_t compute_ns) {
  if (f == nullptr || (ranges == nullptr && count > 0)) return CUDA_ERROR_INVALID_VALUE;
  if (compute_ns > MSIM_MAX_KERNEL_NS) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (ranges[i].end <= ranges[i].begin || ranges[i].mode < 1 || ranges[i].mode > 3) return CUDA_ERROR_INVALID_VALUE;
  }
  msim::NextLaunch& next = msim::PendingLaunch();
  next.kernel = reinterpret_cast<const KernelDecl*>(f);
  next.ranges.clear();
  for (size_t i = 0; i < count; ++i) next.ranges.push_back({ranges[i].begin, ranges[i].end, ranges[i].mode});
  next.compute_ns = compute_ns;
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimRegisterHostKernel(const char* impl, msimHostKernel fn) {
  if (impl == nullptr || *impl == '\0' || fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  msim::RegisterHostKernel(impl, fn);
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimResidentBytes(uint64_t* bytes) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  msim::DeviceLock dl(p->dev);
  uint64_t total = 0;
  for (const auto& [base, a] : p->allocs) {
    for (uint32_t idx : a.chunks) total += std::popcount(p->dev->chunk(idx).resident_mask) * msim::kUnit;
  }
  *bytes = total;
  return CUDA_SUCCESS;
}

MSIM_EXPORT CUresult msimStatsJson(char* out, size_t capacity, size_t* size) {
  if (size == nullptr || (out == nullptr && capacity > 0)) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  const std::string json = p->StatsJson();
  *size = json.size() + 1;
  if (capacity > 0) {
    const size_t n = std::min(capacity - 1, json.size());
    std::memcpy(out, json.data(), n);
    out[n] = '\0';
  }
  return CUDA_SUCCESS;
}

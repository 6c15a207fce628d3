// Copies and sets. Their ranges come straight from the arguments: a memset
// writes its destination and a device-to-device copy reads its source and
// writes its destination on the GPU, so those ranges are made resident
// first, like a kernel's. A host-to-device copy into msched's managed
// memory has its destination made resident first too: the copy then lands
// in device memory, and the kernels that read it find it there, instead of
// landing in host pages that a kernel's prefetch moves again (the input
// crossed the link twice). Device-to-host copies read wherever the data
// is, and are passed through.
#include <initializer_list>
#include <utility>

#include "client/coord_client.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "job/residency.h"

namespace msched::hook {
namespace {

PredictedRegion Region(CUdeviceptr p, size_t bytes, AccessMode mode) {
  return {ByteRange{p, p + bytes}.AlignedOut(kPageSize), mode};
}

// Makes a device-side operation's ranges resident before it is queued.
void BeforeDeviceOp(Runtime& rt, std::initializer_list<PredictedRegion> regions, CUstream stream) {
  if (!rt.predicting()) return;
  MutexLock lock(&rt.mu());
  rt.counters().copies_predicted->Add();
  PrepareResidency(rt, std::vector<PredictedRegion>(regions), stream);
}

// True when both ends of a unified-addressing copy are GPU memory msched
// knows (so the copy runs on the device).
bool DeviceToDevice(Runtime& rt, CUdeviceptr dst, CUdeviceptr src) {
  MutexLock lock(&rt.mu());
  return rt.allocs().Find(dst) != nullptr && rt.allocs().Find(src) != nullptr;
}

// The shape of a copy or set that runs on the device: it passes the gate,
// `before(runtime)` makes its ranges resident (inside Safely), and the real
// call (`call(real)`) follows. Nothing to do for zero bytes.
template <typename Fn, typename Call, typename Before>
CUresult DeviceOpHook(Entry e, size_t bytes, Call&& call, Before&& before) {
  auto c = Enter<Fn>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act || bytes == 0) return call(c.real);
  HookScope scope;
  const GatePass pass = PassGate(*c.rt);
  Safely(*c.rt, Info(e).symbol, [&] { before(*c.rt); });
  return call(c.real);
}

template <typename Fn, typename Call>
CUresult CopyHook(Entry e, CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream, bool maybe_host,
                  Call&& call) {
  return DeviceOpHook<Fn>(e, bytes, std::forward<Call>(call), [&](Runtime& rt) {
    if (maybe_host && !DeviceToDevice(rt, dst, src)) return;
    BeforeDeviceOp(rt, {Region(src, bytes, AccessMode::kRead), Region(dst, bytes, AccessMode::kWrite)},
                   EffectiveStream(e, stream));
  });
}

// True when `p` lies in managed memory msched knows.
bool Managed(Runtime& rt, CUdeviceptr p) {
  MutexLock lock(&rt.mu());
  const Allocation* a = rt.allocs().Find(p);
  return a != nullptr && a->kind == AllocKind::kManaged;
}

// An operation that writes `bytes` at `dst` (a memset, a host-to-device
// copy): the destination made resident first; with `only_managed`, only when
// it is msched's managed memory.
template <typename Fn, typename Call>
CUresult WriteHook(Entry e, CUdeviceptr dst, size_t bytes, CUstream stream, bool only_managed, Call&& call) {
  return DeviceOpHook<Fn>(e, bytes, std::forward<Call>(call), [&](Runtime& rt) {
    if (only_managed && !Managed(rt, dst)) return;
    BeforeDeviceOp(rt, {Region(dst, bytes, AccessMode::kWrite)}, EffectiveStream(e, stream));
  });
}

template <typename Fn, typename T, typename Call>
CUresult SetHook(Entry e, CUdeviceptr dst, size_t n, CUstream stream, Call&& call) {
  return WriteHook<Fn>(e, dst, n * sizeof(T), stream, /*only_managed=*/false, std::forward<Call>(call));
}

// Host-to-device copies: the destination made resident when it is msched's.
template <typename Fn, typename Call>
CUresult HostToDeviceHook(Entry e, CUdeviceptr dst, size_t bytes, CUstream stream, Call&& call) {
  return WriteHook<Fn>(e, dst, bytes, stream, /*only_managed=*/true, std::forward<Call>(call));
}

// Device-to-host copies: passed through once the job's turn allows.
template <typename Fn, typename Call>
CUresult PassHook(Entry e, Call&& call) {
  auto c = Enter<Fn>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act) return call(c.real);
  HookScope scope;
  const GatePass pass = PassGate(*c.rt);
  return call(c.real);
}

}  // namespace

CUresult Hook_cuMemcpy(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t n) {
  return CopyHook<PFN_cuMemcpy_v4000>(e, dst, src, n, nullptr, true, [&](auto real) { return real(dst, src, n); });
}
CUresult Hook_cuMemcpyAsync(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t n, CUstream s) {
  return CopyHook<PFN_cuMemcpyAsync_v4000>(e, dst, src, n, s, true, [&](auto real) { return real(dst, src, n, s); });
}
CUresult Hook_cuMemcpyDtoD(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t n) {
  return CopyHook<PFN_cuMemcpyDtoD_v3020>(e, dst, src, n, nullptr, false, [&](auto real) { return real(dst, src, n); });
}
CUresult Hook_cuMemcpyDtoDAsync(Entry e, CUdeviceptr_v2 dst, CUdeviceptr_v2 src, size_t n, CUstream s) {
  return CopyHook<PFN_cuMemcpyDtoDAsync_v3020>(e, dst, src, n, s, false,
                                               [&](auto real) { return real(dst, src, n, s); });
}
CUresult Hook_cuMemcpyHtoD(Entry e, CUdeviceptr_v2 dst, const void* src, size_t n) {
  return HostToDeviceHook<PFN_cuMemcpyHtoD_v3020>(e, dst, n, nullptr, [&](auto real) { return real(dst, src, n); });
}
CUresult Hook_cuMemcpyDtoH(Entry e, void* dst, CUdeviceptr_v2 src, size_t n) {
  return PassHook<PFN_cuMemcpyDtoH_v3020>(e, [&](auto real) { return real(dst, src, n); });
}
CUresult Hook_cuMemcpyHtoDAsync(Entry e, CUdeviceptr_v2 dst, const void* src, size_t n, CUstream s) {
  return HostToDeviceHook<PFN_cuMemcpyHtoDAsync_v3020>(e, dst, n, s, [&](auto real) { return real(dst, src, n, s); });
}
CUresult Hook_cuMemcpyDtoHAsync(Entry e, void* dst, CUdeviceptr_v2 src, size_t n, CUstream s) {
  return PassHook<PFN_cuMemcpyDtoHAsync_v3020>(e, [&](auto real) { return real(dst, src, n, s); });
}

CUresult Hook_cuMemsetD8(Entry e, CUdeviceptr_v2 d, unsigned char v, size_t n) {
  return SetHook<PFN_cuMemsetD8_v3020, uint8_t>(e, d, n, nullptr, [&](auto real) { return real(d, v, n); });
}
CUresult Hook_cuMemsetD16(Entry e, CUdeviceptr_v2 d, unsigned short v, size_t n) {
  return SetHook<PFN_cuMemsetD16_v3020, uint16_t>(e, d, n, nullptr, [&](auto real) { return real(d, v, n); });
}
CUresult Hook_cuMemsetD32(Entry e, CUdeviceptr_v2 d, unsigned int v, size_t n) {
  return SetHook<PFN_cuMemsetD32_v3020, uint32_t>(e, d, n, nullptr, [&](auto real) { return real(d, v, n); });
}
CUresult Hook_cuMemsetD8Async(Entry e, CUdeviceptr_v2 d, unsigned char v, size_t n, CUstream s) {
  return SetHook<PFN_cuMemsetD8Async_v3020, uint8_t>(e, d, n, s, [&](auto real) { return real(d, v, n, s); });
}
CUresult Hook_cuMemsetD16Async(Entry e, CUdeviceptr_v2 d, unsigned short v, size_t n, CUstream s) {
  return SetHook<PFN_cuMemsetD16Async_v3020, uint16_t>(e, d, n, s, [&](auto real) { return real(d, v, n, s); });
}
CUresult Hook_cuMemsetD32Async(Entry e, CUdeviceptr_v2 d, unsigned int v, size_t n, CUstream s) {
  return SetHook<PFN_cuMemsetD32Async_v3020, uint32_t>(e, d, n, s, [&](auto real) { return real(d, v, n, s); });
}

}  // namespace msched::hook

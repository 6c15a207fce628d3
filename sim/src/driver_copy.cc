// Driver API: memcpy and memset, synchronous and asynchronous, with their
// per-thread stream variants. Data moves for real, at once (operations run
// in issue order, which is a valid stream order); time moves on the modelled
// copy engines (host<->device) or the compute engine (device-side ops).
#include <cstring>

#include "api.h"
#include "device_trace.h"

using msim::AllocType;
using msim::Call;
using msim::DeviceLock;
using msim::NeedCtx;
using msim::Process;
using msim::Stream;
using msim::TouchedRange;

namespace {

enum class Dir { kHtoD, kDtoH, kDtoD, kHtoH };

bool IsDevice(Process& p, uint64_t ptr) {
  msim::Allocation* a = p.FindAlloc(ptr);
  return a != nullptr && a->type != AllocType::kHost;
}

CUresult Copy(Process& p, uint64_t dst, uint64_t src, size_t n, Dir dir, Stream* s, bool sync) {
  if (n == 0) return CUDA_SUCCESS;
  if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  const bool dst_dev = dir == Dir::kHtoD || dir == Dir::kDtoD;
  const bool src_dev = dir == Dir::kDtoH || dir == Dir::kDtoD;
  if ((dst_dev && !p.DeviceRange(dst, n)) || (src_dev && !p.DeviceRange(src, n))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Either side, whatever the direction says, may name VMM addresses that
  // are unmapped or not accessible (PROT_NONE here): refused, never touched.
  if (!p.VmmAllows(dst, n, true) || !p.VmmAllows(src, n, false)) return CUDA_ERROR_INVALID_VALUE;
  const msim::DeviceProfile& prof = p.dev->profile();
  // The model sees each operation before the host memory it stands for
  // changes: first-touch detection must not mistake the copy for a host
  // write.
  if (dir == Dir::kDtoD) {
    const std::vector<TouchedRange> ranges = {{src, src + n, 1}, {dst, dst + n, 2}};
    if (!msim::DeviceOp(p, s, "copy on the device", ranges, msim::TransferNs(2 * n, prof.hbm_gbps))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    p.counters.memcpy_d2d_bytes += n;
  } else if (dir == Dir::kHtoH) {
    p.OpEnd(s, p.OpStart(s));
  } else {
    std::vector<msim::ChunkTouch> written;  // managed units a host-to-device copy writes
    if (dir == Dir::kHtoD && !p.Touches({TouchedRange{dst, dst + n, 2}}, &written)) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t start = p.OpStart(s);
    DeviceLock dl(p.dev);
    msim::HostWrote(*p.dev, written);
    uint64_t& engine = dir == Dir::kHtoD ? p.dev->h2d_free() : p.dev->d2h_free();
    const uint64_t begin = std::max(start, engine);
    engine = begin + msim::TransferNs(n, dir == Dir::kHtoD ? prof.h2d_gbps : prof.d2h_gbps);
    if (msim::DeviceTrace* trace = msim::DeviceTrace::Get()) {
      using Track = msim::DeviceTrace::Track;
      trace->Span(dir == Dir::kHtoD ? Track::kToDevice : Track::kToHost, "copy", begin, engine, n);
    }
    p.OpEnd(s, engine);
    (dir == Dir::kHtoD ? p.counters.memcpy_h2d_bytes : p.counters.memcpy_d2h_bytes) += n;
    p.PublishClock();
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  if (sync) p.AdvanceTo(s->ready);
  return CUDA_SUCCESS;
}

// Copies on `stream` (ptsz: per-thread variant). dir kHtoH means "infer from
// the pointers", as cuMemcpy does with unified addressing.
CUresult DoCopy(uint64_t dst, uint64_t src, size_t n, Dir dir, CUstream stream, bool ptsz, bool sync,
                const char* entry = __builtin_FUNCTION()) {
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        Stream* s = p.ResolveStream(stream, ptsz, &err);
        if (s == nullptr) return err;
        Dir d = dir;
        if (d == Dir::kHtoH) {
          const bool dd = IsDevice(p, dst), sd = IsDevice(p, src);
          d = dd && sd ? Dir::kDtoD : dd ? Dir::kHtoD : sd ? Dir::kDtoH : Dir::kHtoH;
        }
        return Copy(p, dst, src, n, d, s, sync);
      },
      entry);
}

template <typename T>
CUresult Memset(uint64_t dst, T value, size_t count, CUstream stream, bool ptsz, bool sync,
                const char* entry = __builtin_FUNCTION()) {
  if (dst % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        Stream* s = p.ResolveStream(stream, ptsz, &err);
        if (s == nullptr) return err;
        if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        const uint64_t bytes = count * sizeof(T);
        if (bytes == 0) return CUDA_SUCCESS;
        if (!p.DeviceRange(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
        const std::vector<TouchedRange> ranges = {{dst, dst + bytes, 2}};
        if (!msim::DeviceOp(p, s, "memset", ranges, msim::TransferNs(bytes, p.dev->profile().hbm_gbps))) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        T* out = reinterpret_cast<T*>(dst);  // after the model saw the op: see Copy
        for (size_t i = 0; i < count; ++i) out[i] = value;
        if (sync) p.AdvanceTo(s->ready);
        return CUDA_SUCCESS;
      },
      entry);
}

uint64_t U(const void* p) { return reinterpret_cast<uint64_t>(p); }

}  // namespace

// Unified-addressing copies infer the direction from the pointers.
MSIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return DoCopy(dst, src, n, Dir::kHtoH, nullptr, false, true);
}
MSIM_DECLARE(cuMemcpy_ptds, PFN_cuMemcpy_v7000_ptds);
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return DoCopy(dst, src, n, Dir::kHtoH, nullptr, true, true);
}
MSIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(dst, src, n, Dir::kHtoH, s, false, false);
}
MSIM_DECLARE(cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(dst, src, n, Dir::kHtoH, s, true, false);
}

MSIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return DoCopy(dst, U(src), n, Dir::kHtoD, nullptr, false, true);
}
MSIM_DECLARE(cuMemcpyHtoD_v2_ptds, PFN_cuMemcpyHtoD_v7000_ptds);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return DoCopy(dst, U(src), n, Dir::kHtoD, nullptr, true, true);
}
MSIM_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return DoCopy(U(dst), src, n, Dir::kDtoH, nullptr, false, true);
}
MSIM_DECLARE(cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds);
CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return DoCopy(U(dst), src, n, Dir::kDtoH, nullptr, true, true);
}
MSIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return DoCopy(dst, src, n, Dir::kDtoD, nullptr, false, true);
}
MSIM_DECLARE(cuMemcpyDtoD_v2_ptds, PFN_cuMemcpyDtoD_v7000_ptds);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return DoCopy(dst, src, n, Dir::kDtoD, nullptr, true, true);
}
MSIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return DoCopy(dst, U(src), n, Dir::kHtoD, s, false, false);
}
MSIM_DECLARE(cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return DoCopy(dst, U(src), n, Dir::kHtoD, s, true, false);
}
MSIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(U(dst), src, n, Dir::kDtoH, s, false, false);
}
MSIM_DECLARE(cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(U(dst), src, n, Dir::kDtoH, s, true, false);
}
MSIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(dst, src, n, Dir::kDtoD, s, false, false);
}
MSIM_DECLARE(cuMemcpyDtoDAsync_v2_ptsz, PFN_cuMemcpyDtoDAsync_v7000_ptsz);
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return DoCopy(dst, src, n, Dir::kDtoD, s, true, false);
}

MSIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  return Memset<uint8_t>(d, v, n, nullptr, false, true);
}
MSIM_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  return Memset<uint16_t>(d, v, n, nullptr, false, true);
}
MSIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  return Memset<uint32_t>(d, v, n, nullptr, false, true);
}
MSIM_DECLARE(cuMemsetD8_v2_ptds, PFN_cuMemsetD8_v7000_ptds);
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  return Memset<uint8_t>(d, v, n, nullptr, true, true);
}
MSIM_DECLARE(cuMemsetD16_v2_ptds, PFN_cuMemsetD16_v7000_ptds);
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
  return Memset<uint16_t>(d, v, n, nullptr, true, true);
}
MSIM_DECLARE(cuMemsetD32_v2_ptds, PFN_cuMemsetD32_v7000_ptds);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  return Memset<uint32_t>(d, v, n, nullptr, true, true);
}
MSIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return Memset<uint8_t>(d, v, n, s, false, false);
}
MSIM_EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  return Memset<uint16_t>(d, v, n, s, false, false);
}
MSIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  return Memset<uint32_t>(d, v, n, s, false, false);
}
MSIM_DECLARE(cuMemsetD8Async_ptsz, PFN_cuMemsetD8Async_v7000_ptsz);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return Memset<uint8_t>(d, v, n, s, true, false);
}
MSIM_DECLARE(cuMemsetD16Async_ptsz, PFN_cuMemsetD16Async_v7000_ptsz);
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  return Memset<uint16_t>(d, v, n, s, true, false);
}
MSIM_DECLARE(cuMemsetD32Async_ptsz, PFN_cuMemsetD32Async_v7000_ptsz);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  return Memset<uint32_t>(d, v, n, s, true, false);
}

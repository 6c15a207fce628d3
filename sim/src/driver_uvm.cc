// Driver API: unified-memory controls: prefetch (both ABIs, batch, per-thread
// stream variants), advice, discard, and range attributes.
#include <bit>
#include <cstring>

#include "access_log.h"
#include "api.h"

using msim::Allocation;
using msim::AllocType;
using msim::Call;
using msim::ChunkTouch;
using msim::DeviceLock;
using msim::NeedCtx;
using msim::Process;
using msim::Stream;
using msim::TouchedRange;

namespace {

enum class Where { kDevice, kHost, kInvalid };

Where FromLocation(const CUmemLocation& loc) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return loc.id == 0 ? Where::kDevice : Where::kInvalid;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return Where::kHost;
    default: return Where::kInvalid;
  }
}

Where FromDevice(CUdevice dev) {
  return dev == CU_DEVICE_CPU ? Where::kHost : dev == 0 ? Where::kDevice : Where::kInvalid;
}

// The chunks of [ptr, ptr+count), which must lie in managed allocations
// (rounded out to whole pages, as the driver does).
CUresult ManagedTouches(Process& p, CUdeviceptr ptr, size_t count, std::vector<ChunkTouch>* out,
                        std::vector<Allocation*>* allocs = nullptr) {
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t begin = ptr & ~(msim::kPage - 1);
  const uint64_t end = (ptr + count + msim::kPage - 1) & ~(msim::kPage - 1);
  for (uint64_t q = begin; q < end;) {
    auto it = p.allocs.upper_bound(q);
    if (it == p.allocs.begin()) return CUDA_ERROR_INVALID_VALUE;
    --it;
    Allocation& a = it->second;
    const uint64_t alloc_end = (a.base + a.size + msim::kPage - 1) & ~(msim::kPage - 1);
    if (a.type != AllocType::kManaged || q < a.base || q >= alloc_end) return CUDA_ERROR_INVALID_VALUE;
    if (allocs) allocs->push_back(&a);
    q = alloc_end;
  }
  if (!p.Touches({TouchedRange{begin, end, 3}}, out)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// `in_batch`: one range of cuMemPrefetchBatchAsync, which costs the
// stream the profile's batch_range_us before it moves.
CUresult Prefetch(Process& p, CUdeviceptr ptr, size_t count, Where where, CUstream stream, bool ptsz,
                  bool in_batch = false) {
  if (where == Where::kInvalid) return CUDA_ERROR_INVALID_DEVICE;
  CUresult err = CUDA_SUCCESS;
  Stream* s = p.ResolveStream(stream, ptsz, &err);
  if (s == nullptr) return err;
  if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::vector<ChunkTouch> touches;
  std::vector<Allocation*> allocs;
  if (CUresult r = ManagedTouches(p, ptr, count, &touches, &allocs)) return r;
  // One prefetch stays within one allocation: driver 580 refuses a range over
  // two managed allocations that touch (CUDA_ERROR_INVALID_VALUE, measured by
  // scripts/gpu-check.sh on an H100, 2026-11-22).
  if (allocs.size() > 1) return CUDA_ERROR_INVALID_VALUE;
  for (Allocation* a : allocs) a->last_prefetch = where == Where::kDevice ? 0 : CU_DEVICE_CPU;
  const uint64_t start = p.OpStart(s) + (in_batch ? msim::UsToNs(p.dev->profile().batch_range_us) : 0);
  DeviceLock dl(p.dev);
  const uint64_t end = where == Where::kDevice ? msim::PrefetchToDevice(*p.dev, touches, start, &p.counters)
                                               : msim::PrefetchToHost(*p.dev, touches, start, &p.counters);
  p.OpEnd(s, end);
  if (where == Where::kHost && p.dev->profile().host_prefetch_waits) p.AdvanceTo(end);
  ++p.counters.prefetch_calls;
  p.PublishClock();
  return CUDA_SUCCESS;
}

CUresult PrefetchV2(CUdeviceptr ptr, size_t count, CUmemLocation loc, unsigned int flags, CUstream s, bool ptsz,
                    const char* entry = __builtin_FUNCTION()) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(
      NeedCtx::kYes, [&](Process& p) { return Prefetch(p, ptr, count, FromLocation(loc), s, ptsz); }, entry);
}

CUresult PrefetchV1(CUdeviceptr ptr, size_t count, CUdevice dst, CUstream s, bool ptsz,
                    const char* entry = __builtin_FUNCTION()) {
  return Call(
      NeedCtx::kYes, [&](Process& p) { return Prefetch(p, ptr, count, FromDevice(dst), s, ptsz); }, entry);
}

// Validates the batch run-length location map and calls fn(i, where) per range.
template <typename Fn>
CUresult ForEachBatchRange(size_t count, CUmemLocation* locs, size_t* loc_idx, size_t nlocs, Fn&& fn) {
  if (nlocs == 0 || nlocs > count || locs == nullptr || loc_idx == nullptr || loc_idx[0] != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t j = 1; j < nlocs; ++j) {
    if (loc_idx[j] <= loc_idx[j - 1] || loc_idx[j] >= count) return CUDA_ERROR_INVALID_VALUE;
  }
  size_t j = 0;
  for (size_t i = 0; i < count; ++i) {
    while (j + 1 < nlocs && loc_idx[j + 1] <= i) ++j;
    if (CUresult r = fn(i, FromLocation(locs[j]))) return r;
  }
  return CUDA_SUCCESS;
}

bool LegacyNullStream(CUstream s) { return s == nullptr || reinterpret_cast<uintptr_t>(s) == msim::kLegacyStream; }

CUresult PrefetchBatch(CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* locs, size_t* loc_idx,
                       size_t nlocs, unsigned long long flags, CUstream s, bool ptsz,
                       const char* entry = __builtin_FUNCTION()) {
  if (dptrs == nullptr || sizes == nullptr || count == 0 || flags != 0 || (LegacyNullStream(s) && !ptsz)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        return ForEachBatchRange(count, locs, loc_idx, nlocs,
                                 [&](size_t i, Where w) { return Prefetch(p, dptrs[i], sizes[i], w, s, ptsz, true); });
      },
      entry);
}

// Discarded contents are undefined; the simulator makes them visibly so, so
// that a policy which discards live data is caught by checksums.
CUresult DiscardRange(Process& p, CUdeviceptr ptr, size_t size, Stream* s) {
  std::vector<ChunkTouch> touches;
  if (CUresult r = ManagedTouches(p, ptr, size, &touches)) return r;
  std::memset(reinterpret_cast<void*>(ptr), 0xCD, size);
  // Its next touch fills it without a transfer, as new memory's does.
  if (msim::AccessLog* log = msim::AccessLog::Get()) log->Free(ptr, ptr + size);
  const uint64_t start = p.OpStart(s);
  DeviceLock dl(p.dev);
  p.OpEnd(s, msim::Discard(*p.dev, touches, start, &p.counters));
  return CUDA_SUCCESS;
}

CUresult DiscardBatch(CUdeviceptr* dptrs, size_t* sizes, size_t count, unsigned long long flags, CUstream stream,
                      bool ptsz, const char* entry = __builtin_FUNCTION()) {
  if (dptrs == nullptr || sizes == nullptr || count == 0 || flags != 0 || (LegacyNullStream(stream) && !ptsz)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        Stream* s = p.ResolveStream(stream, ptsz, &err);
        if (s == nullptr) return err;
        for (size_t i = 0; i < count; ++i) {
          if (CUresult r = DiscardRange(p, dptrs[i], sizes[i], s)) return r;
        }
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult Advise(Process& p, CUdeviceptr ptr, size_t count, CUmem_advise advice, Where where) {
  std::vector<ChunkTouch> touches;
  std::vector<Allocation*> allocs;
  if (CUresult r = ManagedTouches(p, ptr, count, &touches, &allocs)) return r;
  const bool needs_location = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                              advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (needs_location && where == Where::kInvalid) return CUDA_ERROR_INVALID_DEVICE;
  DeviceLock dl(p.dev);
  if (advice == CU_MEM_ADVISE_SET_READ_MOSTLY || advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY) {
    // Read-mostly advice holds for the pages named, not their allocation.
    // Unsetting it collapses the duplicates at once (the driver keeps one
    // copy): here the device's, as a write would, with no fault.
    uint64_t dropped_copies = 0;
    for (const ChunkTouch& t : touches) {
      msim::ChunkRec& ch = p.dev->chunk(t.idx);
      if (advice == CU_MEM_ADVISE_SET_READ_MOSTLY) {
        ch.read_mostly_mask |= t.units;
        continue;
      }
      const uint32_t collapsing = t.units & ch.read_mostly_mask & ch.host_mask & ch.resident_mask;
      dropped_copies += std::popcount(collapsing) * msim::kUnit;
      ch.host_mask &= ~collapsing;
      ch.read_mostly_mask &= ~t.units;
    }
    // Dropping the host's copies takes the H200 about 9 ms for 64 MiB, paid
    // by the next GPU write there; the simulator charges it to the call.
    if (dropped_copies != 0) p.Advance(msim::TransferNs(dropped_copies, p.dev->profile().unset_duplicate_gbps));
    return CUDA_SUCCESS;
  }
  for (Allocation* a : allocs) {
    switch (advice) {
      case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: a->preferred = where == Where::kDevice ? 0 : CU_DEVICE_CPU; break;
      case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: a->preferred = -2; break;
      case CU_MEM_ADVISE_SET_ACCESSED_BY:
        if (where == Where::kDevice) a->accessed_by_device = true;
        break;
      case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        if (where == Where::kDevice) a->accessed_by_device = false;
        break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // The location advice goes by allocation: chunk flags follow it.
  for (Allocation* a : allocs) {
    for (uint32_t idx : a->chunks) {
      uint32_t& f = p.dev->chunk(idx).flags;
      const bool remote = a->preferred == CU_DEVICE_CPU || a->accessed_by_device;
      f = remote ? f | msim::kRemoteHost : f & ~msim::kRemoteHost;
    }
  }
  return CUDA_SUCCESS;
}

CUresult RangeAttribute(Process& p, void* data, size_t size, CUmem_range_attribute attr, CUdeviceptr ptr,
                        size_t count) {
  std::vector<ChunkTouch> touches;
  std::vector<Allocation*> allocs;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ManagedTouches(p, ptr, count, &touches, &allocs)) return r;
  const Allocation& a = *allocs.front();
  auto put = [&](int v) {
    if (size < sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(data, &v, sizeof v);
    return CUDA_SUCCESS;
  };
  auto type_of = [](int dev) {
    return dev == 0               ? CU_MEM_LOCATION_TYPE_DEVICE
           : dev == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST
                                  : CU_MEM_LOCATION_TYPE_INVALID;
  };
  switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: {
      DeviceLock dl(p.dev);
      bool all = true;
      for (const ChunkTouch& t : touches) all = all && (t.units & ~p.dev->chunk(t.idx).read_mostly_mask) == 0;
      return put(all);
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: return put(a.preferred);
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: return put(a.last_prefetch);
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: return put(type_of(a.preferred));
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: return put(0);  // device 0; the host has no id
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: return put(type_of(a.last_prefetch));
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: return put(0);
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      if (size < sizeof(int) || size % sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
      int* out = static_cast<int*>(data);
      for (size_t i = 0; i < size / sizeof(int); ++i) out[i] = CU_DEVICE_INVALID;
      if (a.accessed_by_device) out[0] = 0;
      return CUDA_SUCCESS;
    }
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

MSIM_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int f, CUstream s) {
  return PrefetchV2(p, n, loc, f, s, false);
}
MSIM_DECLARE(cuMemPrefetchAsync_v2_ptsz, PFN_cuMemPrefetchAsync_v12020_ptsz);
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int f, CUstream s) {
  return PrefetchV2(p, n, loc, f, s, true);
}
MSIM_DECLARE(cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v8000);
CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dst, CUstream s) {
  return PrefetchV1(p, n, dst, s, false);
}
MSIM_DECLARE(cuMemPrefetchAsync_ptsz, PFN_cuMemPrefetchAsync_v8000_ptsz);
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice dst, CUstream s) {
  return PrefetchV1(p, n, dst, s, true);
}

MSIM_EXPORT CUresult cuMemPrefetchBatchAsync(CUdeviceptr* d, size_t* z, size_t n, CUmemLocation* l, size_t* li,
                                             size_t nl, unsigned long long f, CUstream s) {
  return PrefetchBatch(d, z, n, l, li, nl, f, s, false);
}
MSIM_DECLARE(cuMemPrefetchBatchAsync_ptsz, PFN_cuMemPrefetchBatchAsync_v13000_ptsz);
CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr* d, size_t* z, size_t n, CUmemLocation* l, size_t* li, size_t nl,
                                      unsigned long long f, CUstream s) {
  return PrefetchBatch(d, z, n, l, li, nl, f, s, true);
}

MSIM_EXPORT CUresult cuMemDiscardBatchAsync(CUdeviceptr* d, size_t* z, size_t n, unsigned long long f, CUstream s) {
  return DiscardBatch(d, z, n, f, s, false);
}
MSIM_DECLARE(cuMemDiscardBatchAsync_ptsz, PFN_cuMemDiscardBatchAsync_v13000_ptsz);
CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr* d, size_t* z, size_t n, unsigned long long f, CUstream s) {
  return DiscardBatch(d, z, n, f, s, true);
}

MSIM_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUmemLocation loc) {
  return Call(NeedCtx::kYes, [&](Process& p) { return Advise(p, ptr, count, advice, FromLocation(loc)); });
}
MSIM_DECLARE(cuMemAdvise, PFN_cuMemAdvise_v8000);
CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUdevice dev) {
  return Call(NeedCtx::kYes, [&](Process& p) { return Advise(p, ptr, count, advice, FromDevice(dev)); });
}

MSIM_EXPORT CUresult cuMemRangeGetAttribute(void* data, size_t size, CUmem_range_attribute attr, CUdeviceptr ptr,
                                            size_t count) {
  return Call(NeedCtx::kNo, [&](Process& p) { return RangeAttribute(p, data, size, attr, ptr, count); });
}

MSIM_EXPORT CUresult cuMemRangeGetAttributes(void** data, size_t* sizes, CUmem_range_attribute* attrs, size_t n,
                                             CUdeviceptr ptr, size_t count) {
  if (data == nullptr || sizes == nullptr || attrs == nullptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    for (size_t i = 0; i < n; ++i) {
      if (CUresult r = RangeAttribute(p, data[i], sizes[i], attrs[i], ptr, count)) return r;
    }
    return CUDA_SUCCESS;
  });
}

// Driver API: virtual memory management (cuMemCreate, cuMemAddressReserve,
// cuMemMap, cuMemSetAccess and the rest), by the driver's rules. Physical
// memory is a memory file holding HBM; mapping it at a reserved address
// maps the file there, shared, so aliases see the same bytes. It cannot be
// managed and never pages: a kernel touching an unmapped address, or one
// without access, is an illegal address.
// Invariants (under the process lock):
//  - a reservation (Process::reservations) is a PROT_NONE host mapping of
//    whole 2 MiB granules; every mapping lies inside one, and mappings never
//    overlap each other or other allocations;
//  - a mapping (an Allocation of type kVmmMapped) is PROT_NONE in the host
//    until cuMemSetAccess grants access, and its `access` records what was
//    granted per granule: the simulator itself (copies, memsets, pointers
//    a kernel reads) never reads a byte without access granted, nor writes
//    one without read-write access;
//  - a PhysicalMem is in Process::physical while it has references or
//    mappings; its handle is valid only while it has references; its HBM is
//    held on the shared device exactly as long as it is in that set (a
//    process's exit gives back what it held, as for any allocation).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "api.h"

using msim::Allocation;
using msim::AllocType;
using msim::Call;
using msim::DeviceLock;
using msim::kChunk;
using msim::NeedCtx;
using msim::PhysicalMem;
using msim::Process;

namespace {

// Whether [ptr, ptr+size) is a non-empty range of whole granules.
bool WholeGranules(uint64_t ptr, uint64_t size) {
  return size != 0 && ptr % kChunk == 0 && size % kChunk == 0 && size <= UINT64_MAX - ptr;
}

// The physical memory behind `handle` while the handle is valid (it has
// references), else nullptr. A released handle may still be mapped, but
// is not the program's to use any more.
PhysicalMem* Held(Process& p, CUmemGenericAllocationHandle handle) {
  auto* mem = reinterpret_cast<PhysicalMem*>(handle);
  return p.physical.count(mem) && mem->refs > 0 ? mem : nullptr;
}

CUmemGenericAllocationHandle HandleOf(PhysicalMem* mem) { return reinterpret_cast<CUmemGenericAllocationHandle>(mem); }

// Frees physical memory once neither references nor mappings remain: its
// HBM is free for every process sharing the device from this moment.
void FreeIfUnused(Process& p, PhysicalMem* mem) {
  if (mem->refs > 0 || mem->mappings > 0) return;
  p.physical.erase(mem);
  close(mem->fd);
  if (!mem->imported) {
    DeviceLock dl(p.dev);
    p.dev->ReleaseDevice(mem->size);
  }
  delete mem;
}

// Whether [begin, end) lies inside one reservation.
bool InOneReservation(const Process& p, uint64_t begin, uint64_t end) {
  auto r = p.reservations.upper_bound(begin);
  if (r == p.reservations.begin()) return false;
  --r;
  return end <= r->first + r->second;
}

// Whether any allocation (a mapping, within a reservation) overlaps
// [begin, end). Allocations never overlap, so the last one starting before
// `end` is the only candidate.
bool AnyAllocationIn(const Process& p, uint64_t begin, uint64_t end) {
  auto it = p.allocs.lower_bound(end);
  if (it == p.allocs.begin()) return false;
  --it;
  return it->second.base + it->second.size > begin;
}

// The host protection that gives the simulator (copies, host kernels) the
// access granted. Read-only access is read-write in the host: the recorded
// grant is what refuses device writes (Allocation::Grants).
int HostProtection(CUmemAccess_flags flags) {
  return flags == CU_MEM_ACCESS_FLAGS_PROT_NONE ? PROT_NONE : PROT_READ | PROT_WRITE;
}

}  // namespace

MSIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                   CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process&) {
    *granularity = kChunk;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                 unsigned long long flags) {
  if (handle == nullptr || prop == nullptr || flags != 0 || !WholeGranules(0, size)) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return Call(NeedCtx::kYes, [&](Process& p) {
    if (!msim::ReserveHbm(p, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    auto* mem = new PhysicalMem();
    mem->fd = memfd_create("msim-vmm", MFD_CLOEXEC);
    if (mem->fd < 0 || ftruncate(mem->fd, static_cast<off_t>(size)) != 0) {
      if (mem->fd >= 0) close(mem->fd);
      delete mem;
      DeviceLock dl(p.dev);
      p.dev->ReleaseDevice(size);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    mem->size = size;
    mem->refs = 1;
    mem->exportable = (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
    p.physical.insert(mem);
    *handle = HandleOf(mem);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    PhysicalMem* mem = Held(p, handle);
    if (mem == nullptr) return CUDA_ERROR_INVALID_VALUE;
    --mem->refs;
    FreeIfUnused(p, mem);  // released while mapped: it lives until unmapped
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    Allocation* a = p.FindAlloc(reinterpret_cast<uint64_t>(addr));
    if (a == nullptr || a->type != AllocType::kVmmMapped) return CUDA_ERROR_INVALID_VALUE;
    ++a->physical->refs;  // a released handle that is still mapped becomes valid again
    *handle = HandleOf(a->physical);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                            CUmemGenericAllocationHandle handle) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (Held(p, handle) == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *prop = CUmemAllocationProp{};  // what cuMemCreate accepts: pinned, on device 0
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    return CUDA_SUCCESS;
  });
}

// Sharing with another process, as POSIX file descriptors only: the export
// is a descriptor of the memory file (the handle must have been created
// asking for that type, as the driver requires), and an import maps the
// same file, whose HBM stays the exporter's. (If the exporter frees its
// handle first, the device counts the memory free while the importer still
// maps it: a simplification; the driver keeps it until both let go.)
MSIM_EXPORT CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                                  CUmemAllocationHandleType type, unsigned long long flags) {
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  return Call(NeedCtx::kNo, [&](Process& p) {
    PhysicalMem* mem = Held(p, handle);
    if (mem == nullptr || !mem->exportable) return CUDA_ERROR_INVALID_VALUE;
    const int fd = dup(mem->fd);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *static_cast<int*>(shareable) = fd;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                                    CUmemAllocationHandleType type) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  return Call(NeedCtx::kYes, [&](Process& p) {
    const off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (size <= 0 || size % kChunk != 0) return CUDA_ERROR_INVALID_VALUE;
    auto* mem = new PhysicalMem();
    mem->fd = dup(fd);
    if (mem->fd < 0) {
      delete mem;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    mem->size = static_cast<uint64_t>(size);
    mem->refs = 1;
    mem->imported = true;
    p.physical.insert(mem);
    *handle = HandleOf(mem);
    return CUDA_SUCCESS;
  });
}

// The address hint is not honoured (the driver may ignore it too).
MSIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr,
                                         unsigned long long flags) {
  if (ptr == nullptr || !WholeGranules(0, size) || alignment % kChunk != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return Call(NeedCtx::kNo, [&](Process& p) {
    uint64_t map_size = 0;
    const uint64_t base = msim::MapAligned(size, &map_size, alignment != 0 ? alignment : kChunk);
    if (base == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    mprotect(reinterpret_cast<void*>(base), map_size, PROT_NONE);
    p.reservations[base] = size;
    *ptr = base;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto r = p.reservations.find(ptr);
    if (r == p.reservations.end() || r->second != size || AnyAllocationIn(p, ptr, ptr + size)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    munmap(reinterpret_cast<void*>(ptr), size);
    p.reservations.erase(r);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags) {
  if (!WholeGranules(ptr, size) || offset % kChunk != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    PhysicalMem* mem = Held(p, handle);
    if (mem == nullptr || offset > mem->size || size > mem->size - offset) return CUDA_ERROR_INVALID_VALUE;
    if (!InOneReservation(p, ptr, ptr + size) || AnyAllocationIn(p, ptr, ptr + size)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Inaccessible until cuMemSetAccess, as on the device.
    void* m = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, mem->fd,
                   static_cast<off_t>(offset));
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    Allocation a;
    a.base = ptr;
    a.size = size;
    a.type = AllocType::kVmmMapped;
    a.physical = mem;
    a.access.assign(size / kChunk, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    p.allocs[ptr] = std::move(a);
    ++mem->mappings;
    return CUDA_SUCCESS;
  });
}

// Unmaps whole mappings only: the range is one or several laid end to end.
// The addresses stay reserved.
MSIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (!WholeGranules(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    const std::vector<Allocation*> mappings = p.MappingsCovering(ptr, ptr + size);
    if (mappings.empty() || mappings.front()->base != ptr ||
        mappings.back()->base + mappings.back()->size != ptr + size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
             0) == MAP_FAILED) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (Allocation* a : mappings) {
      PhysicalMem* mem = a->physical;
      const uint64_t base = a->base;  // the key outlives the erased entry
      p.allocs.erase(base);
      --mem->mappings;
      FreeIfUnused(p, mem);
    }
    return CUDA_SUCCESS;
  });
}

// Grants (or, with PROT_NONE, revokes) device 0's access to mapped memory:
// the range must be mapped throughout, possibly by several mappings.
MSIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (!WholeGranules(ptr, size) || desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id != 0) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  const CUmemAccess_flags flags = desc[count - 1].flags;  // the one device: its last descriptor holds
  return Call(NeedCtx::kNo, [&](Process& p) {
    const std::vector<Allocation*> mappings = p.MappingsCovering(ptr, ptr + size);
    if (mappings.empty()) return CUDA_ERROR_INVALID_VALUE;
    if (mprotect(reinterpret_cast<void*>(ptr), size, HostProtection(flags)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    for (Allocation* a : mappings) {
      const uint64_t first = (std::max<uint64_t>(ptr, a->base) - a->base) / kChunk;
      const uint64_t last = (std::min<uint64_t>(ptr + size, a->base + a->size) - a->base) / kChunk;
      std::fill(a->access.begin() + static_cast<ptrdiff_t>(first), a->access.begin() + static_cast<ptrdiff_t>(last),
                static_cast<uint8_t>(flags));
    }
    return CUDA_SUCCESS;
  });
}

#include "job/cuda_vmm_ops.h"

#include <cstring>

#include "interpose/driver_functions.h"

namespace msched::hook {
namespace {

Status Missing(const char* what) { return Status::Unavailable(std::string("the driver lacks ") + what); }

}  // namespace

std::vector<uint8_t> CudaVmmOps::Recipe(const CUmemAllocationProp& prop) {
  std::vector<uint8_t> recipe(sizeof prop);
  std::memcpy(recipe.data(), &prop, sizeof prop);
  return recipe;
}

Result<uint64_t> CudaVmmOps::Create(uint64_t size, const std::vector<uint8_t>& recipe) {
  auto create = RealDriver().cuMemCreate;
  if (create == nullptr) return Missing("cuMemCreate");
  CUmemAllocationProp prop{};
  if (recipe.size() != sizeof prop) return Status::InvalidArgument("no allocation properties to make it again");
  std::memcpy(&prop, recipe.data(), sizeof prop);
  CUmemGenericAllocationHandle handle = 0;
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(create(&handle, size, &prop, 0), "cuMemCreate"));
  return static_cast<uint64_t>(handle);
}

Status CudaVmmOps::Release(uint64_t real) {
  auto release = RealDriver().cuMemRelease;
  return release != nullptr ? CheckDriverCall(release(real), "cuMemRelease") : Missing("cuMemRelease");
}

Status CudaVmmOps::Map(uint64_t va, uint64_t size, uint64_t offset, uint64_t real) {
  auto map = RealDriver().cuMemMap;
  return map != nullptr ? CheckDriverCall(map(va, size, offset, real, 0), "cuMemMap") : Missing("cuMemMap");
}

Status CudaVmmOps::Unmap(uint64_t va, uint64_t size) {
  auto unmap = RealDriver().cuMemUnmap;
  return unmap != nullptr ? CheckDriverCall(unmap(va, size), "cuMemUnmap") : Missing("cuMemUnmap");
}

Status CudaVmmOps::SetAccess(uint64_t va, uint64_t size, const std::vector<VmmAccess>& access) {
  auto set = RealDriver().cuMemSetAccess;
  if (set == nullptr) return Missing("cuMemSetAccess");
  std::vector<CUmemAccessDesc> descs;
  for (const VmmAccess& a : access) {
    CUmemAccessDesc d{};
    d.location.type = static_cast<CUmemLocationType>(a.location_type);
    d.location.id = a.location_id;
    d.flags = static_cast<CUmemAccess_flags>(a.flags);
    descs.push_back(d);
  }
  return CheckDriverCall(set(va, size, descs.data(), descs.size()), "cuMemSetAccess");
}

template <typename Copy>
Status CudaVmmOps::ThroughOwnMapping(uint64_t real, uint64_t size, Copy&& copy) {
  const DriverFunctions& d = RealDriver();
  if (!d.cuMemAddressReserve || !d.cuMemAddressFree || !d.cuMemGetAllocationPropertiesFromHandle) {
    return Missing("cuMemAddressReserve/cuMemAddressFree/cuMemGetAllocationPropertiesFromHandle");
  }
  CUmemAllocationProp prop{};
  MSCHED_RETURN_IF_ERROR(
      CheckDriverCall(d.cuMemGetAllocationPropertiesFromHandle(&prop, real), "cuMemGetAllocationPropertiesFromHandle"));
  CUdeviceptr va = 0;
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(d.cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve"));
  Status s = Map(va, size, 0, real);
  if (s.ok()) {
    s = SetAccess(va, size,
                  {{static_cast<int32_t>(prop.location.type), prop.location.id,
                    static_cast<uint32_t>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)}});
    if (s.ok()) s = copy(va);
    if (Status u = Unmap(va, size); s.ok()) s = u;
  }
  if (Status f = CheckDriverCall(d.cuMemAddressFree(va, size), "cuMemAddressFree"); s.ok()) s = f;
  return s;
}

Result<void*> CudaVmmOps::CopyOut(uint64_t real, uint64_t size) {
  const DriverFunctions& d = RealDriver();
  if (!d.cuMemHostAlloc || !d.cuMemcpyDtoH_v2) return Missing("cuMemHostAlloc/cuMemcpyDtoH");
  void* host = nullptr;
  MSCHED_RETURN_IF_ERROR(CheckDriverCall(d.cuMemHostAlloc(&host, size, 0), "cuMemHostAlloc"));
  const Status s = ThroughOwnMapping(
      real, size, [&](CUdeviceptr va) { return CheckDriverCall(d.cuMemcpyDtoH_v2(host, va, size), "cuMemcpyDtoH"); });
  if (!s.ok()) {
    FreeHost(host, size);
    return s;
  }
  return host;
}

Status CudaVmmOps::CopyIn(const void* host, uint64_t real, uint64_t size) {
  auto copy = RealDriver().cuMemcpyHtoD_v2;
  if (copy == nullptr) return Missing("cuMemcpyHtoD");
  return ThroughOwnMapping(real, size,
                           [&](CUdeviceptr va) { return CheckDriverCall(copy(va, host, size), "cuMemcpyHtoD"); });
}

void CudaVmmOps::FreeHost(void* host, uint64_t) {
  if (auto free_host = RealDriver().cuMemFreeHost) free_host(host);
}

}  // namespace msched::hook

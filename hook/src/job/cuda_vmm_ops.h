// CudaVmmOps: VmmOps on the real driver, for moving the job's VMM memory
// between turns. A handle is copied through a mapping of msched's own
// (reserved, mapped and given read-write access for the copy, then undone),
// so that it moves whole whether the program mapped all of it, part of it
// or none, and pinned host memory holds it meanwhile. Recipes are the
// handles' CUmemAllocationProp, as cuMemCreate was given it. Every driver
// call goes to the real function, never through a hook. Used with the
// Runtime's lock held, while no launch of the job's is running.
#pragma once

#include <cuda.h>

#include <vector>

#include "model/vmm_memory.h"

namespace msched::hook {

class CudaVmmOps : public VmmOps {
 public:
  // The recipe VmmMemory keeps for a handle made with `prop`.
  static std::vector<uint8_t> Recipe(const CUmemAllocationProp& prop);

  Result<uint64_t> Create(uint64_t size, const std::vector<uint8_t>& recipe) override;
  Status Release(uint64_t real) override;
  Status Map(uint64_t va, uint64_t size, uint64_t offset, uint64_t real) override;
  Status Unmap(uint64_t va, uint64_t size) override;
  Status SetAccess(uint64_t va, uint64_t size, const std::vector<VmmAccess>& access) override;
  Result<void*> CopyOut(uint64_t real, uint64_t size) override;
  Status CopyIn(const void* host, uint64_t real, uint64_t size) override;
  void FreeHost(void* host, uint64_t size) override;

 private:
  // Maps `real` whole at a reserved range of msched's own, readable and
  // writable by the device it lives on, runs `copy(va)`, and undoes it all.
  template <typename Copy>
  Status ThroughOwnMapping(uint64_t real, uint64_t size, Copy&& copy);
};

}  // namespace msched::hook

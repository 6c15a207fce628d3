// CudaPoolOps: the pool's seam (PoolOps, src/model/managed_pool.h) on the
// real driver. A chunk is one cuMemAllocManaged allocation, registered with
// the memory manager whole as it comes and goes: a kernel's predicted
// ranges, which point into blocks, resolve to it, and its residency
// survives a block's reuse (freed memory stays where it was). A fence is an
// event recorded on the freeing stream; events are recycled per context,
// never destroyed. Every driver call goes to the real function.
// REQUIRES: the Runtime's pool lock while the object is used (it takes the
// Runtime's lock itself, after it). Used by hook/ only.
#pragma once

#include <cuda.h>

#include "job/runtime.h"
#include "model/managed_pool.h"

namespace msched::hook {

class CudaPoolOps : public PoolOps {
 public:
  explicit CudaPoolOps(Runtime& rt) : rt_(rt) {}

  Result<uint64_t> AllocateChunk(uint64_t bytes) override;
  Status ReleaseChunk(uint64_t base, uint64_t bytes) override;
  // When no event can be recorded on the stream (none can be made, or the
  // stream is another context's), the stream is synchronised instead.
  Result<FenceId> RecordFence(StreamHandle stream) override;
  bool FenceDone(FenceId fence) override;
  // Issues no wait when `stream` is the one the fence was recorded on:
  // stream order already puts the new owner's work after the free.
  Status StreamWaitFence(StreamHandle stream, FenceId fence) override;
  Status WaitFence(FenceId fence) override;
  void DropFence(FenceId fence) override;

  // The CUresult a program gets for a failed ManagedPool::Allocate: the
  // driver's own answer when a chunk could not be had, else out of memory.
  CUresult ErrorFor(const Status& s) const;

 private:
  // Whether `fence` was recorded on `stream` itself.
  bool RecordedOn(FenceId fence, CUstream stream);

  Runtime& rt_;
  CUresult chunk_error_ = CUDA_SUCCESS;  // the driver's answer to the last chunk refused
};

}  // namespace msched::hook

// CudaDeviceOps: DeviceOps on the real driver. Transfers go on a private,
// non-blocking stream per context; events order it against the launch
// stream (evictions after the kernels that still use their victims, at
// points marked in its queue; the kernel after its data). Every driver call goes to the real function, never
// through a hook. Confined to the thread holding the Runtime's lock.
#pragma once

#include <cuda.h>

#include "model/device_ops.h"

namespace msched::hook {

class CudaDeviceOps : public DeviceOps {
 public:
  // For the calling thread's current context. Fails if there is none or its
  // transfer stream cannot be made.
  static Result<CudaDeviceOps> ForCurrentContext();

  Status Prefetch(const ByteRange& r, bool to_device) override;
  Status MarkQueued(StreamHandle stream, uint64_t next) override;
  Status EvictionsAfter(StreamHandle stream, uint64_t op) override;
  Status LoadsAfterEvictions() override;
  Status StreamAfterTransfers(StreamHandle stream) override;
  Status SynchronizeTransfers() override;
  uint64_t NowNs() override;
  Status SetReadMostly(const ByteRange& r, bool on) override;

  static StreamHandle Handle(CUstream s) { return reinterpret_cast<StreamHandle>(s); }

 private:
  struct PerContext;
  explicit CudaDeviceOps(PerContext* c) : c_(c) {}
  PerContext* c_;
};

}  // namespace msched::hook

// DeviceOps: the narrow seam through which src/ asks the driver to move
// memory. hook/ implements it on the real driver (or the simulator); tests
// implement it with a recording fake and a fault injector. Stream handles
// are opaque integers to src/ (a CUstream in hook/).
// Implementations are confined to the thread that calls them.
#pragma once

#include <cstdint>

#include "model/address_range.h"
#include "msched/status.h"

namespace msched {

using StreamHandle = uint64_t;

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // Moves `r` (page-aligned, inside managed allocations) to the device or to
  // host memory, in bulk. Loads and evictions go on two streams of the
  // manager's own, so that the link's two directions work at once: an
  // eviction's space frees while the next load is under way.
  virtual Status Prefetch(const ByteRange& r, bool to_device) = 0;
  // Operations numbered below `next` (launches and copies, as the memory
  // manager numbers them) have all been queued on `stream`: a point in its
  // queue that a later eviction may wait for.
  virtual Status MarkQueued(StreamHandle stream, uint64_t next) = 0;
  // Makes the eviction stream wait until `stream` has run operation `op`
  // (so that evictions follow the kernels still using their victims, and no
  // later ones): at the earliest point marked after `op` that is still
  // known, else after all the work queued on `stream` so far. Waiting longer
  // than needed only costs overlap; never shorter.
  virtual Status EvictionsAfter(StreamHandle stream, uint64_t op) = 0;
  // Makes loads queued from now on start after the evictions queued so far
  // (a chunk evicted by one plan and loaded by a later one arrives last).
  virtual Status LoadsAfterEvictions() = 0;
  // Makes `stream` wait for the loads queued so far (so that a kernel starts
  // after its data is in place).
  virtual Status StreamAfterTransfers(StreamHandle stream) = 0;
  // Waits, on the host, until all queued transfers are complete.
  virtual Status SynchronizeTransfers() = 0;
  // The time, in nanoseconds, on the clock the device's work is timed on:
  // how long an eviction's calls held the caller.
  virtual uint64_t NowNs() = 0;
  // Advises `r` (page-aligned, within one managed allocation) read-mostly,
  // or no longer: a read-mostly page moved to the device keeps its host
  // copy, so evicting it later moves nothing back.
  virtual Status SetReadMostly(const ByteRange& r, bool on) = 0;
};

}  // namespace msched

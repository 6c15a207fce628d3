// The unified-memory driver's behaviour on the modelled device, after the
// stock nvidia-uvm (see docs/simulator.md):
//  - a GPU touch of a non-resident page faults; faults are serviced in
//    batches of up to fault_batch_size fault entries (a densely touched
//    64 KiB big page holds 16 of them), each batch costing one control-plane
//    round trip plus its transfers; a serviced fault migrates its big page,
//    and the density prefetcher then fills any 2^k-unit subregion of the
//    2 MiB block that is more than 51% resident;
//  - a page with no valid copy anywhere (never written, or discarded) is
//    populated where it is needed, zero-filled at HBM speed, with no
//    transfer; host writes make host copies;
//  - read-mostly pages are duplicated: migrating in keeps the host copy,
//    eviction drops the device copy without a transfer, and a GPU write
//    collapses the copies (a fault, no transfer);
//  - when HBM is full the least recently *migrated* 2 MiB chunk is evicted
//    whole: its pages without a valid host copy are copied back on the
//    device-to-host engine before its space frees;
//  - HBM emptied on purpose (a prefetch to the host, a discard) stays
//    allocated to its block, as nvidia-uvm's PMM keeps an emptied root chunk
//    on its unused list (measured on an H200, 2026-11-28): it is reported
//    used, in every process, but an allocation that does not fit in the
//    free memory (any process's, device or managed) reclaims it at no
//    cost, the earliest emptied first, before anything is evicted; the
//    block migrating back in reuses its own, and freeing the block
//    (cuMemFree, process exit) gives it back. Eviction frees its space;
//  - prefetches move ranges in bulk on the copy engines; each kind of move
//    at its profile's rate (a first eviction, with no host pages yet, at
//    first_eviction_gbps; dropping duplicates and discarding at theirs), and
//    a transfer issued while the other direction moves shares duplex_gbps
//    with it (full duplex in a version 1 profile).
// All functions REQUIRE the SharedDevice lock. Used by sim/ only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shared_device.h"

namespace msim {

// Counters of memory traffic, kept per process.
struct UvmCounters {
  uint64_t faults = 0;
  uint64_t fault_batches = 0;
  uint64_t fault_h2d_bytes = 0;     // migrated by faults (incl. density prefetch)
  uint64_t prefetch_h2d_bytes = 0;  // moved in by prefetch calls
  uint64_t prefetch_d2h_bytes = 0;  // moved out by prefetch-to-host calls
  uint64_t evict_d2h_bytes = 0;     // copied out by driver evictions
  uint64_t evictions = 0;           // chunks evicted by the driver
  uint64_t remote_bytes = 0;        // read in place over the link, unmigrated
  uint64_t fault_stall_ns = 0;
  uint64_t discarded_bytes = 0;
  uint64_t first_touch_bytes = 0;        // populated on the device with no transfer
  uint64_t collapses = 0;                // read duplicates a GPU write collapsed (units)
  uint64_t first_eviction_bytes = 0;     // of those copied out, with no host pages yet (first_eviction_gbps)
  uint64_t duplicate_dropped_bytes = 0;  // read duplicates evicted by dropping the device copy
};

// The 64 KiB units of one chunk a single operation touches, and those of
// them it writes.
struct ChunkTouch {
  uint32_t idx;
  uint32_t units;
  uint32_t written;
};

// What servicing a kernel's accesses costs it.
struct KernelMemory {
  uint64_t stall_ns = 0;    // fault servicing and evictions on the fault path
  uint64_t remote_ns = 0;   // in-place reads of host-resident data
  uint64_t wait_until = 0;  // latest arrival of an in-flight migration it needs
};

// Serves a kernel starting at `start` that touches `touches` (address order).
KernelMemory ServiceAccesses(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t start, UvmCounters* c);

// Moves the given units to HBM in bulk, starting no earlier than `t0`, in
// the order given (access order). Returns the completion time.
uint64_t PrefetchToDevice(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c);

// Moves the given resident units back to host memory. Returns completion.
uint64_t PrefetchToHost(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c);

// Makes room for a non-managed allocation of `bytes` at time t, evicting
// managed chunks as the real driver does for any process's cuMemAlloc.
// Returns when the space is free, or nullopt when even that cannot free enough.
std::optional<uint64_t> MakeRoomForDevice(SharedDevice& d, uint64_t bytes, uint64_t t, UvmCounters* c);

// Drops the given units without copying them back (their contents become
// undefined). Returns the time it takes effect.
uint64_t Discard(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c);

// Records a host-side write (a copy from host memory) into the given units:
// it lands in the device copy where the unit is resident (and collapses a
// read duplicate), in the host copy otherwise.
void HostWrote(SharedDevice& d, const std::vector<ChunkTouch>& touches);

}  // namespace msim

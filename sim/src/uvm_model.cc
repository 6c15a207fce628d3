#include "uvm_model.h"

#include <algorithm>
#include <bit>

namespace msim {
namespace {

constexpr uint64_t kNoRoom = UINT64_MAX;

// Evicts a whole chunk at time t: a D2H copy of its resident units, after
// which its space frees. Read-duplicated chunks have a valid host copy and
// free at once.
void EvictChunk(SharedDevice& d, uint32_t idx, uint64_t t, UvmCounters* c) {
  ChunkRec& ch = d.chunk(idx);
  const uint64_t bytes = std::popcount(ch.resident_mask) * kUnit;
  ++c->evictions;
  if (ch.flags & kReadMostly) {
    d.DropResident(idx, ch.resident_mask, 0);
    return;
  }
  const uint64_t start = std::max(t, d.d2h_free());
  const uint64_t end = start + TransferNs(bytes, d.profile().d2h_gbps);
  d.d2h_free() = end;
  d.DropResident(idx, ch.resident_mask, std::max<uint64_t>(end, 1));
  c->evict_d2h_bytes += bytes;
}

// Makes `bytes` of HBM free, evicting least recently migrated chunks (never
// `exclude`). Returns the time the space is free, or kNoRoom when memory
// nobody may evict (device allocations) fills the device.
uint64_t MakeRoom(SharedDevice& d, uint64_t bytes, uint64_t t, uint32_t exclude, UvmCounters* c) {
  if (bytes > d.capacity()) return kNoRoom;
  d.ApplyReleases(t);
  while (d.capacity() - d.used() + d.pending_release_bytes() < bytes) {
    uint32_t victim = d.LruHead();
    if (victim == exclude && victim != kNone) victim = d.chunk(victim).lru_next;
    if (victim == kNone) return kNoRoom;
    EvictChunk(d, victim, t, c);
  }
  while (d.capacity() - d.used() < bytes) {
    const uint64_t at = d.PopRelease();
    if (at == 0) break;
    t = std::max(t, at);
  }
  return t;
}

// The density prefetcher: once unit `u` is brought in, fill every enclosing
// aligned subregion (2, 4, 8, 16, 32 units) that is then more than 51%
// resident. Streaming through a block thus faults at units 0, 1, 2, 4, 8
// and 16: six faults per 2 MiB. Returns the extra units to bring in.
uint32_t DensityPrefetch(uint32_t resident, uint32_t valid, uint32_t u) {
  uint32_t add = 0;
  for (uint32_t width = 2; width <= kUnitsPerChunk; width *= 2) {
    const uint32_t first = u / width * width;
    const uint32_t node = (width == 32 ? ~0u : ((1u << width) - 1) << first) & valid;
    const uint32_t have = resident | (1u << u) | add;
    if (std::popcount(have & node) * 100 > 51 * std::popcount(node)) add |= node & ~have;
  }
  return add;
}

}  // namespace

KernelMemory ServiceAccesses(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t start,
                             UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  KernelMemory m;
  uint64_t faults = 0;
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t touched = t.units & ch.valid_mask;
    if (touched & ch.resident_mask) m.wait_until = std::max(m.wait_until, ch.ready_at);
    uint32_t missing = touched & ~ch.resident_mask;
    if (missing == 0) continue;
    if (ch.flags & kRemoteHost) {  // mapped for remote access: read over the link, no fault
      const uint64_t bytes = std::popcount(missing) * kUnit;
      m.remote_ns += TransferNs(bytes, p.h2d_gbps);
      c->remote_bytes += bytes;
      continue;
    }
    while (missing) {
      const uint32_t u = std::countr_zero(missing);
      const uint32_t bring = (1u << u) | DensityPrefetch(ch.resident_mask, ch.valid_mask, u);
      const uint64_t bytes = std::popcount(bring) * kUnit;
      const uint64_t now = start + m.stall_ns;
      const uint64_t room = MakeRoom(d, bytes, now, t.idx, c);
      if (room == kNoRoom) {  // nothing evictable: serve the rest remotely
        const uint64_t rest = std::popcount(missing) * kUnit;
        m.remote_ns += TransferNs(rest, p.h2d_gbps);
        c->remote_bytes += rest;
        break;
      }
      const uint64_t transfer = std::max(TransferNs(bytes, p.h2d_gbps), UsToNs(p.fault_min_transfer_us));
      m.stall_ns += (room - now) + UsToNs(p.fault_control_us) + transfer;
      d.AddResident(t.idx, bring, room, room + transfer);
      ++faults;
      c->fault_h2d_bytes += bytes;
      missing &= ~ch.resident_mask;
    }
  }
  if (faults) {
    const uint64_t batches = (faults + p.fault_batch_size - 1) / p.fault_batch_size;
    m.stall_ns += batches * UsToNs(p.fault_batch_us);
    c->faults += faults;
    c->fault_batches += batches;
  }
  c->fault_stall_ns += m.stall_ns;
  return m;
}

uint64_t PrefetchToDevice(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  const uint64_t issued = t0 + UsToNs(p.prefetch_call_us);
  uint64_t cursor = std::max(t0, d.h2d_free()) + UsToNs(p.prefetch_call_us);
  uint64_t done = cursor;
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t bring = t.units & ch.valid_mask & ~ch.resident_mask;
    if (bring == 0) {
      done = std::max(done, ch.ready_at);
      continue;
    }
    const uint64_t bytes = std::popcount(bring) * kUnit;
    // Victims are evicted from the moment the request is issued, back to back
    // on the D2H engine; each chunk's H2D waits only for its own space. The
    // two directions of the link thus overlap (a pipelined swap).
    const uint64_t room = MakeRoom(d, bytes, issued, t.idx, c);
    if (room == kNoRoom) continue;  // HBM full of unevictable memory: stays on the host
    const uint64_t begin = std::max(cursor, room);
    const uint64_t end = begin + TransferNs(bytes, p.h2d_gbps);
    d.AddResident(t.idx, bring, begin, end);
    cursor = end;
    done = std::max(done, end);
    c->prefetch_h2d_bytes += bytes;
  }
  d.h2d_free() = std::max(d.h2d_free(), cursor);
  return done;
}

uint64_t PrefetchToHost(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  uint64_t cursor = std::max(t0, d.d2h_free()) + UsToNs(p.prefetch_call_us);
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t out = t.units & ch.resident_mask;
    if (out == 0) continue;
    const uint64_t bytes = std::popcount(out) * kUnit;
    if (ch.flags & kReadMostly) {
      d.DropResident(t.idx, out, 0);
      continue;
    }
    cursor = std::max(cursor, ch.ready_at) + TransferNs(bytes, p.d2h_gbps);
    d.DropResident(t.idx, out, cursor);
    c->prefetch_d2h_bytes += bytes;
  }
  d.d2h_free() = std::max(d.d2h_free(), cursor);
  return cursor;
}

std::optional<uint64_t> MakeRoomForDevice(SharedDevice& d, uint64_t bytes, uint64_t t, UvmCounters* c) {
  const uint64_t room = MakeRoom(d, bytes, t, kNone, c);
  if (room == kNoRoom) return std::nullopt;
  return room;
}

uint64_t Discard(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t out = t.units & ch.resident_mask;
    c->discarded_bytes += std::popcount(out) * kUnit;
    d.DropResident(t.idx, out, 0);
  }
  return t0 + UsToNs(d.profile().api_call_us);
}

}  // namespace msim

#include "uvm_model.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>

#include "device_trace.h"

namespace msim {
namespace {

constexpr uint64_t kNoRoom = UINT64_MAX;
constexpr uint32_t kPagesPerUnit = kUnit / kPage;  // fault entries of a densely touched big page

uint64_t Bytes(uint32_t units) { return std::popcount(units) * kUnit; }

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// When a transfer that alone would take [begin, begin + bytes / gbps]
// overlaps the other direction's work (busy until other_free, at
// other_gbps), the two move duplex_gbps in all while both run: this one
// gets what the other leaves, at least a tenth of its own rate, and the
// rest at its own rate once the other is done. The other keeps its rate
// (its end was fixed when it was issued). Full duplex without duplex_gbps.
uint64_t TransferEnd(const DeviceProfile& p, uint64_t begin, uint64_t bytes, double gbps, double other_gbps,
                     uint64_t other_free) {
  const uint64_t alone = begin + TransferNs(bytes, gbps);
  if (p.duplex_gbps <= 0 || other_free <= begin || bytes == 0) return alone;
  const double shared = std::max(p.duplex_gbps - other_gbps, 0.1 * gbps);
  if (shared >= gbps) return alone;
  const double during = static_cast<double>(other_free - begin) * shared;  // bytes moved while both run
  if (during >= static_cast<double>(bytes)) return begin + TransferNs(bytes, shared);
  return other_free + TransferNs(bytes - static_cast<uint64_t>(during), gbps);
}

// Copies the resident units `out` of `ch` that lack a valid host copy back
// to the host from `begin` on the D2H engine; returns when that ends (begin
// when nothing moves). Units the host has no pages for yet go at the first
// eviction's rate, the others at d2h_gbps.
uint64_t CopyOut(SharedDevice& d, const ChunkRec& ch, uint32_t out, uint64_t begin, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  const uint32_t dirty = out & ~ch.host_mask;
  const uint64_t first = Bytes(dirty & ~ch.host_pages_mask), again = Bytes(dirty & ch.host_pages_mask);
  c->first_eviction_bytes += first;
  // One transfer where the two rates agree (every version 1 profile): the
  // same nanoseconds, to the last one, as before the eviction was split.
  if (p.first_eviction_gbps == p.d2h_gbps)
    return TransferEnd(p, begin, first + again, p.d2h_gbps, p.h2d_gbps, d.h2d_free());
  const uint64_t mid = TransferEnd(p, begin, first, p.first_eviction_gbps, p.h2d_gbps, d.h2d_free());
  return TransferEnd(p, mid, again, p.d2h_gbps, p.h2d_gbps, d.h2d_free());
}

// The D2H engine's time for dropping `bytes` of read duplicates, per GiB.
uint64_t DuplicateDropNs(const DeviceProfile& p, uint64_t bytes) {
  return UsToNs(p.duplicate_drop_us_per_gib * static_cast<double>(bytes) / kGiB);
}

// Evicts a whole chunk at time t. Units with a valid host copy (read
// duplicates) are dropped; the others are copied back on the D2H engine,
// after which their space frees.
void EvictChunk(SharedDevice& d, uint32_t idx, uint64_t t, UvmCounters* c) {
  ChunkRec& ch = d.chunk(idx);
  const uint32_t resident = ch.resident_mask;
  const uint64_t dirty = Bytes(resident & ~ch.host_mask);
  const uint64_t duplicated = Bytes(resident & ch.host_mask);
  ++c->evictions;
  c->duplicate_dropped_bytes += duplicated;
  if (dirty == 0 && DuplicateDropNs(d.profile(), duplicated) == 0) {
    ch.host_mask |= resident;
    d.DropResident(idx, resident, 0);
    return;
  }
  const uint64_t start = std::max(t, d.d2h_free());
  const uint64_t end = CopyOut(d, ch, resident, start + DuplicateDropNs(d.profile(), duplicated), c);
  ch.host_mask |= resident;
  ch.host_pages_mask |= resident;
  d.d2h_free() = end;
  if (DeviceTrace* trace = DeviceTrace::Get())
    trace->Span(DeviceTrace::Track::kToHost, "eviction (driver)", start, end, dirty);
  d.DropResident(idx, resident, std::max<uint64_t>(end, 1));
  c->evict_d2h_bytes += dirty;
}

// Makes `bytes` of HBM free: first by reclaiming retained units, which
// costs nothing, then by evicting least recently migrated chunks (never
// `exclude`). Returns the time the space is free, or kNoRoom when memory
// nobody may evict (device allocations) fills the device.
uint64_t MakeRoom(SharedDevice& d, uint64_t bytes, uint64_t t, uint32_t exclude, UvmCounters* c) {
  if (bytes > d.capacity()) return kNoRoom;
  d.ApplyReleases(t);
  t = d.ReclaimRetained(bytes, t, exclude);
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

// The density prefetcher: once `units` are brought in, fill every enclosing
// aligned subregion (2, 4, 8, 16, 32 units) that is then more than 51%
// resident. Streaming through a block one big page at a time thus faults at
// units 0, 1, 2, 4, 8 and 16. Returns the extra units to bring in.
uint32_t DensityPrefetch(uint32_t resident, uint32_t valid, uint32_t units) {
  uint32_t have = resident | units;
  for (uint32_t width = 2; width <= kUnitsPerChunk; width *= 2) {
    for (uint32_t first = 0; first < kUnitsPerChunk; first += width) {
      const uint32_t node = (width == 32 ? ~0u : ((1u << width) - 1) << first) & valid;
      if ((units & node) == 0) continue;  // only the subregions around what faulted
      if (std::popcount(have & node) * 100 > 51 * std::popcount(node)) have |= node;
    }
  }
  return have & ~(resident | units);
}

// Learns, once per unit, whether the host wrote `units` of chunk `ch` with
// plain stores, which the simulator cannot see: such a unit's pages are
// mapped in the owner's memory (mincore). Must run in the owning process,
// as every path that populates units does (kernels and prefetches touch only
// their own allocations). When the kernel cannot say, the host is assumed
// to hold data (a transfer: the costlier guess).
void LearnHostWrites(ChunkRec& ch, uint32_t units) {
  const uint32_t unknown = units & ch.valid_mask & ~ch.known_mask;
  if (unknown == 0) return;
  unsigned char vec[kChunk / kPage];
  if (mincore(reinterpret_cast<void*>(ch.va), kChunk, vec) != 0) {
    ch.host_mask |= unknown;
    ch.host_pages_mask |= unknown;
  } else {
    for (uint32_t rest = unknown; rest; rest &= rest - 1) {
      const uint32_t u = std::countr_zero(rest);
      for (uint32_t pg = u * kPagesPerUnit; pg < (u + 1) * kPagesPerUnit; ++pg) {
        if (vec[pg] & 1) {
          ch.host_mask |= 1u << u;
          ch.host_pages_mask |= 1u << u;
          break;
        }
      }
    }
  }
  ch.known_mask |= unknown;
}

// Brings `units` (not resident) of chunk `idx` in from time `begin`: the ones
// with a host copy are copied (the returned copy bytes), the others are
// zero-filled (the returned fill bytes). A read-mostly chunk keeps its host
// copies; otherwise migrating moves them.
struct Populated {
  uint64_t copy_bytes = 0;
  uint64_t fill_bytes = 0;
};
Populated Populate(SharedDevice& d, uint32_t idx, uint32_t units, uint64_t begin) {
  ChunkRec& ch = d.chunk(idx);
  LearnHostWrites(ch, units);
  Populated p{Bytes(units & ch.host_mask), Bytes(units & ~ch.host_mask)};
  ch.host_pages_mask |= ch.host_mask;  // migrating in leaves the host's pages allocated
  ch.host_mask &= ~(units & ~ch.read_mostly_mask);
  d.AddResident(idx, units, begin, begin);
  return p;
}

// Faults of one kernel, serviced a batch at a time. A batch holds up to
// fault_batch_size fault entries; every warp stalled on one waits for the
// whole batch: its evictions, one control-plane round trip, and its copies
// and zero fills.
class FaultBatcher {
 public:
  FaultBatcher(SharedDevice& d, uint64_t start, UvmCounters* c, KernelMemory* m)
      : d_(d), p_(d.profile()), start_(start), c_(c), m_(m) {
    capacity_ = std::max<uint32_t>(1, p_.fault_batch_size / kPagesPerUnit);
  }

  // Queues the faulting units of chunk `idx`; `collapse`: resident read
  // duplicates being written (a fault without data movement).
  void Add(uint32_t idx, uint32_t units, bool collapse) {
    while (units) {
      uint32_t take = 0;
      for (uint32_t i = 0; i < capacity_ - queued_ && units; ++i) {
        const uint32_t bit = units & -units;
        take |= bit;
        units &= ~bit;
      }
      pending_.push_back({idx, take, collapse});
      queued_ += std::popcount(take);
      if (queued_ == capacity_) Flush();
    }
  }

  void Flush() {
    if (pending_.empty()) return;
    const uint64_t now = start_ + m_->stall_ns;
    uint64_t ready = now, copy = 0, fill = 0, collapsed_pages = 0;
    for (const Entry& e : pending_) {
      ChunkRec& ch = d_.chunk(e.idx);
      c_->faults += std::popcount(e.units) * kPagesPerUnit;
      if (e.collapse) {
        ch.host_mask &= ~e.units;
        c_->collapses += std::popcount(e.units);
        collapsed_pages += std::popcount(e.units) * kPagesPerUnit;
        continue;
      }
      const uint32_t missing = e.units & ~ch.resident_mask;  // an earlier batch may have prefetched some
      if (missing == 0) continue;
      const uint32_t bring = missing | DensityPrefetch(ch.resident_mask, ch.valid_mask, missing);
      const uint64_t room = MakeRoom(d_, Bytes(bring & ~ch.retained_mask), now, e.idx, c_);
      if (room == kNoRoom) {  // nothing evictable: serve the rest remotely
        m_->remote_ns += TransferNs(Bytes(missing), p_.h2d_gbps);
        c_->remote_bytes += Bytes(missing);
        continue;
      }
      ready = std::max(ready, room);
      const Populated pop = Populate(d_, e.idx, bring, room);
      copy += pop.copy_bytes;
      fill += pop.fill_bytes;
      brought_.push_back(e.idx);
    }
    uint64_t move = TransferNs(copy, p_.fault_migration_gbps) + TransferNs(fill, p_.first_touch_gbps);
    if (copy) move = std::max(move, UsToNs(p_.fault_min_transfer_us));
    // Collapsing duplicates moves no data, but the driver services those
    // faults a page at a time (measured on an H200: 1.16 s for 64 MiB).
    move += UsToNs(p_.collapse_us_per_page * static_cast<double>(collapsed_pages));
    const uint64_t done = ready + UsToNs(p_.fault_control_us) + move;
    if (DeviceTrace* trace = DeviceTrace::Get())
      trace->Span(DeviceTrace::Track::kFaults, "fault batch", now, done, copy);
    for (uint32_t idx : brought_) d_.chunk(idx).ready_at = std::max(d_.chunk(idx).ready_at, done);
    m_->stall_ns += done - now;
    c_->fault_h2d_bytes += copy;
    c_->first_touch_bytes += fill;
    ++c_->fault_batches;
    pending_.clear();
    brought_.clear();
    queued_ = 0;
  }

 private:
  struct Entry {
    uint32_t idx;
    uint32_t units;
    bool collapse;
  };
  SharedDevice& d_;
  const DeviceProfile& p_;
  const uint64_t start_;
  UvmCounters* const c_;
  KernelMemory* const m_;
  uint32_t capacity_;  // units per batch
  uint32_t queued_ = 0;
  std::vector<Entry> pending_;
  std::vector<uint32_t> brought_;
};

}  // namespace

KernelMemory ServiceAccesses(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t start, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  KernelMemory m;
  FaultBatcher faults(d, start, c, &m);
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t touched = t.units & ch.valid_mask;
    if (touched & ch.resident_mask) m.wait_until = std::max(m.wait_until, ch.ready_at);
    const uint32_t missing = touched & ~ch.resident_mask;
    if (missing == 0) continue;
    if (ch.flags & kRemoteHost) {  // mapped for remote access: read over the link, no fault
      m.remote_ns += TransferNs(Bytes(missing), p.h2d_gbps);
      c->remote_bytes += Bytes(missing);
      continue;
    }
    faults.Add(t.idx, missing, false);
  }
  faults.Flush();
  // Writes land in the device copies: read duplicates collapse (a fault
  // each, no transfer) and no written unit keeps a valid host copy.
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t written = t.written & ch.resident_mask;
    const uint32_t duplicated = written & ch.host_mask;
    if (duplicated) faults.Add(t.idx, duplicated, true);
  }
  faults.Flush();
  c->fault_stall_ns += m.stall_ns;
  return m;
}

// The stream time a prefetch costs before its first byte: the call, and
// more when any of its touches moves data (`moving` says which do).
template <typename Moving>
uint64_t PrefetchSetupNs(const DeviceProfile& p, const std::vector<ChunkTouch>& touches, Moving moving) {
  const bool moves = std::any_of(touches.begin(), touches.end(), moving);
  return UsToNs(p.prefetch_call_us) + (moves ? UsToNs(p.prefetch_move_us) : 0);
}

uint64_t PrefetchToDevice(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  const uint64_t setup = PrefetchSetupNs(p, touches, [&](const ChunkTouch& t) {
    const ChunkRec& ch = d.chunk(t.idx);
    return (t.units & ch.valid_mask & ~ch.resident_mask) != 0;
  });
  const uint64_t issued = t0 + setup;
  uint64_t cursor = std::max(t0, d.h2d_free()) + setup;
  uint64_t fill_cursor = issued;  // zero fills run one after another on the device
  uint64_t done = cursor;
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t bring = t.units & ch.valid_mask & ~ch.resident_mask;
    if (bring == 0) {
      done = std::max(done, ch.ready_at);
      continue;
    }
    // Victims are evicted from the moment the request is issued, back to back
    // on the D2H engine; each chunk's H2D waits only for its own space. The
    // two directions of the link thus overlap (a pipelined swap). Zero fills
    // use no link: they wait only for their space.
    const uint64_t room = MakeRoom(d, Bytes(bring & ~ch.retained_mask), issued, t.idx, c);
    if (room == kNoRoom) continue;  // HBM full of unevictable memory: stays on the host
    const uint64_t begin = std::max(cursor, room);
    const Populated pop = Populate(d, t.idx, bring, begin);
    const uint64_t copied =
        pop.copy_bytes ? TransferEnd(p, begin, pop.copy_bytes, p.h2d_gbps, p.d2h_gbps, d.d2h_free()) : begin;
    if (pop.copy_bytes) cursor = copied;
    if (DeviceTrace* trace = DeviceTrace::Get()) {
      trace->Span(DeviceTrace::Track::kToDevice, "prefetch", begin, copied, pop.copy_bytes);
    }
    if (pop.fill_bytes) fill_cursor = std::max(fill_cursor, room) + TransferNs(pop.fill_bytes, p.first_touch_gbps);
    const uint64_t end = std::max(copied, pop.fill_bytes ? fill_cursor : begin);
    ch.ready_at = std::max(ch.ready_at, end);
    done = std::max(done, end);
    c->prefetch_h2d_bytes += pop.copy_bytes;
    c->first_touch_bytes += pop.fill_bytes;
  }
  d.h2d_free() = std::max(d.h2d_free(), cursor);
  return done;
}

uint64_t PrefetchToHost(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  uint64_t cursor = std::max(t0, d.d2h_free()) + PrefetchSetupNs(p, touches, [&](const ChunkTouch& t) {
                      return (t.units & d.chunk(t.idx).resident_mask) != 0;
                    });
  uint64_t duplicates = 0;  // read duplicates dropped: their host copies are valid
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t out = t.units & ch.resident_mask;
    if (out == 0) continue;
    const uint64_t dirty = Bytes(out & ~ch.host_mask);
    duplicates += Bytes(out & ch.host_mask);
    if (dirty == 0) {
      ch.host_mask |= out;
      d.RetainResident(t.idx, out, 0);
      continue;
    }
    const uint64_t begin = std::max(cursor, ch.ready_at);
    cursor = CopyOut(d, ch, out, begin, c);
    ch.host_mask |= out;
    ch.host_pages_mask |= out;
    if (DeviceTrace* trace = DeviceTrace::Get()) {
      trace->Span(DeviceTrace::Track::kToHost, "prefetch to host", begin, cursor, dirty);
    }
    d.RetainResident(t.idx, out, cursor);
    c->prefetch_d2h_bytes += dirty;
  }
  if (duplicates != 0) cursor += UsToNs(p.duplicate_drop_us) + DuplicateDropNs(p, duplicates);
  c->duplicate_dropped_bytes += duplicates;
  d.d2h_free() = std::max(d.d2h_free(), cursor);
  return cursor;
}

std::optional<uint64_t> MakeRoomForDevice(SharedDevice& d, uint64_t bytes, uint64_t t, UvmCounters* c) {
  const uint64_t room = MakeRoom(d, bytes, t, kNone, c);
  if (room == kNoRoom) return std::nullopt;
  return room;
}

uint64_t Discard(SharedDevice& d, const std::vector<ChunkTouch>& touches, uint64_t t0, UvmCounters* c) {
  const DeviceProfile& p = d.profile();
  uint64_t dropped = 0;
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t out = t.units & ch.resident_mask;
    dropped += Bytes(out);
    ch.host_pages_mask |= ch.host_mask;
    ch.host_mask &= ~t.units;
    ch.known_mask |= t.units & ch.valid_mask;
  }
  c->discarded_bytes += dropped;
  if (p.discard_gbps <= 0 || dropped == 0) {
    for (const ChunkTouch& t : touches) d.RetainResident(t.idx, t.units, 0);
    return t0 + UsToNs(p.api_call_us);
  }
  // A measured discard takes time on the device: its space can be
  // reclaimed once done.
  const uint64_t begin = std::max(t0, d.d2h_free());
  const uint64_t end = begin + TransferNs(dropped, p.discard_gbps);
  d.d2h_free() = end;
  for (const ChunkTouch& t : touches) d.RetainResident(t.idx, t.units, end);
  return end;
}

void HostWrote(SharedDevice& d, const std::vector<ChunkTouch>& touches) {
  for (const ChunkTouch& t : touches) {
    ChunkRec& ch = d.chunk(t.idx);
    const uint32_t units = t.units & ch.valid_mask;
    ch.host_mask = (ch.host_mask & ~(units & ch.resident_mask)) | (units & ~ch.resident_mask);
    ch.host_pages_mask |= units & ~ch.resident_mask;
    ch.known_mask |= units;
  }
}

}  // namespace msim

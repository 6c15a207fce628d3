// Read-mostly advice for the memory manager: which 2 MiB chunks of managed
// memory to advise read-mostly (the driver then keeps a read duplicate on
// the device beside the host copy, so evicting them drops a copy instead of
// moving one) and when to take the advice back (before a launch that writes
// there, which would otherwise collapse the duplicates fault by fault).
// Weights (written once, then read every step) qualify; buffers written and
// read in turn do not, so advice seldom flips (each flip back collapses the
// duplicates). The advice goes by chunk, not by allocation: a caching
// allocator's segment holds weights and activations side by side.
// The state is per chunk (ChunkState, in the allocation map's entries: no
// table of its own); the advisor holds the rules and whether advice may
// still be given. Externally synchronized (the memory manager's). Used by
// the memory manager's pieces (model/).
#pragma once

#include <cstdint>

#include "model/chunk_state.h"
#include "model/template_eval.h"

namespace msched {

class ReadMostlyAdvisor {
 public:
  // Launches that must read a chunk, with no write between, before it is
  // advised read-mostly, where nothing else says it is read-only (Qualifies).
  static constexpr uint32_t kReadsBeforeAdvice = 4;

  // Launch `seq` accesses `units` of chunk `c` in `mode` (once per region
  // that reaches the chunk). A write resets the chunk's count, loses its
  // host copy there and, if the chunk is advised, takes the advice off at
  // once: true, and the caller lists the chunk's range in read_mostly_off.
  // A read counts once per launch. Whether the chunk then qualifies is
  // known only once the launch's other regions are seen (it may also write
  // it): Qualifies, after them.
  bool NoteAccess(AccessMode mode, uint64_t seq, uint32_t units, ChunkState& c) const {
    if (mode != AccessMode::kRead) {
      c.written_at = seq;
      c.reads_since_write = 0;
      c.host_copy &= ~units;
      return TakeOff(c);
    }
    if (c.read_at != seq) {
      c.read_at = seq;
      ++c.reads_since_write;
    }
    return false;
  }
  // Launch `seq` accesses allocation `a` in `mode`: a write to any of it
  // resets its count, and a read counts once per launch. Noted for every
  // region before any of the launch's chunks asks Qualifies.
  void NoteAllocation(AccessMode mode, uint64_t seq, AllocationReads& a) const {
    if (mode != AccessMode::kRead) {
      a.written_at = seq;
      a.since_write = 0;
    } else if (a.read_at != seq) {
      a.read_at = seq;
      ++a.since_write;
    }
  }

  // Whether chunk `c`, after launch `seq`, is to be advised: advice
  // allowed, not advised yet, read since it was last written, not written
  // by `seq`, and read-only as far as can be told: never written by a
  // launch or copy, or not written for longer than the job's loop (`loop`
  // launches, 0 while unknown: weights, old KV-cache entries), or read by
  // kReadsBeforeAdvice launches in a row. The first two advise a weight
  // read once a pass before its second load, so that it is duplicated from
  // then on; buffers written every pass never qualify by them. The caller
  // then advises it (Advise).
  bool Qualifies(uint64_t seq, uint64_t loop, const ChunkState& c) const {
    if (!allowed_ || c.advised || c.written_at == seq || c.reads_since_write == 0) return false;
    return c.written_at == 0 || (loop != 0 && seq - c.written_at > loop) || c.reads_since_write >= kReadsBeforeAdvice;
  }
  // Whether allocation `a`, after launch `seq`, has just been read by
  // kReadsBeforeAdvice launches in a row with no write to any of it (a
  // training step's weights in one buffer: written by the optimizer, then
  // read layer by layer): then every chunk of it that `seq` did not write
  // is advised, read yet or not, so that the loads still to come in the
  // pass are duplicated.
  bool AllocationQualifies(uint64_t seq, const AllocationReads& a) const {
    return allowed_ && a.read_at == seq && a.written_at != seq && a.since_write == kReadsBeforeAdvice;
  }
  static void Advise(ChunkState& c) { c.advised = true; }

  // No advice is given from now on (MemoryManager::ForgoReadMostly says
  // why); what has it must still be taken off, chunk by chunk.
  void Forgo() { allowed_ = false; }
  bool allowed() const { return allowed_; }

  // Takes the advice off chunk `c` if it has it; whether it had it. The
  // driver then collapses the duplicates to the device's copy: the resident
  // units lose their host copies.
  static bool TakeOff(ChunkState& c) {
    if (!c.advised) return false;
    c.advised = false;
    c.host_copy &= ~c.resident;
    return true;
  }

 private:
  bool allowed_ = true;  // until Forgo
};

}  // namespace msched

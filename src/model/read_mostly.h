// Read-mostly advice for the memory manager: which managed allocations to
// advise read-mostly (the driver then keeps a read duplicate on the device
// and a host copy, so evicting them costs no transfer) and when to take the
// advice back (before a write, which would collapse the duplicates fault by
// fault). Weights (written once, then read every step) qualify; buffers
// written and read in turn do not, so advice seldom flips (each flip back
// collapses the duplicates).
// The state is per allocation (ReadMostlyState, kept in the allocation
// map's entries: no table of its own); the advisor holds the rules and whether
// advice may still be given. Externally synchronized (the memory
// manager's). Used by the memory manager's pieces (model/).
#pragma once

#include <cstdint>

#include "model/address_range.h"
#include "model/chunk_state.h"
#include "model/memory_actions.h"
#include "model/template_eval.h"

namespace msched {

class ReadMostlyAdvisor {
 public:
  // Launches that must read an allocation, with no write between, before it
  // is advised read-mostly.
  static constexpr uint32_t kReadsBeforeAdvice = 4;

  // A launch accesses the allocation `whole` (state `s`) in `mode`. A write
  // resets its count and takes advice it has off (listed in
  // out->read_mostly_off); the kReadsBeforeAdvice-th read in a row advises
  // it (out->read_mostly_on), unless advice was forgone.
  void NoteAccess(AccessMode mode, const ByteRange& whole, ReadMostlyState& s, MemoryActions* out) const {
    if (mode != AccessMode::kRead) {
      s.reads_since_write = 0;
      TakeOff(whole, s, out);
    } else if (allowed_ && !s.advised && ++s.reads_since_write >= kReadsBeforeAdvice) {
      s.advised = true;
      out->read_mostly_on.push_back(whole);
    }
  }

  // No advice is given from now on (MemoryManager::ForgoReadMostly says
  // why); what has it must still be taken off, allocation by allocation.
  void Forgo() { allowed_ = false; }
  bool allowed() const { return allowed_; }

  // Takes the advice off the allocation `whole` (state `s`) if it has it,
  // listing it in out->read_mostly_off; whether it had it.
  static bool TakeOff(const ByteRange& whole, ReadMostlyState& s, MemoryActions* out) {
    if (!s.advised) return false;
    s.advised = false;
    out->read_mostly_off.push_back(whole);
    return true;
  }

 private:
  bool allowed_ = true;  // until Forgo
};

}  // namespace msched

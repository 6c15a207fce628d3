// MemoryActions: what the memory manager asks to be done before an
// operation runs (read-mostly advice, evictions, loads), as data that
// JobMemory::Execute carries out through DeviceOps. A plain value type.
// Used by the memory manager's pieces (model/) and JobMemory.
#pragma once

#include <cstdint>
#include <vector>

#include "model/address_range.h"

namespace msched {

// What to do before a launch runs, in order: evictions, then loads.
struct MemoryActions {
  std::vector<ByteRange> evict;  // to host, merged, clipped to allocations
  std::vector<ByteRange> load;   // to device, in access order
  // The operation (launch or copy) these actions prepare, queued right
  // after them; 0 for moves outside one (a time slice's).
  uint64_t op = 0;
  // The latest operation that used a victim and may not have run yet (0:
  // none): the evictions wait for it on the launch stream, and for nothing
  // queued after it.
  uint64_t evict_after = 0;
  uint64_t evict_bytes = 0;
  uint64_t load_bytes = 0;
  uint64_t unserved_bytes = 0;  // predicted but left to fault: over budget alone (counted resident)
  // Allocations to advise read-mostly (read by several launches since they
  // were last written) or no longer (about to be written): applied first.
  std::vector<ByteRange> read_mostly_on, read_mostly_off;
  bool empty() const { return evict.empty() && load.empty() && read_mostly_on.empty() && read_mostly_off.empty(); }
};

}  // namespace msched

// The memory manager's state of managed memory, kept in the allocation
// map's entries (Extent, alloc_map.h) rather than in a table of its own:
// each 2 MiB chunk's residency and use (ChunkState), and each managed
// allocation's standing with the read-mostly advisor (ReadMostlyState).
// Plain data; ChunkTable, NextUsePredictor and ReadMostlyAdvisor give it
// meaning. Externally synchronized (the memory manager's). Used by model/.
#pragma once

#include <cstdint>

#include "model/next_use.h"

namespace msched {

// One 2 MiB chunk of a managed allocation.
struct ChunkState {
  uint32_t resident = 0;  // mask of resident units
  // Units the current plan's demand needs; valid while `epoch` is that
  // plan's (see ResidencyPlanner::Need).
  uint32_t need = 0;
  UseHistory history;  // the launches that used it
  // The last launch that used it or, if later, the launch current when it
  // was loaded for a slice: its recency, for least-recently-used order and
  // for ordering its eviction after queued kernels. (A load is no use: it
  // leaves `history`, from which next uses are predicted, alone.)
  uint64_t last_touch = 0;
  uint64_t epoch = 0;  // the plan whose demand last counted it (dedup)
  // The working set (MemoryManager::TakeWorkingSet's generation) it was
  // last listed in: a stamp instead of a set, so that a launch's bookkeeping
  // touches only the chunk states it reads anyway.
  uint64_t working_set = 0;
};

// One managed allocation's standing with the read-mostly advisor.
struct ReadMostlyState {
  uint32_t reads_since_write = 0;  // launches that read it since one last wrote it
  bool advised = false;            // advised read-mostly
};

}  // namespace msched

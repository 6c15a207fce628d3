// The memory manager's state of managed memory, kept in the allocation
// map's entries (Extent, alloc_map.h) rather than in a table of its own:
// each 2 MiB chunk's residency, use, copies and standing with the
// read-mostly advisor (ChunkState), and each allocation's reads
// (AllocationReads). Plain data; ChunkTable,
// NextUsePredictor, ReadMostlyAdvisor and ResidencyPlanner give it meaning.
// Externally synchronized (the memory manager's). Used by model/.
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
  // Units that hold a valid copy in host memory as far as msched knows: an
  // eviction leaves one, a load keeps it only while the chunk is advised
  // read-mostly (the driver then duplicates), and a write, a load without
  // the advice or the advice's removal loses it. Evicting a resident unit
  // that has one drops it instead of copying it back, so the planner
  // prefers such victims. An estimate: wrong, it costs time, never data
  // (the driver copies back whatever it must).
  uint32_t host_copy = 0;
  // Read-mostly standing (ReadMostlyAdvisor): launches that read the chunk
  // since one last wrote it, whether it is advised, and the last launch
  // that read it and that wrote it (each launch counts once).
  uint32_t reads_since_write = 0;
  bool advised = false;
  uint64_t read_at = 0;
  uint64_t written_at = 0;
};

// One managed allocation's reads since a launch last wrote any of it, each
// launch counted once (ReadMostlyAdvisor): the evidence that a chunk of an
// allocation read by launch after launch with no write (a model's weights
// in one buffer) is read-only before the chunk itself was read that often.
struct AllocationReads {
  uint32_t since_write = 0;
  uint64_t read_at = 0;
  uint64_t written_at = 0;
};

}  // namespace msched

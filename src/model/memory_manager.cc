#include "model/memory_manager.h"

namespace msched {

void MemoryManager::Access(const std::vector<PredictedRegion>& regions, uint64_t seq, bool launch, MemoryActions* out,
                           Granularity granularity) {
  // The launch's signature: which memory it accesses, named by allocation
  // and place in it rather than by address, so that the same program
  // numbers its launches alike in every run (addresses move with the
  // address-space layout). A region covers runs of consecutive chunks (one
  // run per allocation it reaches), each whole but for its first and last:
  // those two chunks with their units name the run, at a cost per run
  // rather than per chunk.
  // What each chunk records is idempotent within a call (a chunk can lie in
  // two regions): its use by launch `seq`, its recency, its listing in the
  // working set.
  LaunchSignature signature;
  bool missing = false;
  // Read-mostly advice: each region's allocation is noted first (its count
  // must know of every write the launch makes to it), and the chunks that
  // qualify are advised only once every region is seen (one region may
  // write a chunk another reads).
  const uint64_t loop = predictor_.loop_interval();
  std::vector<ChunkId> qualified;  // stays empty (no allocation) on the common path
  bool whole_allocation = false;   // some allocation may qualify whole (AllocationQualifies)
  if (launch) {
    for (const PredictedRegion& pr : regions) {
      Extent* a = table_.Find(pr.range.begin);
      if (a == nullptr) continue;
      advisor_.NoteAllocation(pr.mode, seq, a->reads);
      whole_allocation = whole_allocation || advisor_.AllocationQualifies(seq, a->reads);
    }
  }
  for (const PredictedRegion& pr : regions) {
    signature.Mix(static_cast<uint64_t>(pr.mode));
    ChunkId first = 0, last = 0;
    uint32_t first_units = 0, last_units = 0;  // a chunk visited has at least one unit
    const auto mix_run = [&] {
      if (first_units == 0) return;
      signature.Mix(first);
      signature.Mix(first_units);
      signature.Mix(last);
      signature.Mix(last_units);
    };
    table_.ForEachChunk(pr.range, [&](ChunkId id, ChunkState& c, uint32_t units) {
      if (first_units == 0 || id != last + 1) {  // the region's first chunk, or another allocation's
        mix_run();
        first = id, first_units = units;
      }
      last = id, last_units = units;
      if (launch) {
        c.history.Record(seq);
        if (advisor_.NoteAccess(pr.mode, seq, units, c)) ListChunk(id, &out->read_mostly_off);
        if (advisor_.Qualifies(seq, loop, c)) qualified.push_back(id);
      }
      c.last_touch = seq;  // seq only grows: a load uses the latest launch's
      if (c.working_set != working_set_generation_) {
        c.working_set = working_set_generation_;
        working_set_.push_back(id);
      }
      missing = missing || (units & ~c.resident) != 0;
    });
    mix_run();
  }
  if (launch) predictor_.NoteLaunch(signature.value(), seq);
  for (ChunkId id : qualified) {
    ChunkTable::ChunkRef ref;
    if (!table_.Lookup(id, &ref) || !advisor_.Qualifies(seq, loop, ref.chunk())) continue;  // twice, or written
    ReadMostlyAdvisor::Advise(ref.chunk());
    ChunkTable::AppendChunkRange(*ref.alloc, ref.index, &out->read_mostly_on);
  }
  if (whole_allocation) AdviseWholeAllocations(regions, seq, out);
  // The common path ends here: everything resident, within the budget. Only
  // a plan needs the demand (each chunk once, with the units it needs), so
  // only then are the chunks walked again to list it.
  if (!planner_.NeedsPlan(missing)) return;
  planner_.BeginDemand();
  for (const PredictedRegion& pr : regions) {
    table_.ForEachChunk(pr.range, [&](ChunkId id, ChunkState& c, uint32_t units) { planner_.Need(id, c, units); });
  }
  if (planner_.PlanDemand(missing, granularity, out) && launch) out->op = seq;
}

void MemoryManager::PlanLoad(const std::vector<ByteRange>& ranges, MemoryActions* out) {
  std::vector<PredictedRegion> regions;
  for (const ByteRange& r : ranges) regions.push_back({r, AccessMode::kRead});
  Access(regions, predictor_.latest(), /*launch=*/false, out);
  // Loading is not using: the next working set counts what launches touch.
  working_set_.clear();
  ++working_set_generation_;
}

void MemoryManager::AdviseWholeAllocations(const std::vector<PredictedRegion>& regions, uint64_t seq,
                                           MemoryActions* out) {
  // The allocations are found again here, off the common path: a region
  // after the one that reached the count may have written it since.
  for (const PredictedRegion& pr : regions) {
    Extent* a = table_.Find(pr.range.begin);
    if (a == nullptr || !advisor_.AllocationQualifies(seq, a->reads)) continue;
    ++a->reads.since_write;  // advised whole once: a second region of it finds it counted past
    for (size_t i = 0; i < a->chunks.size(); ++i) {
      ChunkState& c = a->chunks[i];
      if (c.advised || c.written_at == seq) continue;
      ReadMostlyAdvisor::Advise(c);
      ChunkTable::AppendChunkRange(*a, i, &out->read_mostly_on);
    }
  }
}

void MemoryManager::ListChunk(ChunkId id, std::vector<ByteRange>* ranges) {
  ChunkTable::ChunkRef ref;
  if (table_.Lookup(id, &ref)) ChunkTable::AppendChunkRange(*ref.alloc, ref.index, ranges);
}

void MemoryManager::TakeAllReadMostlyOff(bool evict, MemoryActions* out) {
  table_.ForEachAllocation([&](Extent& a) {
    for (size_t i = 0; i < a.chunks.size(); ++i) {
      ChunkState& c = a.chunks[i];
      if (!ReadMostlyAdvisor::TakeOff(c)) continue;
      ChunkTable::AppendChunkRange(a, i, &out->read_mostly_off);
      if (!evict) continue;
      c.reads_since_write = 0;
      ChunkTable::AppendChunkRange(a, i, &out->evict);
    }
  });
}

void MemoryManager::ForgoReadMostly(MemoryActions* out) {
  advisor_.Forgo();
  TakeAllReadMostlyOff(/*evict=*/false, out);
}

void MemoryManager::Invalidate(const MemoryActions& actions) {
  table_.SetResidency(actions.load, /*resident=*/false);  // a failed load left its data on the host
  table_.SetResidency(actions.evict, /*resident=*/true);  // a failed eviction left its data on the device
}

std::vector<ByteRange> MemoryManager::TakeWorkingSet() {
  std::vector<ByteRange> ranges;
  for (ChunkId id : working_set_) {
    ChunkTable::ChunkRef ref;
    if (table_.Lookup(id, &ref)) ranges.push_back(ChunkTable::ChunkRange(*ref.alloc, ref.index));
  }
  working_set_.clear();
  ++working_set_generation_;
  return table_.MergeWithinAllocations(ranges);
}

}  // namespace msched

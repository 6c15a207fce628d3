#include "model/memory_manager.h"

namespace msched {

void MemoryManager::Access(const std::vector<PredictedRegion>& regions, uint64_t seq, bool launch, MemoryActions* out,
                           Granularity granularity) {
  for (const PredictedRegion& pr : regions) {
    if (Extent* a = table_.Find(pr.range.begin)) {
      advisor_.NoteAccess(pr.mode, a->range(), a->read_mostly, out);
    }
  }
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
      if (launch) c.history.Record(seq);
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

void MemoryManager::DropReadMostly(MemoryActions* out) {
  table_.ForEachAllocation([&](Extent& a) {
    if (!ReadMostlyAdvisor::TakeOff(a.range(), a.read_mostly, out)) return;
    a.read_mostly.reads_since_write = 0;
    out->evict.push_back(a.range());
  });
}

void MemoryManager::ForgoReadMostly(MemoryActions* out) {
  advisor_.Forgo();
  table_.ForEachAllocation([&](Extent& a) { ReadMostlyAdvisor::TakeOff(a.range(), a.read_mostly, out); });
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

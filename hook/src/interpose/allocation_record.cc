#include "interpose/allocation_record.h"

#include "observe/profile_recorder.h"

namespace msched::hook {

void RecordAllocation(Runtime& rt, CUdeviceptr base, size_t size, AllocKind kind) {
  if (!rt.job().RecordAllocation(base, size, kind).ok()) return;
  HookCounters& c = rt.counters();
  c.alloc_count->Add();
  c.alloc_bytes->Add(size);
  if (ProfileRecorder* p = ProfileRecorder::Get(rt)) p->Alloc(base, size);
}

void ForgetAllocation(Runtime& rt, CUdeviceptr base) {
  if (!rt.job().ForgetAllocation(base).ok()) return;
  if (ProfileRecorder* p = ProfileRecorder::Get(rt)) p->Free(base);
}

}  // namespace msched::hook

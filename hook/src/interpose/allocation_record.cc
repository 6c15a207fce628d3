#include "interpose/allocation_record.h"

#include "client/coord_client.h"
#include "interpose/hook_guard.h"
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

void RecordShared(Runtime& rt, CUdeviceptr base, size_t size) {
  RecordAllocation(rt, base, size, AllocKind::kPinned);
  rt.AddShared(static_cast<int64_t>(size));
}

bool ForgetShared(Runtime& rt, CUdeviceptr base) {
  const Allocation* a = rt.allocs().Find(base);
  if (a == nullptr || a->base != base || a->kind != AllocKind::kPinned) return false;
  rt.AddShared(-static_cast<int64_t>(a->size));
  ForgetAllocation(rt, base);
  return true;
}

CUresult Admit(Runtime& rt, size_t bytes) {
  Status s;
  Safely(rt, "registering with the coordinator", [&] {
    if (CoordClient* cc = CoordClient::Get(rt)) s = cc->Register(rt, bytes);
  });
  if (s.ok()) return CUDA_SUCCESS;
  return s.code() == StatusCode::kResourceExhausted ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_PERMITTED;
}

void ReportUsage(Runtime& rt, uint64_t coming) {
  if (CoordClient* cc = CoordClient::Get(rt)) cc->ReportUsage(coming);
}

}  // namespace msched::hook

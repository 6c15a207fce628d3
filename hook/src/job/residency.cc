#include "job/residency.h"

#include "job/cuda_device_ops.h"
#include "job/device_env.h"
#include "observe/job_trace.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

// CudaDeviceOps for the calling thread's context, looked up at the first
// transfer: a launch whose data is already resident asks the driver nothing.
class CurrentContextOps : public DeviceOps {
 public:
  Status Prefetch(const ByteRange& r, bool to_device) override {
    return Ops() ? ops_->Prefetch(r, to_device) : ops_.status();
  }
  Status MarkQueued(StreamHandle s, uint64_t next) override {
    return Ops() ? ops_->MarkQueued(s, next) : ops_.status();
  }
  Status EvictionsAfter(StreamHandle s, uint64_t op) override {
    return Ops() ? ops_->EvictionsAfter(s, op) : ops_.status();
  }
  Status LoadsAfterEvictions() override { return Ops() ? ops_->LoadsAfterEvictions() : ops_.status(); }
  Status StreamAfterTransfers(StreamHandle s) override { return Ops() ? ops_->StreamAfterTransfers(s) : ops_.status(); }
  Status SynchronizeTransfers() override { return Ops() ? ops_->SynchronizeTransfers() : ops_.status(); }
  uint64_t NowNs() override { return DeviceEnv::Get().Now(); }
  Status SetReadMostly(const ByteRange& r, bool on) override {
    return Ops() ? ops_->SetReadMostly(r, on) : ops_.status();
  }

 private:
  bool Ops() {
    if (!looked_up_) ops_ = CudaDeviceOps::ForCurrentContext(), looked_up_ = true;
    return ops_.ok();
  }
  bool looked_up_ = false;
  Result<CudaDeviceOps> ops_ = Status::Unavailable("not looked up");
};

void Count(Runtime& rt, const MoveOutcome& out) {
  HookCounters& c = rt.counters();
  c.bytes_prefetched->Add(out.loaded);
  c.bytes_evicted->Add(out.evicted);
  c.bytes_unserved->Add(out.unserved);
  if (!out.status.ok()) {
    c.prefetch_errors->Add();
    LogOnce("prefetch", spdlog::level::warn,
            "prefetch failed (" + out.status.ToString() + "); data will fault in instead");
  }
}

}  // namespace

void PrepareResidency(Runtime& rt, const std::vector<PredictedRegion>& regions, CUstream stream, JobMemory::Load load) {
  if (regions.empty() || rt.AnyCapturing()) return;
  if (load == JobMemory::Load::kPrefetch) {
    uint64_t predicted = 0;
    for (const PredictedRegion& r : regions) predicted += r.range.size();
    rt.counters().bytes_predicted->Add(predicted);
  }
  rt.LearnDeviceMemory();
  if (rt.job().budget().Total() == 0) return;  // no context yet to ask: nothing can be planned
  rt.LaunchedOn(stream);
  CurrentContextOps ops;
  const MoveOutcome out = rt.job().MakeResident(regions, rt.NextSeq(), CudaDeviceOps::Handle(stream), ops, load);
  Count(rt, out);
  JobTrace* trace = JobTrace::Active();
  if (trace != nullptr && (out.loaded > 0 || out.evicted > 0)) trace->Prefetch(out.loaded, out.evicted);
}

void ForgoReadMostly(Runtime& rt) {
  if (rt.read_mostly_forgone()) return;  // the common case: done once already
  if (!rt.TakeReadMostlyBack()) return;
  MoveMemory(rt, [&](DeviceOps& ops) MSCHED_REQUIRES(rt.mu()) { return rt.job().ForgoReadMostly(ops); });
}

uint64_t DeviceResidentBytes(Runtime& rt) {
  if (std::optional<uint64_t> counted = DeviceEnv::Get().ResidentBytes()) return *counted;
  return rt.job().manager().resident_bytes();
}

void NoteOverBudget(Runtime& rt) {
  rt.counters().peak_over_budget->Max(rt.job().budget().Over(DeviceResidentBytes(rt)));
}

MoveOutcome MoveMemory(Runtime& rt, const std::function<MoveOutcome(DeviceOps&)>& move) {
  CurrentContextOps ops;
  const MoveOutcome out = move(ops);
  Count(rt, out);
  return out;
}

}  // namespace msched::hook

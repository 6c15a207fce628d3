// The "serve" step (ServeSpec in workload.h): a service answering a seeded
// trace of requests, one at a time, optionally swapping models in and out.
#include <algorithm>
#include <tuple>

#include "msched/seeded_draws.h"
#include "msim/msim.h"
#include "workload_runner.h"

namespace msim {

// Arrival times count from the device clock's start, so that processes
// started together see one trace.
msched::Status Runner::Serve(const Step& s) {
  const ServeSpec& sp = *s.serve;
  int64_t requests = 0, per_s = 0, models = 0, mine = 0;
  for (auto [e, what, out] : {std::tuple{&sp.requests, "requests", &requests}, std::tuple{&sp.per_s, "per_s", &per_s},
                              std::tuple{&sp.models, "models", &models}, std::tuple{&sp.model, "model", &mine}}) {
    Result<int64_t> v = Eval(*e, what);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (requests < 0 || per_s <= 0 || models < 1 || mine < -1 || mine >= models) {
    return Status::InvalidArgument("serve: needs requests >= 0, per_s > 0, models >= 1 and model from -1 to models-1");
  }
  const bool swapping = !sp.swap_buffers.empty();
  if (swapping && static_cast<int64_t>(sp.swap_buffers.size()) < models) {
    return Status::InvalidArgument("serve: one swap buffer per model");
  }
  int64_t resident = 0;
  if (swapping) {
    Result<int64_t> v = Eval(sp.resident, "resident");
    if (!v.ok()) return v.status();
    resident = *v;
    if (resident < 1) return Status::InvalidArgument("serve: swap.resident must be at least 1");
  }
  Result<int64_t> seed = Eval(sp.seed, "seed");
  if (!seed.ok()) return seed.status();
  msched::SeededDraws draws(static_cast<uint64_t>(*seed));  // one trace per seed, anywhere
  double arrival_ns = 0;
  std::vector<std::string> held;  // swap buffers allocated, least recently used first
  for (int64_t i = 0; i < requests; ++i) {
    arrival_ns += draws.ExponentialGapS(static_cast<double>(per_s)) * 1e9;
    const int64_t model =
        std::min<int64_t>(models - 1, static_cast<int64_t>(draws.Uniform() * static_cast<double>(models)));
    if (mine >= 0 && model != mine) continue;
    const uint64_t arrival = static_cast<uint64_t>(arrival_ns);
    if (Now() < arrival) msimAdvanceTo(arrival);
    if (swapping) MSCHED_RETURN_IF_ERROR(Load(sp, sp.swap_buffers[model], resident, &held));
    if (!sp.var.empty()) vars_[sp.var] = model;
    MSCHED_RETURN_IF_ERROR(Exec(s.body));
    MSCHED_RETURN_IF_ERROR(Check(cuCtxSynchronize(), "answering request " + std::to_string(i)));
    latencies_.push_back(Now() - arrival);
  }
  if (swapping) aliases_.erase(sp.swap_as);
  return Status::Ok();
}

// Makes model buffer `name` the one the body names sp.swap_as, as a
// model-swapping server does: when it is not loaded, the least recently
// used are freed while `resident` are held, and it is allocated and
// copied in from the host.
msched::Status Runner::Load(const ServeSpec& sp, const std::string& name, int64_t resident,
                            std::vector<std::string>* held) {
  const auto it = std::find(held->begin(), held->end(), name);
  if (it != held->end()) {
    held->erase(it);
  } else {
    while (!held->empty() && static_cast<int64_t>(held->size()) >= resident) {
      Result<CUresult> freed = Free(held->front());
      if (!freed.ok()) return freed.status();
      MSCHED_RETURN_IF_ERROR(Check(*freed, "unloading " + held->front()));
      ptrs_.erase(held->front());
      held->erase(held->begin());
    }
    Result<const BufferSpec*> spec = Spec(name);
    if (!spec.ok()) return spec.status();
    MSCHED_RETURN_IF_ERROR(Alloc(**spec));
    Result<Span> dst = Buffer(name);
    if (!dst.ok()) return dst.status();
    Result<Span> src = Buffer(sp.swap_from);
    if (!src.ok()) return src.status();
    const uint64_t bytes = std::min(dst->second, src->second);
    MSCHED_RETURN_IF_ERROR(
        Check(cuMemcpyHtoD(dst->first, reinterpret_cast<const void*>(src->first), bytes), "loading " + name));
  }
  held->push_back(name);
  aliases_[sp.swap_as] = name;
  return Status::Ok();
}

}  // namespace msim

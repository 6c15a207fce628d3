#include "coord/admission.h"

#include <algorithm>
#include <tuple>

#include "msched/config.h"

namespace msched {

void JobHistory::Record(const std::string& name, uint64_t run_ns) {
  auto [it, fresh] = mean_ns_.emplace(name, static_cast<double>(run_ns));
  if (!fresh) it->second = 0.7 * it->second + 0.3 * static_cast<double>(run_ns);
}

bool JobHistory::IsShort(const Job& j, uint64_t threshold_ns) const {
  if (j.job_class != JobClass::kUnset) return j.job_class == JobClass::kShort;
  auto it = mean_ns_.find(j.name);
  return it != mean_ns_.end() && it->second < static_cast<double>(threshold_ns);
}

MemoryLimits LimitsFor(const SchedulerOptions& o) {
  MemoryLimits m{UINT64_MAX, o.host_bytes};
  if (o.hbm_bytes > 0) {
    const long double limit = static_cast<long double>(o.hbm_bytes) * o.oversubscribe;
    m.admit_limit = limit >= static_cast<long double>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(limit);
  }
  return m;
}

std::string NeverFits(const Job& j, const SchedulerOptions& o) {
  const MemoryLimits m = LimitsFor(o);
  const uint64_t need = j.Footprint();
  // More than the GPU serves time-sliced is not a reason: such a job runs
  // alone (AdmitWaiting). Where evicted data lives is.
  if (need > m.host_limit) {
    return "needs " + FormatBytes(need) + ", more than the host memory msched may use to hold evicted data (" +
           FormatBytes(m.host_limit) + ")";
  }
  return "";
}

std::vector<Job*> RankWaiting(std::map<uint64_t, Job>& jobs, uint64_t now, const SchedulerOptions& o,
                              const JobHistory& history) {
  std::vector<Job*> waiting;
  for (auto& [id, j] : jobs) {
    if (j.state == JobState::kWaiting) waiting.push_back(&j);
  }
  auto key = [&](const Job* j) {
    const uint64_t waited = now > j->submitted_ns ? now - j->submitted_ns : 0;
    const int64_t aged = j->priority + static_cast<int64_t>(o.aging_ns ? waited / o.aging_ns : 0);
    // Larger is better except for the arrival order and id (first come first served).
    return std::make_tuple(-aged, history.IsShort(*j, o.short_threshold_ns) ? 0 : 1, j->submitted_ns, j->id);
  };
  std::sort(waiting.begin(), waiting.end(), [&](const Job* a, const Job* b) { return key(a) < key(b); });
  return waiting;
}

namespace {

// What the admitted jobs hold: the footprints of the running ones, and of
// the running and paused ones (whose evicted data the host keeps).
struct Held {
  uint64_t admitted = 0, held = 0;
  size_t running = 0;
};

Held HeldBy(const std::map<uint64_t, Job>& jobs) {
  Held h;
  for (const auto& [id, j] : jobs) {
    if (j.state == JobState::kRunning) h.admitted += j.Footprint(), ++h.running;
    if (j.state == JobState::kRunning || j.state == JobState::kPaused) h.held += j.Footprint();
  }
  return h;
}

// Whether a job of footprint `need` may run beside what `h` holds. Until
// the GPU's size is known, jobs run one at a time. A job declared larger
// than the GPU serves even time-sliced (--oversubscribe x HBM) runs alone,
// paging beyond its grant, as an undeclared job that grows that large does;
// while it runs, its footprint keeps the others out.
bool Fits(uint64_t need, const Held& h, const MemoryLimits& m, const SchedulerOptions& o) {
  const bool host_fits = need <= m.host_limit - std::min(h.held, m.host_limit);
  return o.hbm_bytes == 0       ? h.running == 0
         : need > m.admit_limit ? h.running == 0 && host_fits
                                : need <= m.admit_limit - std::min(h.admitted, m.admit_limit) && host_fits;
}

}  // namespace

std::vector<uint64_t> AdmitWaiting(std::map<uint64_t, Job>& jobs, uint64_t now, const SchedulerOptions& o,
                                   const JobHistory& history) {
  const MemoryLimits m = LimitsFor(o);
  Held h = HeldBy(jobs);
  std::vector<uint64_t> out;
  for (Job* j : RankWaiting(jobs, now, o, history)) {
    const uint64_t need = j->Footprint();
    if (Fits(need, h, m, o)) {
      j->state = JobState::kRunning;
      if (!j->was_admitted) j->admitted_ns = now;  // a resumed job keeps its first admission
      j->was_admitted = true;
      h.admitted += need, h.held += need, ++h.running;
      out.push_back(j->id);
    } else if (now - std::min(now, j->submitted_ns) >= o.reserve_after_ns) {
      break;  // it has waited long enough: the memory that frees up is its
    }
  }
  return out;
}

bool FitsOnResume(const std::map<uint64_t, Job>& jobs, const Job& paused, const SchedulerOptions& o) {
  Held h = HeldBy(jobs);
  h.held -= std::min(h.held, paused.Footprint());  // counted there while paused
  return Fits(paused.Footprint(), h, LimitsFor(o), o);
}

}  // namespace msched

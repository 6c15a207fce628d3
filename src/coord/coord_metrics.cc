#include "coord/coord_metrics.h"

#include "coord/status_report.h"
#include "msched/config.h"

#include <algorithm>
#include <utility>

namespace msched {
namespace {

// A job can report any figure: sums saturate rather than wrap.
void AddSaturating(uint64_t* sum, uint64_t n) { *sum = n > UINT64_MAX - *sum ? UINT64_MAX : *sum + n; }

// Adds the rise from `*last` to `now` to `*sum`; `*last` keeps the largest
// figure seen, so a report that goes down (a bug, or a hostile job) adds
// nothing now and nothing again when it climbs back.
void AddRise(uint64_t now, uint64_t* last, uint64_t* sum) {
  if (now <= *last) return;
  AddSaturating(sum, now - *last);
  *last = now;
}

// From registering to admission, or to `now` while it waits.
uint64_t WaitedNs(const Job& j, uint64_t now) {
  const uint64_t until = j.was_admitted ? j.admitted_ns : now;
  return until - std::min(until, j.submitted_ns);
}

}  // namespace

CoordMetrics::CoordMetrics(std::string version, double start_time_seconds, bool job_names)
    : version_(std::move(version)), start_time_seconds_(start_time_seconds), job_names_(job_names) {}

void CoordMetrics::Sync(const Scheduler& s) {
  changed_ = true;
  const uint64_t now = s.now();
  auto end_turn = [&](Tracked& t) {
    t.on_gpu = false;
    slice_seconds_.Observe(static_cast<double>(now - std::min(now, t.turn_start)) / 1e9);
  };
  for (const auto& [id, j] : s.jobs()) {
    auto [it, fresh] = jobs_.try_emplace(id);
    Tracked& t = it->second;
    if (fresh) ++submitted_;
    if (j.was_admitted && !t.admitted) {
      t.admitted = true;
      ++admissions_;
      AddSaturating(&admission_wait_ns_, WaitedNs(j, now));
    }
    const bool on_gpu = j.state == JobState::kRunning && j.active;
    if (on_gpu && !t.on_gpu) {
      t.on_gpu = true;
      t.turn_start = now;
    } else if (!on_gpu && t.on_gpu) {
      end_turn(t);
    }
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (s.Find(it->first) != nullptr) {
      ++it;
      continue;
    }
    if (it->second.on_gpu) end_turn(it->second);
    it = jobs_.erase(it);
  }
}

void CoordMetrics::Stopped(const Scheduler& s, uint64_t id, const proto::Stopped& m) {
  changed_ = true;
  const Job* j = s.Find(id);
  if (j == nullptr) return;
  AddSaturating(&swap_in_bytes_, m.loaded);
  if (j->resident > m.resident) AddSaturating(&swap_out_bytes_, j->resident - m.resident);
}

void CoordMetrics::Counted(uint64_t id, const proto::JobCounters& c) {
  changed_ = true;
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;  // not registered yet: Sync has not seen it
  AddRise(c.faults, &it->second.reported.faults, &faults_);
  AddRise(c.prefetched, &it->second.reported.prefetched, &prefetched_bytes_);
}

MetricsSnapshot CoordMetrics::Snapshot(const Scheduler& s) {
  changed_ = false;
  MetricsSnapshot m;
  m.version = version_;
  m.start_time_seconds = start_time_seconds_;
  m.hbm_bytes = s.options().hbm_bytes;
  m.link_bytes_per_second = s.link_bytes_per_ns() * 1e9;
  m.jobs_submitted = submitted_;
  m.groups = s.group_count();
  m.switches = s.switches();
  m.swap_in_bytes = swap_in_bytes_;
  m.swap_out_bytes = swap_out_bytes_;
  m.admissions = admissions_;
  m.admission_wait_ns = admission_wait_ns_;
  m.faults = faults_;
  m.prefetched_bytes = prefetched_bytes_;
  m.slice_seconds = slice_seconds_;
  m.job_names = job_names_;
  for (const auto& [id, j] : s.jobs()) {
    switch (j.state) {
      case JobState::kWaiting: ++m.jobs_waiting; break;
      case JobState::kRunning: ++m.jobs_running; break;
      case JobState::kPaused: ++m.jobs_paused; break;
      case JobState::kFinished: continue;
    }
    JobMetrics jm;
    jm.id = id;
    jm.uid = j.uid;
    if (job_names_) jm.name = j.name;  // never copied out unless published
    jm.declared_bytes = j.declared;
    jm.allocated_bytes = j.allocated;
    jm.resident_bytes = j.resident;
    jm.budget_bytes = j.budget;
    jm.peak_over_budget_bytes = j.peak_over_budget;
    jm.shared_bytes = j.shared;
    jm.waited_ns = WaitedNs(j, s.now());
    jm.on_gpu = j.active;
    jm.run_state = RunStateOf(j);
    jm.wait_reason = WaitReasonName(WaitReasonOf(j, s.jobs()));
    jm.job_class = JobClassName(j.job_class);
    jm.priority = j.priority;
    if (auto t = jobs_.find(id); t != jobs_.end()) {
      jm.faults = t->second.reported.faults;
      jm.prefetched_bytes = t->second.reported.prefetched;
    }
    m.jobs.push_back(std::move(jm));
  }
  return m;
}

}  // namespace msched

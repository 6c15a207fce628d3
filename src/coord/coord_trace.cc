#include "coord/coord_trace.h"

#include <algorithm>
#include <set>
#include <string>

#include "msched/trace_layout.h"

namespace msched {
namespace {

using json = nlohmann::json;

// The span job `j` is in: nullptr once it finished. A job the scheduler
// awaits that is not on the GPU owes the answer to a stop.
const char* StateOf(const Scheduler& s, const Job& j, const std::set<uint64_t>& awaiting) {
  const bool draining = awaiting.count(j.id) > 0 && !j.active;
  switch (j.state) {
    case JobState::kWaiting: return trace::kWaitingAdmission;
    case JobState::kPaused: return draining ? trace::kDraining : trace::kPaused;
    case JobState::kFinished: return nullptr;
    case JobState::kRunning:
      if (s.MayRun(j)) return trace::kRunning;
      if (draining) return trace::kDraining;
      return j.idle ? trace::kIdle : trace::kWaitingTurn;
  }
  return nullptr;
}

// How long `bytes` take at the link rate the scheduler measured.
uint64_t AtLinkRate(uint64_t bytes, double link_bytes_per_ns) {
  return static_cast<uint64_t>(static_cast<double>(bytes) / std::max(link_bytes_per_ns, 1e-3));
}

}  // namespace

CoordTrace::CoordTrace(std::unique_ptr<trace::Writer> writer) : writer_(std::move(writer)) {
  writer_->Write(trace::ProcessName(trace::kGpuPid, "GPU (mschedd)"));
  writer_->Write(trace::ThreadName(trace::kGpuPid, trace::kLinkToDeviceTid, "link host to device (swap-ins)"));
  writer_->Write(trace::ThreadName(trace::kGpuPid, trace::kLinkToHostTid, "link device to host (swap-outs)"));
}

CoordTrace::Track& CoordTrace::TrackOf(const Scheduler& s, uint64_t id) {
  auto [it, fresh] = tracks_.try_emplace(id);
  if (fresh) {
    const Job* j = s.Find(id);
    Track& t = it->second;
    t.pid = j ? j->pid : 0;
    t.priority = j ? j->priority : 0;
    const std::string name = j ? j->name : "?";
    writer_->Write(trace::ProcessName(t.pid, "job " + std::to_string(id) + ": " + name));
    writer_->Write(trace::ThreadName(t.pid, trace::kJobStateTid, "state (mschedd)"));
  }
  return it->second;
}

void CoordTrace::Sync(const Scheduler& s) {
  const uint64_t now = s.now();
  const std::set<uint64_t> awaiting = s.Awaiting();
  for (const auto& [id, j] : s.jobs()) {
    Track& t = TrackOf(s, id);
    if (j.was_admitted && !t.admitted) {
      t.admitted = true;
      Instant(t, "admitted", now, {{"job", id}, {"footprint_bytes", j.Footprint()}});
    }
    if (j.priority != t.priority) {
      Instant(t, "priority changed", now, {{"job", id}, {"from", t.priority}, {"to", j.priority}});
      t.priority = j.priority;
    }
    const char* state = StateOf(s, j, awaiting);
    if (state == nullptr) UnreportedLoad(id, t, s.link_bytes_per_ns());
    if (state != t.state) {
      EndSpan(id, t, now);
      t.state = state;
      t.since = now;
    }
  }
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    if (s.Find(it->first) != nullptr) {
      ++it;
      continue;
    }
    EndSpan(it->first, it->second, now);
    UnreportedLoad(it->first, it->second, s.link_bytes_per_ns());
    it = tracks_.erase(it);
  }
}

void CoordTrace::Sent(const Scheduler& s, const Commands& commands) {
  for (const Command& c : commands) {
    Track& t = TrackOf(s, c.job);
    if (const auto* refused = std::get_if<proto::Refused>(&c.order)) {
      Instant(t, "refused", s.now(), {{"job", c.job}, {"reason", refused->reason}});
    } else if (const auto* stop = std::get_if<proto::Stop>(&c.order);
               stop && stop->reason == proto::StopReason::kPreempt) {
      Instant(t, "preempted", s.now(), {{"job", c.job}});
    } else if (const auto* go = std::get_if<proto::Go>(&c.order); go && go->load) {
      const Job* j = s.Find(c.job);
      t.load_from = go->start_ns;
      t.load_estimate = j ? std::min(j->WorkingSetEstimate(), go->budget) : 0;
    }
  }
}

void CoordTrace::Stopped(const Scheduler& s, uint64_t id, const proto::Stopped& m) {
  const Job* j = s.Find(id);
  if (j == nullptr) return;
  Track& t = TrackOf(s, id);
  if (m.loaded > 0) {
    const uint64_t from = t.load_from != 0 ? t.load_from : m.now_ns - std::min(m.now_ns, m.load_ns);
    Link(trace::kLinkToDeviceTid, "swap-in", from, m.load_ns,
         {{"job", id}, {"name", j->name}, {"bytes", m.loaded}, {"duration", "measured by the job"}});
  }
  t.load_from = 0;  // reported (a load that found its data resident moved nothing)
  const uint64_t evicted = j->resident > m.resident ? j->resident - m.resident : 0;
  if (evicted > 0) {
    Link(trace::kLinkToHostTid, "swap-out", m.now_ns, AtLinkRate(evicted, s.link_bytes_per_ns()),
         {{"job", id},
          {"name", j->name},
          {"bytes", evicted},
          {"duration", "estimated: the bytes at the measured link rate"}});
  }
}

void CoordTrace::UnreportedLoad(uint64_t id, Track& t, double link_bytes_per_ns) {
  if (t.load_from == 0 || t.load_estimate == 0) return;
  Link(trace::kLinkToDeviceTid, "swap-in", t.load_from, AtLinkRate(t.load_estimate, link_bytes_per_ns),
       {{"job", id},
        {"bytes", t.load_estimate},
        {"duration", "estimated: the job exited before reporting it; its working set at the measured link rate"}});
  t.load_from = 0;
}

Status CoordTrace::Close(const Scheduler& s) {
  for (auto& [id, t] : tracks_) {
    EndSpan(id, t, s.now());
    UnreportedLoad(id, t, s.link_bytes_per_ns());
  }
  tracks_.clear();
  return writer_->Close();
}

void CoordTrace::EndSpan(uint64_t id, Track& t, uint64_t now) {
  // A span of no device time is left out, except a pause, which a user made
  // and must see: on the simulator the clock stands still while no job
  // runs, so a job paused alone is paused for no device time at all.
  const bool shown = now > t.since || (t.state == trace::kPaused && now == t.since);
  if (t.state != nullptr && shown) {
    writer_->Write({'X', t.state, "job", t.since, now - t.since, t.pid, trace::kJobStateTid, {{"job", id}}});
  }
  t.state = nullptr;
}

void CoordTrace::Instant(const Track& t, const char* name, uint64_t now, json args) {
  writer_->Write({'i', name, "job", now, 0, t.pid, trace::kJobStateTid, std::move(args)});
}

void CoordTrace::Link(int64_t tid, const char* name, uint64_t ts, uint64_t dur, json args) {
  uint64_t& free = link_free_[tid];
  const uint64_t start = std::max(ts, free);
  free = start + dur;
  writer_->Write({'X', name, trace::kSwapCategory, start, dur, trace::kGpuPid, tid, std::move(args)});
}

}  // namespace msched

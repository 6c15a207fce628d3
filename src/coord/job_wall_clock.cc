#include "coord/job_wall_clock.h"

#include <algorithm>

namespace msched {

void JobWallClock::Sync(const std::map<uint64_t, Job>& jobs, uint64_t wall_now) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const auto j = jobs.find(it->first);
    it = j == jobs.end() || j->second.state == JobState::kFinished ? jobs_.erase(it) : std::next(it);
  }
  for (const auto& [id, j] : jobs) {
    if (j.state == JobState::kFinished) continue;
    auto [it, fresh] = jobs_.try_emplace(id);
    Times& t = it->second;
    if (fresh) t.submitted = t.off_gpu = wall_now;
    if (!t.admitted_yet && j.was_admitted) {
      t.admitted_yet = true;
      t.admitted = wall_now;
    }
    const bool on_gpu = j.state == JobState::kRunning && j.active;
    if (t.on_gpu && !on_gpu) t.off_gpu = wall_now;
    t.on_gpu = on_gpu;
  }
}

JobWallClock::Waits JobWallClock::Of(uint64_t id, uint64_t wall_now) const {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return {};
  const Times& t = it->second;
  const uint64_t until = t.admitted_yet ? t.admitted : wall_now;
  return {until - std::min(until, t.submitted), t.on_gpu ? 0 : wall_now - std::min(wall_now, t.off_gpu)};
}

}  // namespace msched

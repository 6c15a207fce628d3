#include "coord/status_report.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <nlohmann/json.hpp>

namespace msched {

const char* WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kNone: return "";
    case WaitReason::kAdmission: return "admission";
    case WaitReason::kTurn: return "turn";
    case WaitReason::kPriority: return "priority";
    case WaitReason::kPaused: return "paused";
    case WaitReason::kIdle: return "idle";
    case WaitReason::kUnresponsive: return "unresponsive";
  }
  return "?";
}

WaitReason WaitReasonOf(const Job& j, const std::map<uint64_t, Job>& jobs) {
  switch (j.state) {
    case JobState::kFinished: return WaitReason::kNone;
    case JobState::kPaused: return WaitReason::kPaused;
    case JobState::kWaiting: return WaitReason::kAdmission;
    case JobState::kRunning: break;
  }
  if (j.active) return WaitReason::kNone;
  if (j.unresponsive) return WaitReason::kUnresponsive;
  if (j.idle) return WaitReason::kIdle;
  // Only the groups of the highest priority take turns (timeline.h).
  const bool passed = std::any_of(jobs.begin(), jobs.end(), [&](const auto& entry) {
    return entry.second.active && entry.second.priority > j.priority;
  });
  return passed ? WaitReason::kPriority : WaitReason::kTurn;
}

const char* RunStateOf(const Job& j) {
  switch (j.state) {
    case JobState::kFinished: return "finished";
    case JobState::kPaused: return "paused";
    case JobState::kWaiting: return "waiting";
    case JobState::kRunning: break;
  }
  if (j.active) return "running";
  // Off the GPU after a turn with little of its working set left there: its
  // next turn begins by bringing it back.
  const bool swapped_out = j.last_ran_ns > 0 && j.resident <= j.WorkingSetEstimate() / 10;
  return swapped_out ? "swapped out" : "waiting";
}

std::string UserName(uint32_t uid) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 4096);
  passwd pw{};
  passwd* found = nullptr;
  while (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  return found != nullptr && found->pw_name != nullptr && *found->pw_name != '\0' ? found->pw_name
                                                                                  : std::to_string(uid);
}

std::string StatusReport(const Scheduler& s, const StatusContext& c) {
  using nlohmann::json;
  const SchedulerOptions& o = s.options();
  const uint64_t now = s.now();
  std::map<uint32_t, std::string> users;  // looked up once per document
  json jobs = json::array();
  for (const auto& [id, j] : s.jobs()) {
    const uint64_t admitted_or_now = j.admitted_ns ? j.admitted_ns : now;
    // A guest sees who holds the GPU and how much, not what others run.
    const bool shown = c.requester == 0 || c.requester == j.uid;
    auto user = users.find(j.uid);
    if (user == users.end()) user = users.emplace(j.uid, UserName(j.uid)).first;
    const bool off_gpu = !j.active && j.state != JobState::kFinished;
    JobWallClock::Waits waits{admitted_or_now - std::min(admitted_or_now, j.submitted_ns),
                              off_gpu ? now - std::min(now, j.off_gpu_ns) : 0};
    if (c.wall != nullptr) waits = c.wall->Of(id, c.wall_now);
    jobs.push_back({{"id", id},
                    {"name", shown ? j.name : std::string()},
                    {"uid", j.uid},
                    {"user", user->second},
                    {"pid", shown ? j.pid : 0},
                    {"state", JobStateName(j.state)},
                    {"run_state", RunStateOf(j)},
                    {"wait_reason", WaitReasonName(WaitReasonOf(j, s.jobs()))},
                    {"on_gpu", j.active},
                    {"pausing", j.Pausing()},
                    {"class", JobClassName(j.job_class)},
                    {"priority", j.priority},
                    {"declared_bytes", j.declared},
                    {"allocated_bytes", j.allocated},
                    {"working_set_bytes", j.working_set},
                    {"resident_bytes", j.resident},
                    {"budget_bytes", j.budget},
                    {"peak_over_budget_bytes", j.peak_over_budget},
                    {"shared_bytes", j.shared},
                    {"submitted_ns", j.submitted_ns},
                    {"waited_ns", waits.waited_ns},
                    {"wait_ns", waits.wait_ns},
                    {"finished_ns", j.finished_ns},
                    {"slices", j.slices},
                    {"swaps_in", j.swaps_in},
                    {"idle_yields", j.idle_yields},
                    {"serves", j.Serves()}});
  }
  json out = {{"coordinator",
               {{"pid", ::getpid()},
                {"socket", c.socket_path},
                {"hbm_bytes", o.hbm_bytes},
                {"oversubscribe", o.oversubscribe},
                {"idle_yield_ns", o.idle_yield_ns},
                {"serving_idle_yield_ns", o.ServingIdleYield()},
                {"device_time_ns", now},
                {"groups", s.group_count()},
                {"slice_end_ns", s.slice_end_ns() == proto::kNever ? json(nullptr) : json(s.slice_end_ns())},
                {"switches", s.switches()},
                {"link_gbps", s.link_bytes_per_ns()}}},
              {"jobs", jobs}};
  // Names were checked at the protocol boundary, and user names come from
  // the system; replacing any invalid byte here keeps either from ever
  // throwing.
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace msched

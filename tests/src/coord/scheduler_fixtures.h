// What the scheduler's tests and the status document's tests build their
// cases from: a 16 GiB GPU wholly usable with short slices, jobs that
// declare their memory, and a stop's answer.
#pragma once

#include <cstdint>
#include <string>

#include "coord/scheduler.h"

namespace msched::testing_fixtures {

constexpr uint64_t kGiB = 1ull << 30;

inline SchedulerOptions Options(double ratio = 2.0) {
  SchedulerOptions o;
  o.hbm_bytes = 16 * kGiB;
  o.usable_fraction = 1.0;
  o.oversubscribe = ratio;
  o.min_slice_ns = 1000;
  o.max_slice_ns = 1'000'000;
  return o;
}

inline Job NewJob(uint64_t id, uint64_t mem, int priority = 0, JobClass c = JobClass::kUnset) {
  Job j;
  j.id = id;
  j.pid = 100 + static_cast<int32_t>(id);
  j.name = "job" + std::to_string(id);
  j.declared = mem;
  j.priority = priority;
  j.job_class = c;
  return j;
}

// The first order of type `O` (proto::Go, Stop, Budget or Refused) for
// `job` among `cs`, or nullptr.
template <typename O>
const O* Find(const Commands& cs, uint64_t job) {
  for (const Command& c : cs) {
    if (const O* o = std::get_if<O>(&c.order); o != nullptr && c.job == job) return o;
  }
  return nullptr;
}

inline proto::Stopped StoppedAt(uint64_t now, uint64_t resident, uint64_t ws) {
  proto::Stopped s;
  s.now_ns = now;
  s.resident = resident;
  s.working_set = ws;
  return s;
}

}  // namespace msched::testing_fixtures

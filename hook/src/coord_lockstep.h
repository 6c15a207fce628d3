// The simulator's lockstep, on the job's side of the coordinator: a job
// that has sent something the coordinator has not handled yet, or has an
// order on its way, or has woken peers not yet back on the clock, holds its
// place on the simulated device's clock (docs/simulator.md, "Determinism")
// instead of blocking, so that simulated runs repeat. On a real GPU
// Unsettled() is false and nothing here waits. The CoordClient members it
// needs are defined in coord_lockstep.cc. Used by hook/ only.
#pragma once

#include <chrono>
#include <cstdint>

namespace msched::hook {

// How long a job holds its place without progress, for the coordinator to
// handle what it sent, for an order on its way, or for the jobs woken with
// it, and how often it looks meanwhile.
inline constexpr auto kHandledWait = std::chrono::seconds(2);
inline constexpr auto kHandledRecheckEvery = std::chrono::microseconds(200);

// The bound on holding a job's place (kHandledWait), renewed whenever the
// counts that settle it move: a coordinator that never answers is then
// waited for without holding the job's place; a slow one does not cut a
// hold short.
class HoldDeadline {
 public:
  bool Open(uint64_t progress) {
    const auto now = std::chrono::steady_clock::now();
    if (progress != progress_ || until_ == std::chrono::steady_clock::time_point{}) {
      progress_ = progress;
      until_ = now + kHandledWait;
    }
    return now < until_;
  }

 private:
  uint64_t progress_ = 0;
  std::chrono::steady_clock::time_point until_{};
};

}  // namespace msched::hook

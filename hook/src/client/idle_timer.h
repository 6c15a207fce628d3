// The idle timer of a job on a real GPU, where nothing else sees an idle
// job's time pass (on the simulator, its idle alarm does, in virtual time).
// Its thread looks every kRecheckEvery, sooner when the idle yield falls
// due, and
//  - carries out the orders that come for a job that launches nothing (the
//    coordinator counts it idle, or closed its gate: a Stop is on its way),
//    such as the Stop of its turn or evictions that make room for others',
//    now rather than at its next launch;
//  - gives the turn up once the job, holding it with no call past the gate,
//    has been idle for the idle yield while others wait (its slice has an
//    end): the rules of idleness are JobSide's;
//  - reports a slice end that the idle job passed.
// Thread-safe; its thread waits on `changed` under JobSide's mu(). Used by
// the hook's coordinator client; unit-tested with a fake clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "client/job_gate.h"
#include "client/order_runner.h"
#include "coord/job_side.h"

namespace msched::hook {

class IdleYielder {
 public:
  virtual ~IdleYielder() = default;
  // The job is registered with a live coordinator.
  virtual bool Coordinated() const = 0;
  // Gives the turn up as of `since` if the job is still idle once its gate
  // is closed, and then carries out orders until the coordinator answered.
  // No lock held.
  virtual void GiveIdleTurnUp(uint64_t since) = 0;
};

class IdleTimer {
 public:
  static constexpr auto kRecheckEvery = std::chrono::milliseconds(50);

  IdleTimer(JobSide& side, const JobGate& gate, OrderRunner& orders, CondVar& changed, IdleYielder& yielder)
      : side_(side), gate_(gate), orders_(orders), changed_(changed), yielder_(yielder) {}
  IdleTimer(const IdleTimer&) = delete;
  IdleTimer& operator=(const IdleTimer&) = delete;

  // Looks until Stop (on a GPU, for the life of the process).
  void Run() MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // Ends Run at its next look; signal `changed` for that to be now.
  void Stop() { stop_.store(true); }

 private:
  JobSide& side_;
  const JobGate& gate_;
  OrderRunner& orders_;
  CondVar& changed_;
  IdleYielder& yielder_;
  std::atomic<bool> stop_{false};
};

}  // namespace msched::hook

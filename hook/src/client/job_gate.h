// The gate every launch and device-side copy of a coordinated job passes,
// and the holds on it. The fast path takes no lock and makes no system
// call: the job holds its turn (JobSide), no order waits to be carried out,
// the coordinator's gate page says it may run, the device clock is before
// its slice end, and it has not been idle for the idle yield. A call that
// passes holds a pass until it returns; closing the gate (a Stop, an idle
// yield) then waits for every pass to end, so that the work those calls
// queue drains with the rest. Reads the gate page through the connection's
// counts (LinkCounts), which may change under it (a reconnect): every look
// at the page goes through Read. Thread-safe. Used by the hook's
// coordinator client; unit-tested over a gate page the test writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "client/coord_lockstep.h"
#include "client/order_runner.h"
#include "coord/job_side.h"
#include "msched/protocol.h"

namespace msched::hook {

class JobGate {
 public:
  // The job's slot in the gate page as of now.
  struct View {
    bool open = false;             // the coordinator lets the job run
    uint64_t end = proto::kNever;  // the slice end in force (kNever: none, or no slot yet)
  };

  JobGate(const LinkCounts& link, JobSide& side, Lockstep& lockstep, const OrderRunner& orders)
      : link_(link), side_(side), lockstep_(lockstep), orders_(orders) {}
  JobGate(const JobGate&) = delete;
  JobGate& operator=(const JobGate&) = delete;

  View Read() const;
  // True when the call may go on now, holding a pass until Leave.
  bool Enter();
  // A call that entered returned (its work is queued).
  void Leave();
  // Calls holding a pass now.
  uint32_t held() const { return held_.load(); }
  // Blocks until no call holds a pass (the gate is closed).
  void WaitForPasses() const;

 private:
  bool MayLaunch();

  const LinkCounts& link_;
  JobSide& side_;
  Lockstep& lockstep_;
  const OrderRunner& orders_;
  std::atomic<uint32_t> held_{0};
};

// A launch's or copy's hold on the open gate, from passing it to the end of
// the call. Move-only.
class [[nodiscard]] GatePass {
 public:
  GatePass() = default;
  explicit GatePass(JobGate* gate) : gate_(gate) {}
  GatePass(GatePass&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)) {}
  GatePass& operator=(GatePass&& o) noexcept {
    Release();
    gate_ = std::exchange(o.gate_, nullptr);
    return *this;
  }
  GatePass(const GatePass&) = delete;
  GatePass& operator=(const GatePass&) = delete;
  ~GatePass() { Release(); }
  // Ends the hold now: before passing the gate again, within one call.
  void Release() {
    if (gate_ != nullptr) std::exchange(gate_, nullptr)->Leave();
  }

 private:
  JobGate* gate_ = nullptr;
};

}  // namespace msched::hook

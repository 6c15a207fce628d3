#include "client/job_gate.h"

#include <chrono>
#include <thread>

namespace msched::hook {

JobGate::View JobGate::Read() const {
  const ShmSlot* slot = link_.gate.load(std::memory_order_acquire);
  if (slot == nullptr) return {};
  const bool open = slot->may_run.load(std::memory_order_acquire) != 0;
  return {open, slot->slice_end_ns.load(std::memory_order_relaxed)};
}

bool JobGate::MayLaunch() {
  if (orders_.pending() || !side_.Runnable()) return false;
  // Simulator: a report that asked nothing may still let the coordinator
  // admit or wake another job as of this moment, and an order counted in
  // the gate page is carried out at this launch whether or not it has
  // arrived yet (the wait for a turn holds for both).
  if (lockstep_.HoldsLaunches()) return false;
  const View gate = Read();
  return gate.open && side_.Pass(gate.end);
}

bool JobGate::Enter() {
  // Simulator: the gate is read at this job's turn in virtual time, so
  // that whether the coordinator has closed it follows from what the other
  // jobs did up to this moment of the clock, not from how far the host let
  // them run (a job preempted by another's arrival stopped at a different
  // launch in each run).
  lockstep_.WaitForTurn();
  // Sequentially consistent with the closing of the gate (JobSide::OnStop,
  // the idle yield): either this call sees the gate closed, or the closer
  // sees its pass.
  held_.fetch_add(1);
  if (MayLaunch()) return true;
  held_.fetch_sub(1);
  return false;
}

void JobGate::Leave() {
  side_.Passed(Read().end);
  held_.fetch_sub(1);
}

void JobGate::WaitForPasses() const {
  for (int spins = 0; held_.load() != 0; ++spins) {
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace msched::hook

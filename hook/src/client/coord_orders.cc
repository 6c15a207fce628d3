// CoordClient's orders from the coordinator (coord_client.h): waited for at
// the gate (WaitTurn), carried out by the JobSide (Execute); and the
// JobSide's clock, device and link: what Go, Stop and Budget do to the
// driver and the job's memory (JobMemory's StartSlice, EndSlice and
// FitBudget).
#include <thread>

#include "client/coord_client.h"
#include "interpose/driver_functions.h"
#include "job/cuda_vmm_ops.h"
#include "job/residency.h"
#include "observe/job_trace.h"
#include "observe/log.h"

namespace msched::hook {

void CoordClient::WaitTurn(Runtime& rt) {
  const uint64_t since = env_.Now();
  HoldDeadline hold;  // how long it holds its place on the clock (below)
  MutexLock lock(&side_.mu());
  orders_.mu().AssertHeld();
  bool blocked = false;
  for (;;) {
    if (blocked && !orders_.empty()) {
      // An order came: back on the clock before carrying it out (which
      // moves the clock to the order's time and may call the driver), so
      // that the peers woken with this job wait for it.
      env_.SetBlocked(false, 0);
      blocked = false;
    }
    orders_.RunQueued();
    if (Active() == nullptr) break;  // alone (or refused): nothing to wait for
    side_.HasWork();                 // if it had given its turn up: back in the rotation
    // Running, and the coordinator has seen what the job holds.
    if (side_.Runnable()) {
      const JobGate::View gate = gate_.Read();
      if (gate.open) {
        const JobSide::Position p = side_.Look(gate.end);
        if (p.at == JobSide::At::kOpen) {
          // Simulator: jobs woken by one decision go on in virtual-time
          // order, not in the order the host happens to wake them, and a
          // report's consequences are drawn before the job goes on.
          if (lockstep_->Unsettled() && hold.Open(lockstep_->Progress())) {
            lockstep_->HoldAWhile(&side_.mu(), &changed_);
            continue;
          }
          side_.NoteActive(p.now, gate.end);
          break;
        }
        if (p.at == JobSide::At::kIdle) {
          // Idle longer than the idle yield and no timer caught it: the turn
          // passes on as of then, and this launch waits for the next.
          lock.Unlock();
          const bool yielded = Yield(p.idle_since);
          lock.Lock();
          if (!yielded) {
            side_.NoteActive(p.now, gate.end);  // busy after all: another call was under way
            break;
          }
          continue;
        }
        side_.ReachedSliceEnd(p.now);
      }  // else the coordinator closed the gate: its Stop is on the way
    }
    // Simulator: a message the coordinator has not handled yet (an ask, a
    // slice's end, a stop's reply), an order on its way (a Go, a Stop, the
    // answer to an ask), or jobs woken by what it said that are not back
    // on the clock yet: wait, keeping this job's place on the device clock.
    // What the coordinator decides follows from the job's state as of now,
    // and its orders take effect now; were the job to block first, the
    // others would run on past this moment by as much as the host's timing
    // allowed, and simulated runs would not repeat (the urgent scenario
    // would preempt at 25 ms in some runs and at 150 ms in others; micro's
    // co-running jobs would queue their kernels in another order). It blocks
    // only when nothing is coming until another job moves. Bounded: a
    // coordinator that stops answering is then waited for without holding
    // the job's place.
    if (!blocked && lockstep_->Unsettled() && hold.Open(lockstep_->Progress())) {
      lockstep_->HoldAWhile(&side_.mu(), &changed_);
      continue;
    }
    if (!blocked) {
      env_.SetBlocked(true, connection_.link().orders_received.load());
      blocked = true;
    }
    changed_.WaitFor(&side_.mu(), kRecheckEvery);
  }
  if (blocked) env_.SetBlocked(false, 0);
  rt.counters().coord_wait_ns->Add(env_.Now() - since);
}

void CoordClient::Execute(const proto::Message& m) {
  const ExecutingOrder executing;
  if (auto* go = std::get_if<proto::Go>(&m)) {
    if (side_.OnGo(*go)) env_.SetIdleAlarm(go->idle_yield_ns, &CoordClient::OnIdleAlarm);
    progress_.TurnBegan();
  } else if (auto* stop = std::get_if<proto::Stop>(&m)) {
    const uint64_t taken = env_.Now();
    side_.OnStop(*stop);
    rt_.counters().coord_stop_ns->Add(env_.Now() - taken);
    if (stop->reason == proto::StopReason::kPause) progress_.Paused();
  } else if (auto* budget = std::get_if<proto::Budget>(&m)) {
    side_.OnBudget(*budget);
    return;
  } else {
    LogWarn("ignored an unexpected '{}' from the coordinator", proto::MsgTypeName(proto::TypeOf(m)));
    return;
  }
  MutexLock lock(&side_.mu());  // a turn taken or given: the waiting threads look again
  changed_.NotifyAll();
}

uint64_t CoordClient::Now() { return env_.Now(); }

void CoordClient::AdvanceTo(uint64_t t) { env_.AdvanceTo(t); }

void CoordClient::Drain() {
  gate_.WaitForPasses();
  rt_.counters().coord_stops->Add();
  auto synchronize = RealDriver().cuCtxSynchronize;
  if (synchronize) synchronize();
}

JobDevice::Ended CoordClient::EndSlice(uint64_t evict_bytes, bool wait) {
  const uint64_t now = env_.Now();
  MutexLock lock(&rt_.mu());
  NoteOverBudget(rt_);  // drained: everything the slice faulted in is there
  const uint64_t managed = rt_.job().manager().resident_bytes();
  JobMemory::SliceEnd end;
  MoveMemory(rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) {
    end = rt_.job().EndSlice(rt_.seq(), evict_bytes, wait, ops);
    return end.moved;
  });
  // VMM memory cannot page: it goes whole, and only when the stop asks for
  // more than the job's managed memory gives (a pause asks for everything).
  uint64_t evicted = end.moved.evicted;
  if (evict_bytes > managed) evicted += MoveVmm(/*out=*/true);
  JobTrace* trace = JobTrace::Active();
  if (trace != nullptr && evicted > 0) trace->SwapOut(now, evicted);
  return {end.working_set, DeviceResidentBytes(rt_) + rt_.job().vmm().device_bytes()};
}

uint64_t CoordClient::StartSlice(uint64_t budget, bool load) {
  MutexLock lock(&rt_.mu());
  if (budget > 0) rt_.job().SetGranted(budget);
  const uint64_t t0 = env_.Now();
  // VMM memory first: the program may touch it at any launch.
  const uint64_t vmm = MoveVmm(/*out=*/false);
  const MoveOutcome out =
      MoveMemory(rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) { return rt_.job().StartSlice(load, ops); });
  const uint64_t loaded = out.loaded + vmm;
  if (loaded > 0) {
    JobTrace* trace = JobTrace::Active();
    if (trace != nullptr) trace->SwapIn(t0, env_.Now() - t0, loaded);
    rt_.counters().coord_loaded_bytes->Add(loaded);
  }
  return loaded;
}

uint64_t CoordClient::MoveVmm(bool out) {
  CudaVmmOps ops;
  const auto moved = [&]() MSCHED_REQUIRES(rt_.mu()) {
    return out ? rt_.job().vmm().moved_bytes() : rt_.job().vmm().device_bytes();
  };
  const uint64_t before = moved();
  if (out) {
    if (Status s = rt_.job().ChangeVmm()->MoveOut(ops); !s.ok()) {
      LogOnce("vmm-out", spdlog::level::warn,
              "VMM memory could not all be moved to the host (" + s.ToString() + "): what failed stays on the GPU");
    }
    rt_.counters().vmm_moved_out_bytes->Add(moved() - before);
    return moved() - before;
  }
  // Back before the job runs again, however long that takes: a kernel that
  // touched an address left unmapped would fail. Out of memory means
  // another process holds it (msched's grant counted it free): wait for it.
  for (int tries = 0;; ++tries) {
    const Status s = rt_.job().ChangeVmm()->MoveBack(ops);
    if (s.ok()) break;
    if (s.code() != StatusCode::kResourceExhausted && tries >= kVmmMoveBackTries) {
      LogError(
          "VMM memory could not be mapped back ({}); its data is kept on the host, and kernels that touch it "
          "will fail",
          s.ToString());
      break;
    }
    LogOnce("vmm-wait", spdlog::level::warn,
            "waiting to map VMM memory back: " + s.ToString() + " (another process may hold the GPU's memory)");
    rt_.mu().Unlock();
    PauseForMemory();
    rt_.mu().Lock();
  }
  rt_.counters().vmm_moved_back_bytes->Add(moved() - before);
  return moved() - before;
}

void CoordClient::PauseForMemory() {
  // Blocked, the job's clock holds no other process back in the
  // simulator's lockstep, so the one giving the memory back gets to.
  env_.SetBlocked(true, connection_.link().orders_received.load());
  std::this_thread::sleep_for(kMemoryPause);
  env_.SetBlocked(false, 0);
}

void CoordClient::FitBudget(uint64_t budget) {
  MutexLock lock(&rt_.mu());
  rt_.job().SetGranted(budget);
  MoveMemory(rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) { return rt_.job().FitBudget(ops); });
}

void CoordClient::WithdrawGrant() {
  MutexLock lock(&rt_.mu());
  rt_.job().SetGranted(0);  // back to its own budget (JobBudget)
}

}  // namespace msched::hook

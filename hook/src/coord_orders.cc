// The job's orders from the coordinator: queued by the reader thread,
// carried out one at a time in order (ExecuteInbox), waited for at the
// gate (WaitTurn), and what Go, Stop and Budget do to the job's memory
// (JobMemory's StartSlice, EndSlice and FitBudget) and its gate.
#include "coord_client.h"
#include "coord_lockstep.h"
#include "device_clock.h"
#include "driver_functions.h"
#include "job_trace.h"
#include "log.h"
#include "residency.h"

namespace msched::hook {

void CoordClient::ExecuteInbox() {
  while (!inbox_.empty()) {
    // exec_mu_ is taken before the message is: threads that carry orders out
    // (application threads, the idle yield's) run them in the order sent.
    mu_.Unlock();
    exec_mu_.Lock();
    mu_.Lock();
    std::optional<proto::Message> m;
    if (!inbox_.empty()) {
      m = std::move(inbox_.front());
      inbox_.pop_front();
    }
    mu_.Unlock();
    if (m) Execute(*m);
    exec_mu_.Unlock();
    mu_.Lock();
  }
  attention_.store(false, std::memory_order_release);
}

void CoordClient::WaitTurn(Runtime& rt) {
  const uint64_t since = DeviceNow();
  HoldDeadline hold;  // how long it holds its place on the clock (below)
  MutexLock lock(&mu_);
  bool blocked = false;
  for (;;) {
    if (blocked && !inbox_.empty()) {
      // An order came: back on the clock before carrying it out (which
      // moves the clock to the order's time and may call the driver), so
      // that the peers woken with this job wait for it.
      DeviceSetBlocked(false, 0);
      blocked = false;
    }
    ExecuteInbox();
    if (Active() == nullptr) break;  // alone (or refused): nothing to wait for
    if (idleness_ == Idleness::kYielded) {
      // It gave its turn up and has work again: back in the rotation.
      idleness_ = Idleness::kBusy;
      Send(proto::Idle{DeviceNow(), false});
    }
    // Running, and the coordinator has seen what the job holds.
    if (running_.load() && answered_.load() >= asks_.load()) {
      const ShmSlot* slot = gate_.load(std::memory_order_acquire);
      if (slot->may_run.load(std::memory_order_acquire) != 0) {
        const uint64_t end = slot->slice_end_ns.load(std::memory_order_relaxed);
        const uint64_t now = DeviceNow();
        if (end == proto::kNever || now < end) {
          const uint64_t idle = IdleSince(now, end);
          if (idle == 0) {
            // Simulator: jobs woken by one decision go on in virtual-time
            // order, not in the order the host happens to wake them, and a
            // report's consequences are drawn before the job goes on.
            if (Unsettled() && hold.Open(Progress())) {
              HoldAWhile();
              continue;
            }
            if (end != proto::kNever) NoteActive(now, end);
            break;
          }
          // Idle longer than the idle yield and no timer caught it: the turn
          // passes on as of then, and this launch waits for the next.
          lock.Unlock();
          const bool yielded = Yield(idle);
          lock.Lock();
          if (!yielded) {
            NoteActive(now, end);  // busy after all: another call was under way
            break;
          }
          continue;
        }
        if (!slice_end_sent_) {
          slice_end_sent_ = true;
          Send(proto::SliceEnd{now});
        }
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
    if (!blocked && Unsettled() && hold.Open(Progress())) {
      HoldAWhile();
      continue;
    }
    if (!blocked) {
      DeviceSetBlocked(true, orders_received_.load());
      blocked = true;
    }
    cv_.WaitFor(&mu_, kRecheckEvery);
  }
  if (blocked) DeviceSetBlocked(false, 0);
  rt.counters().coord_wait_ns->Add(DeviceNow() - since);
}

void CoordClient::Execute(const proto::Message& m) {
  const ExecutingOrder executing;
  if (auto* go = std::get_if<proto::Go>(&m)) {
    OnGo(*go);
  } else if (auto* stop = std::get_if<proto::Stop>(&m)) {
    OnStop(*stop);
  } else if (auto* budget = std::get_if<proto::Budget>(&m)) {
    OnBudget(budget->budget);
    if (budget->answers != 0) {
      MutexLock usage(&usage_mu_);
      if (budget->answers == asks_.load()) seen_allocated_ = last_ask_bytes_;
      RaiseAnswered(budget->answers);
    }
  } else {
    LogWarn("ignored an unexpected '{}' from the coordinator", proto::MsgTypeName(proto::TypeOf(m)));
  }
}

void CoordClient::OnGo(const proto::Go& go) {
  DeviceAdvanceTo(go.start_ns);
  {
    MutexLock lock(&rt_.mu());
    if (go.budget > 0) rt_.job().SetGranted(go.budget);
    // The working set comes back in access order before the first kernel;
    // the kernels would wait for it anyway, so waiting here costs nothing
    // and measures the link for the coordinator.
    const uint64_t t0 = DeviceNow();
    const MoveOutcome out = MoveMemory(
        rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) { return rt_.job().StartSlice(go.load, ops); });
    if (out.loaded > 0) {
      loaded_bytes_ = out.loaded;
      load_ns_ = DeviceNow() - t0;
      JobTrace* trace = JobTrace::Active();
      if (trace != nullptr) trace->SwapIn(t0, load_ns_, out.loaded);
      rt_.counters().coord_loaded_bytes->Add(out.loaded);
    }
  }
  MutexLock lock(&mu_);
  slice_end_sent_ = false;
  idleness_ = Idleness::kBusy;
  running_.store(true);
  // The turn (or its remainder) starts now: idleness counts from here.
  const ShmSlot* slot = gate_.load(std::memory_order_acquire);
  const uint64_t end = slot != nullptr ? slot->slice_end_ns.load(std::memory_order_relaxed) : proto::kNever;
  if (end != proto::kNever) NoteActive(DeviceNow(), end);
  cv_.NotifyAll();
}

void CoordClient::OnStop(const proto::Stop& stop) {
  const uint64_t taken = DeviceNow();
  running_.store(false);  // closes the gate; then the calls already past it end
  WaitForPasses();
  rt_.counters().coord_stops->Add();
  auto synchronize = RealDriver().cuCtxSynchronize;
  if (synchronize) synchronize();  // the queue drains: the stop falls on a kernel boundary
  proto::Stopped reply;
  reply.now_ns = DeviceNow();
  {
    MutexLock lock(&rt_.mu());
    // The evictions overlap the incoming job's loads; a pause answers once
    // they are complete (the memory is on the host).
    const bool wait = stop.reason == proto::StopReason::kPause;
    JobMemory::SliceEnd end;
    MoveMemory(rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) {
      end = rt_.job().EndSlice(rt_.seq(), stop.evict_bytes, wait, ops);
      return end.moved;
    });
    reply.working_set = stop.reason == proto::StopReason::kEvictOnly ? 0 : end.working_set;
    JobTrace* trace = JobTrace::Active();
    if (trace != nullptr && end.moved.evicted > 0) trace->SwapOut(reply.now_ns, end.moved.evicted);
    if (wait) reply.now_ns = DeviceNow();
    reply.resident = DeviceResidentBytes(rt_);
    reply.loaded = loaded_bytes_;
    reply.load_ns = load_ns_;
    loaded_bytes_ = load_ns_ = 0;
  }
  reply.counters = Counters();
  rt_.counters().coord_stop_ns->Add(DeviceNow() - taken);
  Send(reply);
  MutexLock lock(&mu_);
  if (idleness_ == Idleness::kAsked) idleness_ = Idleness::kYielded;
  cv_.NotifyAll();
}

void CoordClient::OnBudget(uint64_t budget) {
  MutexLock lock(&rt_.mu());
  if (budget == 0) return;
  rt_.job().SetGranted(budget);
  MoveMemory(rt_, [&](DeviceOps& ops) MSCHED_REQUIRES(rt_.mu()) { return rt_.job().FitBudget(ops); });
}

}  // namespace msched::hook

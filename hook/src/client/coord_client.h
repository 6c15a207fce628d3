// The job's side of the coordinator. At the job's first allocation it
// connects to the coordinator of that allocation's GPU (gpu<N>.sock for the
// machine's GPU N, or MSCHED_SOCKET: msched/config.h), run by this user or
// root only, and registers (MSCHED_COORD=auto: if a coordinator answers;
// required: waiting up to MSCHED_COORD_WAIT, then failing the allocation
// clearly; off: never); while the job is queued that allocation blocks. The
// coordinator's Welcome is awaited for MSCHED_COORD_WAIT (required: then the
// allocation fails) or at most kAutoAnswerWait (auto: then the job runs
// alone, and joins if the coordinator answers later), so a stopped
// coordinator never hangs a job. A job under auto that found no coordinator
// looks for one every kJoinLaterEvery and joins it when it starts.
//
// From then on every launch and device-side copy passes the gate
// (job_gate.h); a call that cannot pass waits here (WaitTurn), carrying out
// what the coordinator asks, in order (order_runner.h): Stop: close the
// gate, wait for the calls holding a pass, drain, take the slice's working
// set, evict what the coordinator named by OPT, answer; Go: move the clock
// to the start, take the budget, bring the working set back in access
// order; Budget: evict down to it. What the job does on each order, ask,
// slice end and idle turn is decided by its JobSide (src/coord/job_side.h),
// driver-free and unit-tested.
//
// Idle yield: while others wait for their turns (its slice has an end), a
// job that holds its turn, has nothing in flight, has synchronised what it
// launched, and has launched nothing for the welcome's idle yield gives the
// turn up (proto::Idle), so that they run in the gap: on a real GPU from the
// idle timer (idle_timer.h), which then carries the Stop out at once; on the
// simulator from its idle alarm, in virtual time, so that runs stay
// deterministic; and, should neither have fired, at its next launch, dated
// when it went idle. Given up, it is out of the rotation: its next launch
// says it has work again and waits for its turn.
//
// The client is the parts' meeting point, each a type of its own with its
// own tests: the connection (coord_connection.h: socket, reader thread,
// reconnects), the order runner, the gate, the idle timer, and the
// simulator's lockstep (coord_lockstep.h), chosen once from the device
// environment (device_env.h). It is their JobSide's clock, device and link
// (coord_orders.cc), and what a welcome, a refusal and a loss mean.
// If the coordinator goes away the job carries on alone with its own
// budget, and the reader reconnects to a new coordinator when one appears.
//
// Lock order, where the parts meet: register_mu_, then JobSide's
// order_mu(), mu() and usage_mu(); the Runtime's lock is taken inside an
// order, under order_mu() alone, never by a caller holding mu(); the
// connection's send lock is a leaf. The lockstep's holds let mu() go while
// they wait. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "client/coord_connection.h"
#include "client/coord_lockstep.h"
#include "client/idle_timer.h"
#include "client/job_gate.h"
#include "client/order_runner.h"
#include "coord/job_progress.h"
#include "coord/job_side.h"
#include "interpose/hook_guard.h"
#include "job/device_env.h"
#include "job/runtime.h"
#include "msched/no_destructor.h"
#include "msched/protocol.h"
#include "observe/log.h"

namespace msched::hook {

class CoordClient : private JobClock,
                    private JobDevice,
                    private CoordLink,
                    private OrderHandler,
                    private ConnectionEvents,
                    private IdleYielder {
 public:
  // The process's client, or nullptr when coordination is off (MSCHED_COORD
  // =off, or a mode that does not manage memory).
  static CoordClient* Get(Runtime& rt);
  // The client only while the job is registered with a live coordinator: the
  // launch path's check (one atomic load).
  static CoordClient* Active() { return active_.load(std::memory_order_acquire); }

  // At an allocation of `bytes`: registers on the first call and waits while
  // queued. Not OK when the job may not run: refused (ResourceExhausted) or,
  // with MSCHED_COORD=required, no coordinator (Unavailable).
  Status Register(Runtime& rt, uint64_t bytes) MSCHED_EXCLUDES(register_mu_, side_.mu());
  // Allocated bytes changed (after an allocation or a free): reports the
  // job's total. Above what the coordinator last knew it to hold, the job
  // asks the coordinator to see it before launching again: its launches
  // wait for the answer (a Budget answering the ask), so that no kernel runs
  // on a grant decided before the coordinator knew what the job holds.
  // (Jobs that start together grow at once; the first grants, given before
  // the others showed their size, are too large, and kernels queued on them
  // fault when they shrink.) Reports leave in the order their totals were
  // read, so the coordinator's last figure is the job's latest.
  // `coming`: bytes of VMM memory about to be made, which no record counts
  // yet: it asks before it is made, since it cannot be overcommitted.
  void ReportUsage(uint64_t coming = 0) MSCHED_EXCLUDES(side_.usage_mu());

  // Waits kMemoryPause for device memory that others hold now and are
  // giving back (a job stopped for this one's turn that answers late, a
  // process that is not msched's), letting the device's other processes
  // run meanwhile: for the allocations that cannot be overcommitted (VMM
  // memory), which retry after it. Takes no lock.
  void PauseForMemory();
  static constexpr std::chrono::milliseconds kMemoryPause{10};
  // VMM memory being made (cuMemCreate, from its report until the driver
  // answered) came or went: the reports count it as memory that cannot page
  // (JobCounters::unpaged), so that a stop in between does not make the
  // coordinator forget it.
  void Creating(int64_t delta) { creating_unpaged_.fetch_add(static_cast<uint64_t>(delta)); }

  // The launch path's gate: its fast path (no system call, no lock).
  JobGate& gate() { return gate_; }
  // The slow path: blocks until the job may launch, doing what the
  // coordinator asks, and passes the gate (no pass once it runs alone).
  GatePass WaitAtGate(Runtime& rt) MSCHED_EXCLUDES(side_.order_mu(), side_.mu());

  // Launches and copies that have passed the gate and returned so far (their
  // work is queued); a synchronisation takes this before it starts and, once
  // it succeeded, reports it: all of that work is complete.
  uint64_t passes() const { return side_.passes(); }
  void Synchronized(uint64_t passes_before);

 private:
  friend class NoDestructor<CoordClient>;  // Get's one client
  // How often a waiting job looks again when nothing wakes it.
  static constexpr auto kRecheckEvery = std::chrono::milliseconds(50);
  CoordClient(Runtime& rt, const Config& config)
      : rt_(rt),
        config_(config),
        env_(DeviceEnv::Get()),
        lockstep_(Lockstep::For(env_, connection_.link())),
        progress_(config.progress, JobName(config)) {}

  // Marks the thread carrying out an order: the simulator's idle alarm,
  // which a Go's move of the clock may fire, does nothing there.
  using ExecutingOrder = ThreadMark<struct CarryingOutAnOrder>;

  // ---- Registration (coord_client.cc) ----------------------------------------
  // No coordinator can be joined, because of `why`: with MSCHED_COORD=
  // required that is the job's refusal (its allocations fail; `waited`
  // says how long it tried), else the job runs alone, said at `alone_level`.
  Status JoinNone(const std::string& why, const std::string& waited, spdlog::level::level_enum alone_level)
      MSCHED_REQUIRES(register_mu_);
  // How the job shows in `msched status`: MSCHED_JOB_NAME, else the program's name.
  static std::string JobName(const Config& config);
  // The coordinator's socket: MSCHED_SOCKET, else that of the machine GPU
  // of the current context (the first allocation's); Unavailable with no
  // current context.
  Result<std::string> ChooseSocket() const;
  // Connects to socket_ and says hello; returns the socket.
  Result<int> Connect(uint64_t allocated);
  // Starts the threads a connection needs: the reader (on this thread when
  // `here`, else its own) and, on a real GPU, the idle timer, which works
  // in the job's context `ctx` (a CUcontext, current at registration).
  void RunConnection(void* ctx, bool here) MSCHED_EXCLUDES(side_.mu());
  // MSCHED_COORD=auto found no coordinator at registration: looks for one
  // every kJoinLaterEvery and joins it when it appears, so that a job
  // started before its coordinator does not run unmanaged to its end.
  void JoinWhenOneAppears(void* ctx) MSCHED_EXCLUDES(side_.mu());
  // After a message sent outside WaitTurn (a goodbye, an idle report's stop
  // reply): holds the process's place on the clock until the coordinator
  // has handled it and the jobs it woke are back on the clock (the
  // lockstep's Unheard; bounded by kHandledWait; nothing on a GPU).
  void HoldUntilHeard() MSCHED_EXCLUDES(side_.mu());
  static void SayGoodbye();

  // ConnectionEvents: what the connection's news means to the job.
  void Welcomed(const proto::Welcome& w) override MSCHED_REQUIRES(side_.mu());
  void Refused() override MSCHED_REQUIRES(side_.mu());
  // The job runs alone; returns whether it had been welcomed.
  bool Lost(const std::string& why) override MSCHED_EXCLUDES(side_.mu());
  Result<int> Reconnect() override;

  // ---- Orders and the wait for a turn (coord_orders.cc) ------------------------
  // Blocks until it may launch, doing what the coordinator asks.
  void WaitTurn(Runtime& rt) MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // OrderHandler: one order, carried out by side_ (the Runtime's lock taken
  // inside, never held by the caller).
  void Execute(const proto::Message& m) override MSCHED_REQUIRES(side_.order_mu()) MSCHED_EXCLUDES(side_.mu());
  // side_'s clock, device and link.
  uint64_t Now() override;
  void AdvanceTo(uint64_t t) override;
  void Drain() override;
  Ended EndSlice(uint64_t evict_bytes, bool wait) override;
  uint64_t StartSlice(uint64_t budget, bool load) override;
  void FitBudget(uint64_t budget) override;
  void WithdrawGrant() override;
  // Moves the job's VMM memory out (`out`) or back (VmmMemory); the bytes
  // moved. Back, it retries while the device's memory is held by others.
  uint64_t MoveVmm(bool out) MSCHED_REQUIRES(rt_.mu());
  static constexpr int kVmmMoveBackTries = 3;  // for errors other than out of memory
  // The job's running totals that its reports carry, for mschedd's metrics.
  proto::JobCounters Counters() override;
  void Send(const proto::Message& m) override;
  uint64_t SliceEnd() override { return gate_.Read().end; }

  // ---- Idle yield (idle_yield.cc; the rules are JobSide's) ----------------------
  // Gives the turn up as of `since` if the job is still idle once its gate
  // is closed (then true: the report is on its way); else opens the gate again.
  bool Yield(uint64_t since) MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // After Yield on a thread that does not launch: carries out orders until
  // the coordinator has answered the report.
  void AwaitYieldAnswer() MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // Carries out the orders queued, after those the coordinator counted as
  // sent have arrived, and holds until its answers are handled (simulator;
  // each bounded by kHandledWait).
  void CarryOutOrders() MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // The simulator's idle alarm, on the application thread that moves the
  // clock: yields, reports a passed slice end and carries out orders, in
  // virtual time.
  static void OnIdleAlarm();
  // IdleYielder, for the idle timer of a real GPU.
  bool Coordinated() const override { return Active() == this; }
  void GiveIdleTurnUp(uint64_t since) override MSCHED_EXCLUDES(side_.order_mu(), side_.mu());

  static std::atomic<CoordClient*> active_;
  Runtime& rt_;
  const Config& config_;
  DeviceEnv& env_;
  std::atomic<uint64_t> creating_unpaged_{0};  // Creating's total

  Mutex register_mu_;  // one registration at a time
  bool registered_ MSCHED_GUARDED_BY(register_mu_) = false;
  Status refusal_ MSCHED_GUARDED_BY(register_mu_);  // why the job may not run
  // Written once by the first Register, before the reader thread starts;
  // only read after that.
  std::string socket_;

  // The protocol's state and its locks (above).
  JobSide side_{*this, *this, *this};
  CondVar changed_;  // signalled under side_.mu() when side_'s state, the orders or the connection change
  OrderRunner orders_{side_, *this};
  CoordConnection connection_{side_, orders_, changed_, *this};
  const std::unique_ptr<Lockstep> lockstep_;  // over env_ and the connection's counts
  JobGate gate_{connection_.link(), side_, *lockstep_, orders_};
  IdleTimer idle_timer_{side_, gate_, orders_, changed_, *this};
  JobProgress progress_;  // MSCHED_PROGRESS's lines
};

// The gate every launch and device-side copy passes: one atomic load when
// the job is not coordinated. Nothing waits while a stream is capturing
// (captured work does not run now). Keep the pass until the call returns.
inline GatePass PassGate(Runtime& rt) {
  CoordClient* cc = CoordClient::Active();
  if (cc == nullptr || rt.AnyCapturing()) return {};
  if (cc->gate().Enter()) return GatePass(&cc->gate());
  GatePass pass;
  Safely(rt, "waiting for the coordinator", [&] { pass = cc->WaitAtGate(rt); });
  return pass;
}

}  // namespace msched::hook

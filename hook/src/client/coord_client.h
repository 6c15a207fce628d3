// The job's side of the coordinator. At the job's first allocation it
// connects to the coordinator of that allocation's GPU (gpu<N>.sock for the
// machine's GPU N, or MSCHED_SOCKET: msched/config.h) (MSCHED_COORD=auto: if a coordinator answers; required: waiting
// up to MSCHED_COORD_WAIT, then failing the allocation clearly; off: never)
// to a coordinator run by this user or root only, and registers; while the
// job is queued that allocation blocks. The coordinator's Welcome is
// awaited for MSCHED_COORD_WAIT (required: then the allocation fails) or at
// most kAutoAnswerWait (auto: then the job runs alone, and joins if the
// coordinator answers later), so a stopped coordinator never hangs a job. From then
// on every launch and device-side copy passes the gate:
//   - fast path, no system call and no lock: the job holds its turn (its
//     last Go), the coordinator's shared-memory slot says it may run, the
//     device clock is before its slice end, and the job has not been idle
//     for the idle yield; the call holds a GatePass until it returns;
//   - slow path: report the slice end, carry out what the coordinator asks,
//     in order (Stop: close the gate, wait for the calls holding a pass,
//     drain, take the slice's working set, evict what the coordinator named
//     by OPT, answer; Go: move the clock to the start, take the budget,
//     bring the working set back in access order; Budget: evict down to
//     it), and wait, marked blocked for the simulator's lockstep, until it
//     may run.
// What the job does on each order, ask, slice end and idle turn is decided
// by its JobSide (src/coord/job_side.h), driver-free and unit-tested, which
// also holds the protocol's state and the locks that guard it; this class
// is its clock, its device and its link to the coordinator (the driver,
// the Runtime's JobMemory, the socket and the gate page), and runs it on
// the job's threads.
// Idle yield: while others wait for their turns (its slice has an end), a
// job that holds its turn, has nothing in flight, has synchronised what it
// launched, and has launched nothing for the welcome's idle yield gives the
// turn up (proto::Idle), so that they run in the gap: on a real GPU from a
// timer thread, which then carries the Stop out at once; on the simulator
// from its idle alarm, in virtual time, so that runs stay deterministic;
// and, should neither have fired, at its next launch, dated when it went
// idle. Given up, it is out of the rotation: its next launch says it has
// work again and waits for its turn.
// A reader thread receives messages and only queues them; orders are
// carried out one at a time (side_.order_mu()) by an application thread, or
// by the timer or alarm that yielded the turn, with the Runtime's lock taken
// inside. If the coordinator goes away the job carries on alone with its own
// budget, and the reader thread reconnects to a new coordinator when one
// appears, backing off while coordinators drop it before welcoming it.
// The class is defined across files by concern: the connection, the gate
// and usage reports (coord_client.cc), the orders and the wait for a turn
// (coord_orders.cc), and idle yield (idle_yield.cc). The simulator's
// lockstep is a part of its own (coord_lockstep.h), chosen once from the
// device environment (device_env.h).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "client/coord_lockstep.h"
#include "coord/coord_shm.h"
#include "coord/job_progress.h"
#include "coord/job_side.h"
#include "interpose/hook_guard.h"
#include "job/device_env.h"
#include "job/runtime.h"
#include "msched/no_destructor.h"
#include "msched/protocol.h"
#include "observe/log.h"

namespace msched::hook {

class CoordClient;

// A launch's or copy's hold on the open gate, from passing it to the end of
// the call: a Stop closes the gate and then waits for every hold to end, so
// that the work these calls queue drains with the rest. Move-only.
class [[nodiscard]] GatePass {
 public:
  GatePass() = default;
  explicit GatePass(CoordClient* holder) : holder_(holder) {}
  GatePass(GatePass&& o) noexcept : holder_(std::exchange(o.holder_, nullptr)) {}
  GatePass& operator=(GatePass&& o) noexcept {
    Release();
    holder_ = std::exchange(o.holder_, nullptr);
    return *this;
  }
  GatePass(const GatePass&) = delete;
  GatePass& operator=(const GatePass&) = delete;
  ~GatePass() { Release(); }
  // Ends the hold now: before passing the gate again, within one call.
  inline void Release();

 private:
  CoordClient* holder_ = nullptr;
};

class CoordClient : private JobClock, private JobDevice, private CoordLink {
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
  void ReportUsage() MSCHED_EXCLUDES(side_.usage_mu());

  // The launch path: true when the job may launch now (no system call),
  // holding the gate open until LeaveGate.
  bool EnterGate();
  void LeaveGate();
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
        lockstep_(Lockstep::For(env_, link_)),
        progress_(config.progress, JobName(config)) {}

  // Marks the thread carrying out an order: the simulator's idle alarm,
  // which a Go's move of the clock may fire, does nothing there.
  using ExecutingOrder = ThreadMark<struct CarryingOutAnOrder>;

  // The job's slot in the gate page as of now: whether the coordinator lets
  // it run, and the slice end in force (kNever: none, or no slot yet). Every
  // look at the slot goes through here.
  struct Gate {
    bool open = false;
    uint64_t end = proto::kNever;
  };
  Gate ReadGate() const;
  bool MayLaunch();
  // Installs a new connection's socket: both sides count messages and
  // orders from its hello on.
  void UseConnection(int fd) MSCHED_EXCLUDES(send_mu_);
  // After a message sent outside WaitTurn (a goodbye, an idle report's stop
  // reply): holds the process's place on the clock until the coordinator
  // has handled it and the jobs it woke are back on the clock (the
  // lockstep's Unheard; bounded by kHandledWait; nothing on a GPU).
  void HoldUntilHeard() MSCHED_EXCLUDES(side_.mu());
  // Blocks until it may launch, doing what the coordinator asks.
  void WaitTurn(Runtime& rt) MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // Carries out the orders queued in the inbox, in order, dropping mu()
  // while each runs (under order_mu()).
  void ExecuteInbox() MSCHED_REQUIRES(side_.mu()) MSCHED_EXCLUDES(side_.order_mu());
  // Blocks until no call holds a pass (the gate is closed).
  void WaitForPasses() const;

  // Idle yield (the rules are JobSide's). Gives the turn up as of `since`
  // if the job is still idle once its gate is closed (then true: the report
  // is on its way); else opens the gate again.
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
  // Real GPU: the timer thread's loop.
  void IdleTimerLoop() MSCHED_EXCLUDES(side_.order_mu(), side_.mu());
  // Starts the threads a connection needs: the reader (on this thread when
  // `here`, else its own) and, on a real GPU, the idle timer, which works
  // in the job's context `ctx` (a CUcontext, current at registration).
  void RunConnection(void* ctx, bool here) MSCHED_EXCLUDES(side_.mu());
  // MSCHED_COORD=auto found no coordinator at registration: looks for one
  // every kJoinLaterEvery and joins it when it appears, so that a job
  // started before its coordinator does not run unmanaged to its end.
  void JoinWhenOneAppears(void* ctx) MSCHED_EXCLUDES(side_.mu());

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
  void ReaderLoop() MSCHED_EXCLUDES(side_.mu());
  // One order from the coordinator, carried out by side_ (the Runtime's
  // lock taken inside, never held by the caller).
  void Execute(const proto::Message& m) MSCHED_REQUIRES(side_.order_mu()) MSCHED_EXCLUDES(side_.mu());
  // The connection ended: the job runs alone. Returns whether it had been
  // welcomed.
  bool BecomeStandalone(const std::string& why) MSCHED_EXCLUDES(side_.mu());
  static void SayGoodbye();

  // side_'s clock, device and link (coord_orders.cc).
  uint64_t Now() override;
  void AdvanceTo(uint64_t t) override;
  void Drain() override;
  Ended EndSlice(uint64_t evict_bytes, bool wait) override;
  uint64_t StartSlice(uint64_t budget, bool load) override;
  void FitBudget(uint64_t budget) override;
  void WithdrawGrant() override;
  // The job's running totals that its reports carry, for mschedd's metrics.
  proto::JobCounters Counters() override;
  void Send(const proto::Message& m) override MSCHED_EXCLUDES(send_mu_);
  uint64_t SliceEnd() override { return ReadGate().end; }

  static std::atomic<CoordClient*> active_;
  Runtime& rt_;
  const Config& config_;

  Mutex register_mu_;  // one registration at a time
  bool registered_ MSCHED_GUARDED_BY(register_mu_) = false;
  Status refusal_ MSCHED_GUARDED_BY(register_mu_);  // why the job may not run

  // Written once by the first Register, before the reader thread starts;
  // only read after that.
  std::string socket_;

  Mutex send_mu_;  // one message at a time on the socket
  std::atomic<int> fd_{-1};
  // Both ends' counts, the gate page's included; LinkCounts says who writes
  // which. messages_sent and orders_received are reset with fd_ under
  // send_mu_.
  LinkCounts link_;
  DeviceEnv& env_;
  const std::unique_ptr<Lockstep> lockstep_;  // over env_ and link_

  // The protocol's state and its locks: order_mu() (one order carried out
  // at a time, and a yield decided with none running), mu() (the fields
  // below, with cv_) and usage_mu() (one usage report at a time), taken
  // after register_mu_.
  JobSide side_{*this, *this, *this};
  CondVar cv_;  // signalled under side_.mu() when the fields below or side_'s change
  std::deque<proto::Message> inbox_ MSCHED_GUARDED_BY(side_.mu());
  std::atomic<bool> given_up_{false};                  // required and unanswered: the reader thread stops
  std::string refused_ MSCHED_GUARDED_BY(side_.mu());  // the coordinator's reason
  std::atomic<bool> attention_{false};                 // messages wait in the inbox
  std::atomic<uint32_t> passes_held_{0};               // calls between passing the gate and returning
  JobProgress progress_;                               // MSCHED_PROGRESS's lines
};

void GatePass::Release() {
  if (holder_ != nullptr) std::exchange(holder_, nullptr)->LeaveGate();
}

// The gate every launch and device-side copy passes: one atomic load when
// the job is not coordinated. Nothing waits while a stream is capturing
// (captured work does not run now). Keep the pass until the call returns.
inline GatePass PassGate(Runtime& rt) {
  CoordClient* cc = CoordClient::Active();
  if (cc == nullptr || rt.AnyCapturing()) return {};
  if (cc->EnterGate()) return GatePass(cc);
  GatePass pass;
  Safely(rt, "waiting for the coordinator", [&] { pass = cc->WaitAtGate(rt); });
  return pass;
}

}  // namespace msched::hook

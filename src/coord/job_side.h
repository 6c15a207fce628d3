// JobSide: the job's side of the coordinator protocol, free of any driver,
// thread or socket: what a job does on each order (Go, Stop, Budget), when
// it asks the coordinator to see what it holds before launching again, when
// a launch may pass its gate, when its slice is over, and when it gives its
// turn up for being idle. The hook's coordinator client
// (hook/src/client/coord_client.h) owns the connection, the threads, the shared
// gate page and the simulator's lockstep, and asks this for every decision;
// unit tests drive it with a fake clock and fake ops, as they drive the
// coordinator's Scheduler.
//
// What it keeps, and the rules it keeps them by:
//  - the turn: held from a Go until a Stop, an idle report or the loss of
//    the coordinator. A launch passes only while the turn is held, every ask
//    is answered, the gate page's slot is open (the caller reads that) and
//    the slice has not ended or gone idle.
//  - asks: a usage report above what the coordinator last knew the job to
//    hold asks it to see the job first (proto::Usage::ask, numbered from 1);
//    launches wait until a Budget answers the last ask, so that no kernel
//    runs on a grant decided for less. Any other order (a Stop, a Go) leaves
//    the ask open. A new connection forgets old asks: its hello says what
//    the job holds.
//  - idleness: busy; asked (it reported going idle: the coordinator answers
//    with a Stop, which takes the turn, or a Go, which leaves it); carried
//    on (that Go: it holds its turn, and the coordinator counts it idle
//    until it says it has work again, so its next launch stops at the gate
//    to say so; it does not report going idle again); yielded (stopped
//    after that report, or while carried on: out of the rotation until it
//    says it has work again).
//  - activity, for the idle yield: the device time of its last launch, copy
//    or synchronisation, and the slice end then in force (a new end starts a
//    new count). A job is idle once it has launched nothing for the
//    welcome's idle yield and everything it launched is synchronised (work
//    in flight may still run on the GPU).
//  - the slice end is reported once per turn.
//  - what the last Go loaded and how long that took, which the next Stop
//    reports (the coordinator measures the link with it).
//
// Thread-safety: the launch path's questions (Runnable, Pass, IdleSince,
// Passed, Synchronized) read atomics and take no lock. The rest is guarded
// by three locks the caller takes, handed out (like Runtime::mu()) so that
// the caller's own state can share them and clang checks every access:
// order_mu() (one order or idle yield at a time, in the order sent), mu()
// (what waiting threads look at) and usage_mu() (one usage report at a time,
// so that the coordinator's last figure is the job's latest), taken in that
// order. JobDevice's operations and CoordLink::Send are called holding only
// the locks the method's annotation names; JobClock::Now and
// CoordLink::SliceEnd, mere reads, also under mu().
#pragma once

#include <atomic>
#include <cstdint>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "msched/protocol.h"

namespace msched {

// The job's device clock (virtual time on the simulator).
class JobClock {
 public:
  virtual ~JobClock() = default;
  virtual uint64_t Now() = 0;
  // A Go's start: the clock moves there if it is behind (the simulator's
  // virtual time; real time needs nothing).
  virtual void AdvanceTo(uint64_t t) = 0;
};

// What the orders do to the job's device and memory (the driver and
// JobMemory in the hook).
class JobDevice {
 public:
  struct Ended {
    uint64_t working_set = 0;  // the slice's working set, kept for the next turn
    uint64_t resident = 0;     // bytes the job holds in HBM afterwards
  };
  virtual ~JobDevice() = default;
  // With the gate closed: waits for the calls that passed it, then for all
  // the work queued, so that the stop falls on a kernel boundary.
  virtual void Drain() = 0;
  // The slice ends: takes its working set and gives back `evict_bytes`
  // (kNever: everything), what is needed furthest ahead first; with `wait`,
  // returns once that memory is on the host.
  virtual Ended EndSlice(uint64_t evict_bytes, bool wait) = 0;
  // A turn starts: takes the grant `budget` (0: unchanged) and, with `load`,
  // brings the last slice's working set back in access order, waited for.
  // Returns the bytes loaded.
  virtual uint64_t StartSlice(uint64_t budget, bool load) = 0;
  // The grant changed to `budget` while running: evicts down to it.
  virtual void FitBudget(uint64_t budget) = 0;
  // The coordinator went away: the job's own budget again.
  virtual void WithdrawGrant() = 0;
  // The running totals its reports carry.
  virtual proto::JobCounters Counters() = 0;
};

// The coordinator, as the job sees it.
class CoordLink {
 public:
  virtual ~CoordLink() = default;
  virtual void Send(const proto::Message& m) = 0;
  // The slice end in force (the gate page's; proto::kNever: none).
  virtual uint64_t SliceEnd() = 0;
};

class JobSide {
 public:
  JobSide(JobClock& clock, JobDevice& device, CoordLink& link) : clock_(clock), device_(device), link_(link) {}
  JobSide(const JobSide&) = delete;
  JobSide& operator=(const JobSide&) = delete;

  // Const: a caller's const method may require them.
  Mutex& order_mu() const MSCHED_RETURN_CAPABILITY(order_mu_) { return order_mu_; }
  Mutex& mu() const MSCHED_RETURN_CAPABILITY(mu_) { return mu_; }
  Mutex& usage_mu() const MSCHED_RETURN_CAPABILITY(usage_mu_) { return usage_mu_; }

  // ---- The connection --------------------------------------------------------
  // A hello is about to say the job holds at least `allocating` bytes:
  // returns the figure to send (with what the last usage report read), which
  // a welcome on that connection takes as known.
  uint64_t Hello(uint64_t allocating);
  // Welcomed: no turn until a Go, busy, asks forgotten.
  void OnWelcome(const proto::Welcome& w) MSCHED_REQUIRES(mu_) MSCHED_EXCLUDES(usage_mu_);
  // The connection ended: the turn and the grant go (the job runs alone on
  // its own budget until a coordinator welcomes it). Returns whether the
  // connection had been welcomed; if not, the job counts as dropped.
  bool ConnectionLost() MSCHED_EXCLUDES(mu_);
  bool welcomed() const MSCHED_REQUIRES(mu_) { return welcomed_; }
  // A connection ended before its welcome (a later welcome clears it).
  bool dropped() const MSCHED_REQUIRES(mu_) { return dropped_; }

  // ---- Orders, one at a time in the order sent -------------------------------
  // Moves the clock to the start, takes the budget and the turn's idle
  // yield, brings the working set back if asked, and holds the turn;
  // idleness counts from now. Returns whether the idle yield changed.
  bool OnGo(const proto::Go& go) MSCHED_REQUIRES(order_mu_) MSCHED_EXCLUDES(mu_);
  // Closes the gate, drains, ends the slice (evicting what the coordinator
  // named) and answers. A Stop that answers an idle report leaves the job
  // yielded.
  void OnStop(const proto::Stop& stop) MSCHED_REQUIRES(order_mu_) MSCHED_EXCLUDES(mu_);
  // Evicts down to a new grant; an answer to the last ask lets launches go.
  void OnBudget(const proto::Budget& budget) MSCHED_REQUIRES(order_mu_) MSCHED_EXCLUDES(usage_mu_);

  // ---- Usage -------------------------------------------------------------------
  // The job holds `bytes` now: reported when `coordinated`, asking for an
  // answer when that is more than the coordinator knows it to hold.
  void ReportUsage(uint64_t bytes, bool coordinated) MSCHED_REQUIRES(usage_mu_);

  // ---- The launch gate ----------------------------------------------------------
  // Holds its turn (its last Go not yet followed by a Stop or an idle report).
  bool holds_turn() const { return holds_turn_.load(); }
  // Holds its turn, every ask is answered, and it need not say it has work
  // again (carried on).
  bool Runnable() const;
  // Where the job stands in its slice under slice end `end`, the gate open.
  enum class At : uint8_t {
    kOpen,  // it may launch
    kIdle,  // idle for the idle yield: it gives its turn up as of idle_since
    kOver,  // the slice has ended: it reports that, once (ReachedSliceEnd)
  };
  struct Position {
    At at = At::kOpen;
    uint64_t now = 0;  // the clock when it looked (0: not read, the slice has no end)
    uint64_t idle_since = 0;
  };
  Position Look(uint64_t end) const;
  // The lock-free pass: Look says kOpen (then the launch counts as activity).
  bool Pass(uint64_t end);
  // The job was active at `now` under slice end `end` (kNever: no count).
  void NoteActive(uint64_t now, uint64_t end);
  // A launch or copy that passed the gate returned (its work is queued).
  void Passed(uint64_t end);
  // Those calls so far: a synchronisation takes this before it starts...
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }
  // ... and, once it succeeded, says so: all of that work is complete.
  void Synchronized(uint64_t passes_before, uint64_t end);
  // The slice is over at `now`: reported once per turn.
  void ReachedSliceEnd(uint64_t now) MSCHED_REQUIRES(mu_);
  // It wants to launch: if it had given its turn up, or was carried on, it
  // says it has work again (back in the rotation, or busy in its turn).
  void HasWork() MSCHED_REQUIRES(mu_);

  // ---- Idle yield -----------------------------------------------------------------
  uint64_t idle_yield_ns() const { return idle_yield_ns_.load(); }
  // When the job went idle, or 0 if it is not idle at `now` under `end` (or
  // the coordinator knows it is: carried on).
  uint64_t IdleSince(uint64_t now, uint64_t end) const;
  // When it will be idle if nothing happens (a timer's next look).
  uint64_t IdleDue() const;
  // A timer's look at slice end `end` (a launch's is Look): if the count is
  // for another end (slices began, or moved), it starts from now.
  Position TimerLook(uint64_t end);
  // Giving the turn up, first step: the gate closes. False if the turn was
  // already taken away. The caller then waits for the calls holding a pass.
  bool GiveTurnUp() MSCHED_REQUIRES(order_mu_) { return holds_turn_.exchange(false); }
  // Second step, with slice end `end` (kNever: none in force or the gate
  // shut): if the job is still `coordinated` and idle, reports going idle
  // as of `since` and returns true; otherwise it holds its turn again.
  bool AskIdle(bool coordinated, uint64_t end, uint64_t since) MSCHED_REQUIRES(order_mu_, mu_);
  // Reported going idle; no answer carried out yet.
  bool idle_asked() const MSCHED_REQUIRES(mu_) { return idleness_ == Idleness::kAsked; }
  // Out of the rotation until it has work again.
  bool yielded() const MSCHED_REQUIRES(mu_) { return idleness_ == Idleness::kYielded; }
  // Counted idle by the coordinator (yielded, or carried on): it launches
  // nothing, so a timer carries out the orders that come for it.
  bool known_idle() const MSCHED_REQUIRES(mu_) {
    return idleness_ == Idleness::kYielded || idleness_ == Idleness::kCarriedOn;
  }

 private:
  enum class Idleness : uint8_t { kBusy, kAsked, kCarriedOn, kYielded };

  void SetIdleness(Idleness i) MSCHED_REQUIRES(mu_);

  void NoteActiveNow(uint64_t end);

  JobClock& clock_;
  JobDevice& device_;
  CoordLink& link_;

  mutable Mutex order_mu_;
  mutable Mutex mu_ MSCHED_ACQUIRED_AFTER(order_mu_);
  mutable Mutex usage_mu_ MSCHED_ACQUIRED_AFTER(order_mu_, mu_);

  // Written under order_mu_ (a Go, a Stop, an idle yield) or by the
  // connection's welcome and loss; read by launches.
  std::atomic<bool> holds_turn_{false};
  Idleness idleness_ MSCHED_GUARDED_BY(mu_) = Idleness::kBusy;
  std::atomic<bool> carried_on_{false};  // idleness_ == kCarriedOn, for the launch path
  bool slice_end_sent_ MSCHED_GUARDED_BY(mu_) = false;
  bool welcomed_ MSCHED_GUARDED_BY(mu_) = false;
  bool dropped_ MSCHED_GUARDED_BY(mu_) = false;

  // Asks sent and the last one answered (only ever raised).
  std::atomic<uint64_t> asks_{0};
  std::atomic<uint64_t> answered_{0};
  std::atomic<uint64_t> allocated_{0};        // what the last usage report read
  std::atomic<uint64_t> hello_allocated_{0};  // what the last hello reported
  // What the coordinator knows the job holds once its reports so far are
  // answered: raised to the last ask's bytes when that is answered, lowered
  // at once by a report that asks nothing.
  uint64_t seen_allocated_ MSCHED_GUARDED_BY(usage_mu_) = 0;
  uint64_t last_ask_bytes_ MSCHED_GUARDED_BY(usage_mu_) = 0;

  std::atomic<uint64_t> idle_yield_ns_{0};  // the welcome's, then the last Go's; 0: never yield
  std::atomic<uint64_t> passes_{0};         // calls that passed the gate and returned
  std::atomic<uint64_t> synced_passes_{0};  // of which the work is known complete
  std::atomic<uint64_t> last_active_ns_{0};
  std::atomic<uint64_t> last_active_end_{0};

  uint64_t loaded_bytes_ MSCHED_GUARDED_BY(order_mu_) = 0;
  uint64_t load_ns_ MSCHED_GUARDED_BY(order_mu_) = 0;
};

}  // namespace msched

// The job's side of the coordinator. At the job's first allocation it
// connects (MSCHED_COORD=auto: if a coordinator answers; required: waiting
// up to MSCHED_COORD_WAIT, then failing the allocation clearly; off: never)
// to a coordinator run by this user or root only, and registers; while the
// job is queued that allocation blocks. The coordinator's Welcome is
// awaited for MSCHED_COORD_WAIT (required: then the allocation fails) or at
// most kAutoAnswerWait (auto: then the job runs alone, and joins if the
// coordinator answers later), so a stopped coordinator never hangs a job. From then
// on every launch and device-side copy passes the gate:
//   - fast path, no system call: the job holds its turn (its last Go), the
//     coordinator's shared-memory slot says it may run, and the device clock
//     is before its slice end;
//   - slow path: report the slice end, carry out what the coordinator asks,
//     in order (Stop: drain, take the slice's working set, evict what the
//     coordinator named by OPT, answer; Go: move the clock to the start,
//     take the budget, bring the working set back in access order; Budget:
//     evict down to it), and wait, marked blocked for the simulator's
//     lockstep, until it may run.
// A reader thread receives messages and only queues them: every driver call
// is made by an application thread holding the Runtime's lock. If the
// coordinator goes away the job carries on alone with its own budget, and
// the reader thread reconnects to a new coordinator when one appears,
// backing off while coordinators drop it before welcoming it.
// Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "coord/coord_shm.h"
#include "hook_guard.h"
#include "msched/protocol.h"
#include "runtime.h"

namespace msched::hook {

class CoordClient {
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
  Status Register(Runtime& rt, uint64_t bytes) MSCHED_EXCLUDES(register_mu_, mu_);
  // Allocated bytes changed (after an allocation or a free).
  void ReportAllocated(uint64_t bytes);

  // The launch path: may the job launch now? No system call.
  bool MayLaunch() const;
  // The slow path: blocks until it may launch, doing what the coordinator asks.
  void WaitTurn(Runtime& rt) MSCHED_EXCLUDES(mu_);

 private:
  CoordClient(Runtime& rt, const Config& config) : rt_(rt), config_(config) {}
  // Connects and says hello; returns the socket.
  Result<int> Connect(uint64_t allocated);
  void ReaderLoop() MSCHED_EXCLUDES(mu_);
  // The coordinator's orders, carried out on rt_ (the Runtime's lock taken
  // inside, never held by the caller).
  void Execute(const proto::Message& m) MSCHED_EXCLUDES(mu_);
  void OnStop(const proto::Stop& stop) MSCHED_EXCLUDES(mu_);
  void OnGo(const proto::Go& go) MSCHED_EXCLUDES(mu_);
  void OnBudget(uint64_t budget) MSCHED_EXCLUDES(mu_);
  void Send(const proto::Message& m) MSCHED_EXCLUDES(send_mu_);
  // The job's running totals that its reports carry, for mschedd's metrics.
  proto::JobCounters Counters() const;
  void BecomeStandalone(const std::string& why) MSCHED_EXCLUDES(mu_);
  static void SayGoodbye();

  static std::atomic<CoordClient*> active_;
  Runtime& rt_;
  const Config& config_;

  Mutex register_mu_;  // one registration at a time
  bool registered_ MSCHED_GUARDED_BY(register_mu_) = false;
  Status refusal_ MSCHED_GUARDED_BY(register_mu_);  // why the job may not run

  Mutex send_mu_;  // one message at a time on the socket
  std::atomic<int> fd_{-1};

  Mutex mu_ MSCHED_ACQUIRED_AFTER(register_mu_);
  CondVar cv_;  // signalled under mu_ when the fields below change
  std::deque<proto::Message> inbox_ MSCHED_GUARDED_BY(mu_);
  bool welcomed_ MSCHED_GUARDED_BY(mu_) = false;
  bool dropped_ MSCHED_GUARDED_BY(mu_) = false;  // a connection ended before its welcome
  std::atomic<bool> given_up_{false};   // required and unanswered: the reader thread stops
  std::string refused_ MSCHED_GUARDED_BY(mu_);  // the coordinator's reason
  // The job's slot in the coordinator's shared memory. A mapping is never
  // unmapped (a launch may be reading an old one when the job reconnects).
  std::atomic<const ShmSlot*> gate_{nullptr};
  std::atomic<bool> attention_{false};  // messages wait in the inbox
  std::atomic<bool> running_{false};    // holds its turn (last Go not yet followed by a Stop)
  bool slice_end_sent_ MSCHED_GUARDED_BY(mu_) = false;

  std::vector<ByteRange> last_working_set_ MSCHED_GUARDED_BY(rt_.mu());
  uint64_t loaded_bytes_ MSCHED_GUARDED_BY(rt_.mu()) = 0;
  uint64_t load_ns_ MSCHED_GUARDED_BY(rt_.mu()) = 0;
  std::atomic<uint64_t> allocated_{0};
};

// The gate every launch and device-side copy passes: one atomic load when
// the job is not coordinated. Nothing waits while a stream is capturing
// (captured work does not run now).
inline void PassGate(Runtime& rt) {
  CoordClient* cc = CoordClient::Active();
  if (cc == nullptr || rt.capturing.load(std::memory_order_relaxed) > 0 || cc->MayLaunch()) return;
  Safely(rt, "waiting for the coordinator", [&] { cc->WaitTurn(rt); });
}

}  // namespace msched::hook

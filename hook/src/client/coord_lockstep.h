// The simulator's lockstep, on the job's side of the coordinator: a job
// that has sent something the coordinator has not handled yet, or has an
// order on its way, or has woken peers not yet back on the clock, holds its
// place on the simulated device's clock (docs/simulator.md, "Determinism")
// instead of blocking, so that simulated runs repeat. Chosen once from the
// device environment (device_env.h): on a GPU the lockstep is NoLockstep,
// which never holds and never waits, so the launch path asks nothing about
// the driver. Reads only what both ends of the connection count (LinkCounts)
// and the environment; unit-tested with fakes of both. Used by hook/ only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "coord/coord_shm.h"
#include "job/device_env.h"

namespace msched::hook {

// How long a job holds its place without progress, for the coordinator to
// handle what it sent, for an order on its way, or for the jobs woken with
// it, and how often it looks meanwhile.
inline constexpr auto kHandledWait = std::chrono::seconds(2);
inline constexpr auto kHandledRecheckEvery = std::chrono::microseconds(200);

// What the job's end of a connection counts, compared with what the
// coordinator's gate page counts. Written by the connection (the reader
// thread and the sender), read by the gate and the lockstep without a lock.
struct LinkCounts {
  // The job's slot in the coordinator's gate page, the whole page, and the
  // slot's index: the other jobs' slots. A page is never unmapped (a launch
  // may be reading an old one when the job reconnects). The page and the
  // index are stored before the slot (release).
  std::atomic<const ShmSlot*> gate{nullptr};
  std::atomic<const CoordShm*> page{nullptr};
  std::atomic<uint32_t> slot_index{0};
  std::atomic<uint64_t> job_id{0};  // the job the welcome numbered
  // Orders received on this connection (compared with the slot's
  // orders_sent); written by the reader thread.
  std::atomic<uint64_t> orders_received{0};
  // Messages sent on this connection since its hello (compared with the
  // slot's messages_handled).
  std::atomic<uint64_t> messages_sent{0};
};

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

class Lockstep {
 public:
  // The lockstep for `env`: None() unless its processes share a clock.
  static std::unique_ptr<Lockstep> For(DeviceEnv& env, const LinkCounts& link);
  // A GPU's: jobs run in real time, and nothing holds or waits.
  static std::unique_ptr<Lockstep> None();
  virtual ~Lockstep() = default;

  // Returns at the job's turn on the shared clock: what it reads of the
  // gate or says to the coordinator next happens in time order.
  virtual void WaitForTurn() = 0;
  // A launch must wait: a message the job sent is unhandled, or an order
  // to it is on its way (it is carried out at this launch either way).
  virtual bool HoldsLaunches() const = 0;
  // The job must keep its place on the clock for now: HoldsLaunches, or a
  // job it woke is not back on the clock yet.
  virtual bool Unsettled() const = 0;
  // An order the coordinator counted as sent has not reached the job yet.
  virtual bool OrderInFlight() const = 0;
  // After a message sent outside the wait for a turn (a goodbye, an idle
  // report's stop reply): the coordinator has not handled it yet, or the
  // jobs it woke are not back on the clock.
  virtual bool Unheard() const = 0;
  // The sum of the counts the above look at: it moves when either side
  // makes progress (HoldDeadline).
  virtual uint64_t Progress() const = 0;

  // Holds the job's place while (this->*unsettled)(), bounded by
  // kHandledWait without progress; each look drops `mu`, waits for the
  // turn (which stamps the job's activity: a holder silent for long would
  // look idle, and the others would pass it) and waits on `cv` a moment.
  void HoldWhile(bool (Lockstep::*unsettled)() const, Mutex* mu, CondVar* cv) MSCHED_REQUIRES(mu);
  // One such look.
  void HoldAWhile(Mutex* mu, CondVar* cv) MSCHED_REQUIRES(mu);
};

}  // namespace msched::hook

// The coordinator's orders to the job, carried out in the order sent: the
// connection's reader thread queues them (Push), and whichever thread comes
// to them next carries them out (RunQueued): an application thread waiting
// at the gate, the idle timer of a real GPU, the simulator's idle alarm.
// One order runs at a time, in order: order_mu() is taken before an order
// is taken from the queue, and mu() is let go while it runs, so that the
// order may drain the job's work, call the driver and take the Runtime's
// lock. Thread-safe; the queue shares JobSide's mu() (its lock order:
// order_mu() before mu()). Used by the hook's coordinator client.
#pragma once

#include <atomic>
#include <deque>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "coord/job_side.h"
#include "msched/protocol.h"

namespace msched::hook {

// What an order does: called with JobSide's order_mu() held and its mu()
// not.
class OrderHandler {
 public:
  virtual ~OrderHandler() = default;
  virtual void Execute(const proto::Message& m) = 0;
};

class OrderRunner {
 public:
  OrderRunner(JobSide& side, OrderHandler& handler) : side_(side), handler_(handler) {}
  OrderRunner(const OrderRunner&) = delete;
  OrderRunner& operator=(const OrderRunner&) = delete;

  // JobSide's mu(), which the queue shares. A caller that holds it through
  // its own JobSide says so with mu().AssertHeld(): the thread-safety
  // analysis cannot tell that two references name one JobSide.
  Mutex& mu() const MSCHED_RETURN_CAPABILITY(side_.mu()) { return side_.mu(); }

  // Queues `m` behind the orders not carried out yet.
  void Push(proto::Message m) MSCHED_REQUIRES(side_.mu());
  // Drops the orders not carried out (the connection that sent them ended).
  void Clear() MSCHED_REQUIRES(side_.mu());
  bool empty() const MSCHED_REQUIRES(side_.mu()) { return queue_.empty(); }
  // Orders wait: the launch path's check, one atomic load.
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // Carries out every queued order, including those queued meanwhile, one
  // at a time: mu() is let go while each runs, and held again on return.
  void RunQueued() MSCHED_REQUIRES(side_.mu()) MSCHED_EXCLUDES(side_.order_mu());

 private:
  JobSide& side_;
  OrderHandler& handler_;
  std::deque<proto::Message> queue_ MSCHED_GUARDED_BY(side_.mu());
  std::atomic<bool> pending_{false};  // queue_ is not empty
};

}  // namespace msched::hook

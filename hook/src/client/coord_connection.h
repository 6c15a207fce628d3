// The job's connection to its coordinator: the socket, what both ends count
// of it (LinkCounts, with the gate page a welcome maps), and the reader,
// which only receives: a welcome maps the gate page it carries; a refusal
// is kept; every other message is an order, queued for the OrderRunner.
// When the connection ends, the reader tells the client, and connects again
// through it: at once after a connection that was welcomed (a coordinator
// restart), backing off while coordinators drop the job before welcoming
// it. What a welcome, a refusal and a loss mean to the job is the client's
// (ConnectionEvents). Thread-safe: the socket is replaced under send_mu(),
// a leaf lock; messages are handled under JobSide's mu(). Used by the
// hook's coordinator client; unit-tested over a socket pair.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "client/coord_lockstep.h"
#include "client/order_runner.h"
#include "coord/job_side.h"
#include "msched/protocol.h"
#include "msched/status.h"

namespace msched::hook {

class ConnectionEvents {
 public:
  virtual ~ConnectionEvents() = default;
  // Welcomed: the gate page is mapped and in LinkCounts. Under JobSide's mu().
  virtual void Welcomed(const proto::Welcome& w) = 0;
  // Refused (CoordConnection::refused says why). Under mu().
  virtual void Refused() = 0;
  // The connection ended, for `why`: returns whether it had been welcomed.
  // No lock held.
  virtual bool Lost(const std::string& why) = 0;
  // A new connection with its hello sent, or why there is none yet (tried
  // again after a backoff). No lock held.
  virtual Result<int> Reconnect() = 0;
};

class CoordConnection {
 public:
  // How long the reader waits before connecting again after a connection
  // that was not welcomed, doubling up to the most.
  static constexpr auto kReconnectEvery = std::chrono::seconds(1);
  static constexpr auto kMaxReconnectEvery = std::chrono::seconds(60);

  CoordConnection(JobSide& side, OrderRunner& orders, CondVar& changed, ConnectionEvents& events)
      : side_(side), orders_(orders), changed_(changed), events_(events) {}
  CoordConnection(const CoordConnection&) = delete;
  CoordConnection& operator=(const CoordConnection&) = delete;

  // Installs a new connection's socket: both ends count messages and orders
  // from its hello on. The reader reads it only after this.
  void Use(int fd) MSCHED_EXCLUDES(send_mu_);
  // Sends `m` if connected; a failure surfaces in the reader.
  void Send(const proto::Message& m) MSCHED_EXCLUDES(send_mu_);
  // Receives, and reconnects, until GiveUp; signals `changed` under mu()
  // after each message. On a thread of its own, or the caller's.
  void ReadLoop() MSCHED_EXCLUDES(side_.mu(), send_mu_);
  // Stops the reader: the socket is shut, and the reader returns instead of
  // connecting again.
  void GiveUp();

  const LinkCounts& link() const { return link_; }
  // JobSide's mu(), under which messages are handled (see OrderRunner::mu).
  Mutex& mu() const MSCHED_RETURN_CAPABILITY(side_.mu()) { return side_.mu(); }
  // The coordinator's reason, once it refused the job.
  const std::string& refused() const MSCHED_REQUIRES(side_.mu()) { return refused_; }

 private:
  // Carries out what `m` says, under mu().
  void Handle(int fd, proto::Message m, int passed_fd) MSCHED_REQUIRES(side_.mu());

  JobSide& side_;
  OrderRunner& orders_;
  CondVar& changed_;
  ConnectionEvents& events_;

  Mutex send_mu_;  // one message at a time on the socket
  std::atomic<int> fd_{-1};
  std::atomic<bool> given_up_{false};
  // messages_sent and orders_received are reset with fd_ under send_mu_;
  // LinkCounts says who writes the rest.
  LinkCounts link_;
  std::string refused_ MSCHED_GUARDED_BY(side_.mu());
};

}  // namespace msched::hook

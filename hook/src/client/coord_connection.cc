#include "client/coord_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "coord/coord_shm.h"
#include "coord/unix_socket.h"
#include "observe/log.h"

namespace msched::hook {

void CoordConnection::Use(int fd) {
  MutexLock lock(&send_mu_);
  link_.messages_sent.store(0);
  link_.orders_received.store(0);
  fd_.store(fd);
}

void CoordConnection::Send(const proto::Message& m) {
  MutexLock lock(&send_mu_);
  const int fd = fd_.load();
  if (fd < 0) return;
  link_.messages_sent.fetch_add(1);
  (void)SendMessage(fd, m);
}

void CoordConnection::GiveUp() {
  given_up_.store(true);
  ::shutdown(fd_.load(), SHUT_RDWR);  // the reader sees it and stops
}

void CoordConnection::ReadLoop() {
  std::chrono::seconds backoff = kReconnectEvery;
  for (;;) {
    const int fd = fd_.load();
    int passed_fd = -1;
    Result<proto::Message> m = ReceiveMessage(fd, -1, &passed_fd);
    if (m.ok()) {
      MutexLock lock(&side_.mu());
      Handle(fd, std::move(*m), passed_fd);
      changed_.NotifyAll();
      continue;
    }
    ::close(fd);
    fd_.store(-1);
    const bool welcomed = events_.Lost("lost the coordinator (" + m.status().message() + ")");
    if (given_up_.load()) return;
    // A coordinator that drops the job before welcoming it would do so
    // again at once: wait longer each time. One that served the job and
    // went away is tried again at once (a restart).
    if (welcomed) {
      backoff = kReconnectEvery;
    } else {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxReconnectEvery);
    }
    Result<int> again = events_.Reconnect();
    while (!again.ok() && !given_up_.load()) {
      std::this_thread::sleep_for(backoff);
      again = events_.Reconnect();
    }
    if (given_up_.load()) {
      if (again.ok()) ::close(*again);
      return;
    }
    Use(*again);
  }
}

void CoordConnection::Handle(int fd, proto::Message m, int passed_fd) {
  if (auto* w = std::get_if<proto::Welcome>(&m)) {
    Result<CoordShm> shm = CoordShm::OpenReadOnly(passed_fd);
    if (!shm.ok() || w->slot >= kShmSlots) {
      LogError("unusable welcome from the coordinator ({}); running alone",
               shm.ok() ? "slot out of range" : shm.status().message());
      ::shutdown(fd, SHUT_RDWR);  // the next receive fails; that path closes it and reconnects later
      return;
    }
    const CoordShm* mapping = new CoordShm(std::move(*shm));  // never unmapped: see LinkCounts::gate
    link_.page.store(mapping, std::memory_order_release);
    link_.slot_index.store(w->slot, std::memory_order_release);
    link_.job_id.store(w->job);
    link_.gate.store(&mapping->slot(w->slot), std::memory_order_release);
    events_.Welcomed(*w);
    return;
  }
  if (passed_fd >= 0) ::close(passed_fd);  // only a welcome carries one
  if (auto* r = std::get_if<proto::Refused>(&m)) {
    refused_ = r->reason;
    events_.Refused();
    return;
  }
  link_.orders_received.fetch_add(1);  // all but the welcome and a refusal are orders
  orders_.mu().AssertHeld();
  orders_.Push(std::move(m));
}

}  // namespace msched::hook

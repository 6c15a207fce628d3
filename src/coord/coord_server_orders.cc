// The gates and the orders: every job's slot in the gate page follows the
// scheduler's state before any order that state brings is sent, and orders
// reach a job that does not read in order, queued and bounded.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "coord/coord_server.h"

namespace msched {
namespace {

// Orders queued for a job whose socket takes no more. Consecutive Budgets
// merge, so a job that does not read (stopped, suspended by Slurm) while its
// neighbours' usage moves its grant holds one; the queue grows only with
// Go and Stop, which a job off the rotation is not sent.
constexpr size_t kMaxQueuedOrders = 256;

}  // namespace

void CoordServer::Apply(const Commands& commands) {
  if (trace_) trace_->Sent(scheduler_, commands);
  // The gates first: a job acts on its Go at once and launches only while
  // its gate is open too; one it found still closed would cost it a recheck
  // period.
  SyncSlots();
  for (const Command& cmd : commands) {
    auto it = fd_of_job_.find(cmd.job);
    if (it == fd_of_job_.end()) continue;
    const bool refused = std::holds_alternative<proto::Refused>(cmd.order);
    if (refused) {
      const Job* j = scheduler_.Find(cmd.job);
      Log("job " + std::to_string(cmd.job) + (j ? " (" + j->name + ")" : std::string()) +
          " refused: " + std::get<proto::Refused>(cmd.order).reason);
    }
    // Counted before it is written: one the job has not received is on its way.
    std::atomic<uint64_t>* sent = nullptr;
    if (auto s = slot_of_job_.find(cmd.job); s != slot_of_job_.end() && !refused) {
      sent = &shm_.slot(s->second).orders_sent;
      sent->fetch_add(1, std::memory_order_release);
    }
    auto conn = conns_.find(it->second);
    if (conn == conns_.end() ||
        !Deliver(*conn->second, std::visit([](const auto& o) { return proto::Message(o); }, cmd.order), sent)) {
      // Broken, or more orders behind than a live job leaves unread: no
      // further message could be read from it. Shut down, EPOLLRDHUP/EOF
      // removes it; the watchdog covers the gap.
      if (sent != nullptr) sent->fetch_sub(1, std::memory_order_release);
      ::shutdown(it->second, SHUT_RDWR);
      Log("cannot write to job " + std::to_string(cmd.job) + "; dropping its connection");
    }
  }
}

bool CoordServer::Deliver(Conn& c, proto::Message m, std::atomic<uint64_t>* sent) {
  // Orders wait in `queued` only while the socket takes no more. A Budget
  // behind a Budget replaces it: the job acts on its latest grant, and on
  // the latest ask answered (they only rise); the order it replaces is no
  // longer on its way.
  auto* budget = std::get_if<proto::Budget>(&m);
  auto* last = c.queued.empty() ? nullptr : std::get_if<proto::Budget>(&c.queued.back());
  if (budget != nullptr && last != nullptr) {
    last->budget = budget->budget;
    last->answers = std::max(last->answers, budget->answers);
    if (sent != nullptr) sent->fetch_sub(1, std::memory_order_release);
    return true;
  }
  if (c.queued.size() >= kMaxQueuedOrders) return false;
  c.queued.push_back(std::move(m));
  return Flush(c);
}

bool CoordServer::Flush(Conn& c) {
  for (;;) {
    if (c.writing.empty()) {
      if (c.queued.empty()) break;
      c.writing = proto::Encode(c.queued.front());
      c.queued.pop_front();
    }
    const ssize_t n = ::send(c.fd, c.writing.data(), c.writing.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return false;
    c.writing.erase(0, static_cast<size_t>(n));
  }
  // Told when the socket takes more, while anything waits.
  const bool waiting = !c.writing.empty() || !c.queued.empty();
  if (waiting != c.watching_writable) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (waiting ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.fd = c.fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    c.watching_writable = waiting;
  }
  return true;
}

void CoordServer::SyncSlots() {
  const uint64_t end = scheduler_.slice_end_ns();
  for (const auto& [id, slot] : slot_of_job_) {
    const Job* j = scheduler_.Find(id);
    ShmSlot& s = shm_.slot(slot);
    const bool run = j != nullptr && scheduler_.MayRun(*j);
    s.slice_end_ns.store(run ? end : 0, std::memory_order_relaxed);
    s.may_run.store(run ? 1 : 0, std::memory_order_release);
  }
  if (trace_) trace_->Sync(scheduler_);
  if (metrics_) metrics_->Sync(scheduler_);
  wall_.Sync(scheduler_.jobs(), WallNow());
  LogSwitches();
}

void CoordServer::LogSwitches() {
  // At most a line a second: slices of a few milliseconds would otherwise
  // fill the log. Each line says how many switches it covers and who holds
  // the GPU after the last.
  const uint64_t switches = scheduler_.switches(), now_ms = WallNow() / 1000000;
  if (switches == switches_logged_ || now_ms - switch_logged_ms_ < 1000) return;
  std::string holders;
  for (const auto& [id, j] : scheduler_.jobs()) {
    if (j.active) holders += (holders.empty() ? "job " : ", job ") + std::to_string(id) + " (" + j.name + ")";
  }
  const uint64_t n = switches - switches_logged_;
  Log(std::to_string(n) + (n == 1 ? " switch" : " switches") + " of the GPU since the last such line; it is now " +
      (holders.empty() ? std::string("idle") : "with " + holders));
  switches_logged_ = switches;
  switch_logged_ms_ = now_ms;
}

}  // namespace msched

// The coordinator's event loop: the listening socket, reading and
// dispatching the jobs' messages, closing connections, the watchdog and the
// tick's chores. Registration, control requests and the gates and orders are
// in coord_server_{register,control,orders}.cc.
#include "coord/coord_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace msched {
namespace {

constexpr int kTickMs = 100;                    // watchdog and idle checks
constexpr size_t kSpareConnectionsPerUser = 8;  // a guest's CLI requests and jobs still saying hello

// The version msched_build_info reports.
#ifndef MSCHED_VERSION
#error "the build defines MSCHED_VERSION (src/CMakeLists.txt)"
#endif

// The coordinator's real time: a monotonic clock, in nanoseconds.
uint64_t SteadyNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t NowMs() { return SteadyNowNs() / 1000000; }

// The job's clock reading a message from a job carries, if it has one.
uint64_t* TimeIn(proto::Message& m) {
  if (auto* h = std::get_if<proto::Hello>(&m)) return &h->now_ns;
  if (auto* u = std::get_if<proto::Usage>(&m)) return &u->now_ns;
  if (auto* e = std::get_if<proto::SliceEnd>(&m)) return &e->now_ns;
  if (auto* i = std::get_if<proto::Idle>(&m)) return &i->at_ns;
  if (auto* s = std::get_if<proto::Stopped>(&m)) return &s->now_ns;
  if (auto* g = std::get_if<proto::Goodbye>(&m)) return &g->now_ns;
  return nullptr;
}

}  // namespace

uint64_t CoordServer::CheckedTime(Conn& c, uint64_t claimed) {
  if (!options_.device_clock) return claimed;
  const uint64_t own = options_.device_clock();
  if (claimed <= own || claimed - own <= kClockSlackNs) return claimed;
  if (!c.clock_doubted) {
    c.clock_doubted = true;
    Log(Who(c.peer.uid, c.peer.pid) + " says the device's time is " + std::to_string(claimed) + " ns, " +
        std::to_string((claimed - own) / 1000000) + " ms ahead of the device's own clock; its times are taken " +
        "as the device's");
  }
  return own;
}

uint64_t CoordServer::WallNow() { return SteadyNowNs(); }

std::string CoordServer::Who(uint32_t uid, int32_t pid) {
  return "pid " + std::to_string(pid) + ", uid " + std::to_string(uid);
}

Result<std::unique_ptr<CoordServer>> CoordServer::Start(ServerOptions options) {
  Result<int> listen_fd = ListenUnix(options.socket_path, ::geteuid() == 0);
  if (!listen_fd.ok()) return listen_fd.status();
  Result<CoordShm> shm = CoordShm::Create();
  if (!shm.ok()) {
    ::close(*listen_fd);
    ::unlink(options.socket_path.c_str());
    return shm.status();
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (wake < 0 || ep < 0) {
    ::close(*listen_fd);
    ::unlink(options.socket_path.c_str());
    return Status::IoError(std::string("epoll/eventfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = *listen_fd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, *listen_fd, &ev);
  ev.data.fd = wake;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  // Only now that this coordinator owns the socket: a second one started by
  // mistake must not truncate the first one's timeline.
  std::unique_ptr<CoordTrace> trace;
  if (!options.trace_path.empty()) {
    Result<std::unique_ptr<trace::Writer>> writer = trace::Writer::Create(options.trace_path, options.trace_max_bytes);
    if (!writer.ok()) {
      ::close(ep);
      ::close(wake);
      ::close(*listen_fd);
      ::unlink(options.socket_path.c_str());
      return writer.status();
    }
    trace = std::make_unique<CoordTrace>(std::move(*writer));
  }
  return std::unique_ptr<CoordServer>(
      new CoordServer(std::move(options), *listen_fd, wake, ep, std::move(*shm), std::move(trace)));
}

CoordServer::CoordServer(ServerOptions options, int listen_fd, int wake_fd, int epoll_fd, CoordShm shm,
                         std::unique_ptr<CoordTrace> trace)
    : options_(std::move(options)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      epoll_fd_(epoll_fd),
      shm_(std::move(shm)),
      scheduler_(options_.policy),
      trace_(std::move(trace)),
      idle_since_ms_(NowMs()),
      own_uid_(static_cast<uint32_t>(::geteuid())) {
  if (options_.metrics) {
    const double started = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    metrics_ = std::make_unique<CoordMetrics>(MSCHED_VERSION, started, options_.metrics_job_names);
    PublishMetrics();  // the board is never empty once the server exists
  }
  Log("coordinator listening at " + options_.socket_path);
}

CoordServer::~CoordServer() {
  if (trace_) {
    if (Status s = trace_->Close(scheduler_); !s.ok()) Log(s.message());
  }
  for (auto& [fd, c] : conns_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::close(epoll_fd_);
  ::unlink(options_.socket_path.c_str());
}

void CoordServer::Shutdown() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void CoordServer::Run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, kTickMs);
    if (n < 0 && errno != EINTR) {
      Log(std::string("epoll_wait failed: ") + std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) return;
      if (fd == listen_fd_) {
        Accept();
        continue;
      }
      if (events[i].events & EPOLLOUT) {
        auto it = conns_.find(fd);
        if (it != conns_.end() && !Flush(*it->second)) ::shutdown(fd, SHUT_RDWR);  // EOF then removes it
      }
      if (events[i].events & ~static_cast<uint32_t>(EPOLLOUT)) OnReadable(fd);
    }
    Watchdog();
    ExpireConnections();
    if (trace_) trace_->Flush();
    PublishMetrics();
    if (!fd_of_job_.empty()) idle_since_ms_ = NowMs();
    if (options_.idle_exit_ms > 0 && fd_of_job_.empty() && NowMs() - idle_since_ms_ >= options_.idle_exit_ms) {
      Log("no jobs for " + std::to_string(options_.idle_exit_ms / 1000) + " s; exiting");
      return;
    }
  }
}

void CoordServer::Accept() {
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    // Out of descriptors: the pending connection stays queued and the
    // listening socket stays readable, so stop watching it until one closes.
    if (errno == EMFILE || errno == ENFILE) PauseAccepting(true);
    return;
  }
  Result<PeerCred> peer = PeerOf(fd);
  if (!peer.ok()) {
    ::close(fd);
    return;
  }
  if (!Privileged(peer->uid) &&
      ConnectionsOf(peer->uid, false) >= options_.max_jobs_per_user + kSpareConnectionsPerUser) {
    Log("refused a connection from " + Who(peer->uid, peer->pid) + ": that user holds too many connections");
    ::close(fd);
    return;
  }
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  c->peer = *peer;
  c->opened_ms = NowMs();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  conns_[fd] = std::move(c);
}

void CoordServer::OnReadable(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  // Serves each chunk's frames before reading the next, so a connection
  // never buffers more than one (size-capped) frame and a chunk.
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n > 0) c.reader.Append(buf, static_cast<size_t>(n));
    for (;;) {
      Result<std::optional<proto::Message>> m = c.reader.Next();
      if (!m.ok()) {
        Log("rejected a malformed message from " + Who(c.peer.uid, c.peer.pid) + ": " + m.status().message());
        return Close(fd, "malformed message");
      }
      if (!m->has_value()) break;
      try {
        Handle(c, std::move(**m));
      } catch (const std::exception& e) {
        // A bug in serving one message costs its connection, never the coordinator.
        Log("internal error serving " + Who(c.peer.uid, c.peer.pid) + ": " + e.what());
        if (conns_.count(fd)) Close(fd, "internal error");
      }
      if (conns_.find(fd) == conns_.end()) return;  // Handle closed it
    }
    c.partial_since_ms = c.reader.pending() == 0 ? 0 : c.partial_since_ms ? c.partial_since_ms : NowMs();
    if (n <= 0) return Close(fd, n == 0 ? "connection closed" : std::string("recv: ") + std::strerror(errno));
  }
}

void CoordServer::Close(int fd, const std::string& why) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  const uint64_t job = it->second->job;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
  PauseAccepting(false);
  if (job == 0) return;
  fd_of_job_.erase(job);
  awaiting_since_ms_.erase(job);
  if (const Job* j = scheduler_.Find(job); j != nullptr && j->state != JobState::kFinished) {
    Log("job " + std::to_string(job) + " (" + j->name + ", pid " + std::to_string(j->pid) + ") is gone: " + why +
        "; its memory and budget are released");
  }
  Apply(scheduler_.Exited(job, scheduler_.now()));
  if (auto s = slot_of_job_.find(job); s != slot_of_job_.end()) {
    shm_.slot(s->second).job.store(0, std::memory_order_release);
    slot_of_job_.erase(s);
  }
}

void CoordServer::Handle(Conn& c, proto::Message m) {
  const int fd = c.fd;
  auto violation = [&](const std::string& what) {
    Log("rejected a message from " + Who(c.peer.uid, c.peer.pid) + ": " + what);
    Close(fd, "protocol violation");
  };
  if (uint64_t* t = TimeIn(m)) *t = CheckedTime(c, *t);
  if (auto* hello = std::get_if<proto::Hello>(&m)) {
    if (c.job != 0) return violation("a second hello on one connection");
    return HandleHello(c, *hello);
  }
  if (auto* control = std::get_if<proto::Control>(&m)) {
    if (c.job != 0) return violation("a control request from a job's connection");
    return HandleControl(c, *control);
  }
  if (c.job == 0) return violation(std::string("'") + proto::MsgTypeName(proto::TypeOf(m)) + "' before hello");
  if (auto* usage = std::get_if<proto::Usage>(&m)) {
    Counted(c.job, usage->counters);
    Apply(scheduler_.Allocated(c.job, usage->allocated, usage->now_ns, usage->ask));
  } else if (auto* end = std::get_if<proto::SliceEnd>(&m)) {
    Apply(scheduler_.SliceEnded(c.job, end->now_ns));
  } else if (auto* idle = std::get_if<proto::Idle>(&m)) {
    Apply(idle->idle ? scheduler_.Idle(c.job, idle->at_ns) : scheduler_.Busy(c.job, idle->at_ns));
  } else if (auto* stopped = std::get_if<proto::Stopped>(&m)) {
    if (trace_) trace_->Stopped(scheduler_, c.job, *stopped);
    if (metrics_) metrics_->Stopped(scheduler_, c.job, *stopped);
    Counted(c.job, stopped->counters);
    Apply(scheduler_.Stopped(c.job, *stopped));
  } else if (auto* bye = std::get_if<proto::Goodbye>(&m)) {
    Counted(c.job, bye->counters);
    if (const Job* j = scheduler_.Find(c.job); j != nullptr && j->state != JobState::kFinished) {
      Log("job " + std::to_string(c.job) + " (" + j->name + ") finished, " +
          std::to_string((bye->now_ns - std::min(bye->now_ns, j->submitted_ns)) / 1000000) +
          " ms after it registered (device clock)");
    }
    Apply(scheduler_.Exited(c.job, bye->now_ns));
  } else {
    return violation("a coordinator-to-job message sent by a job");
  }
  // Published after the orders and gates the message brought: a job waits
  // for this before it lets other jobs run on (hook/src/client/coord_orders.cc,
  // WaitTurn).
  if (auto s = slot_of_job_.find(c.job); s != slot_of_job_.end()) {
    shm_.slot(s->second).messages_handled.fetch_add(1, std::memory_order_release);
  }
}

void CoordServer::Counted(uint64_t id, const proto::JobCounters& counters) {
  scheduler_.Counted(id, counters);
  if (metrics_) metrics_->Counted(id, counters);
}

void CoordServer::Watchdog() {
  const std::set<uint64_t> awaiting = scheduler_.Awaiting();
  const uint64_t now = NowMs();
  for (auto it = awaiting_since_ms_.begin(); it != awaiting_since_ms_.end();) {
    it = awaiting.count(it->first) ? std::next(it) : awaiting_since_ms_.erase(it);
  }
  for (uint64_t id : awaiting) {
    auto [it, fresh] = awaiting_since_ms_.emplace(id, now);
    // A running job owes its slice end only after its slice, which on a real
    // GPU lasts its length in real time too.
    const Job* running = scheduler_.Find(id);
    const uint64_t grace = options_.answer_timeout_ms +
                           (running && scheduler_.MayRun(*running) ? scheduler_.options().max_slice_ns / 1000000 : 0);
    if (fresh || now - it->second < grace) continue;
    const Job* j = scheduler_.Find(id);
    Log("job " + std::to_string(id) + (j ? " (" + j->name + ", pid " + std::to_string(j->pid) + ")" : std::string()) +
        " has not answered for " + std::to_string((now - it->second) / 1000) + " s; passing it over");
    awaiting_since_ms_.erase(it);
    Apply(scheduler_.Unresponsive(id));
  }
}

void CoordServer::ExpireConnections() {
  const uint64_t now = NowMs();
  std::vector<std::pair<int, std::string>> expired;
  for (const auto& [fd, c] : conns_) {
    if (c->job == 0 && now - c->opened_ms >= options_.hello_timeout_ms) {
      expired.emplace_back(fd, "said nothing for " + std::to_string(options_.hello_timeout_ms) + " ms");
    } else if (c->partial_since_ms != 0 && now - c->partial_since_ms >= options_.hello_timeout_ms) {
      expired.emplace_back(fd, "left a message unfinished for " + std::to_string(options_.hello_timeout_ms) + " ms");
    }
  }
  for (const auto& [fd, why] : expired) {
    const Conn& c = *conns_.at(fd);
    Log("dropped the connection of " + Who(c.peer.uid, c.peer.pid) + ": it " + why);
    Close(fd, why);
  }
}

void CoordServer::PauseAccepting(bool paused) {
  if (paused == accept_paused_) return;
  accept_paused_ = paused;
  epoll_event ev{};
  ev.events = paused ? 0u : static_cast<uint32_t>(EPOLLIN);
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  if (paused) Log("out of file descriptors: no new connections until one closes");
}

void CoordServer::PublishMetrics() {
  if (!metrics_ || !metrics_->changed()) return;
  const uint64_t now = NowMs();
  if (metrics_published_ms_ != 0 && now - metrics_published_ms_ < kTickMs) return;
  metrics_published_ms_ = now;
  options_.metrics->Publish(std::make_shared<const MetricsSnapshot>(metrics_->Snapshot(scheduler_)));
}

}  // namespace msched

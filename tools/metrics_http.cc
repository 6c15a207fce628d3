#include "metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iterator>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/http_request.h"

namespace msched {
namespace {

// Why a server of our own, for one endpoint:
// - civetweb gives each connection a thread until it is answered or dropped:
//   once stalled connections outnumber its threads, every scrape waits.
// - libmicrohttpd (epoll mode) refuses new connections at its limit: enough
//   stalled connections keep a scrape out all the same.
// - A limit per peer would not help either on loopback, where every local
//   user is 127.0.0.1.
// Here one thread serves every connection, none waits on another, and at the
// cap a stalled connection makes room for a newcomer, never the reverse.

using Clock = std::chrono::steady_clock;

constexpr char kMetricsType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kErrorType[] = "text/plain; charset=utf-8";

// How long a connection may stay in each phase. A scraper sends its whole
// request at once, so 1 s is ample and bounds what a stalled connection
// holds. Taking an answer of some MB over a slow link can take seconds. After
// the answer, the peer has a moment to close first (see Write).
constexpr auto kRequestTimeout = std::chrono::seconds(1);
constexpr auto kAnswerTimeout = std::chrono::seconds(5);
constexpr auto kDrainTimeout = std::chrono::seconds(1);

// The cap on open connections, well above what scrapers need. The
// coordinator holds a descriptor for each job, so the metrics never take
// more than a quarter of the process's limit (mschedd raises its soft limit
// to the hard one first).
constexpr size_t kMostConnections = 512;
constexpr size_t kFewestConnections = 16;
// Out of descriptors with none of ours to give back, accepting stops this
// long at a time rather than spin on a listening socket that stays readable.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr auto kReportEvery = std::chrono::minutes(1);
// What accept fails with when the connection it was taking failed, not the
// server: the next one is taken (accept(2), "Error handling").
constexpr int kLostConnection[] = {EINTR,     ECONNABORTED, EPROTO,       ENETDOWN,   ENOPROTOOPT,
                                   EHOSTDOWN, ENONET,       EHOSTUNREACH, EOPNOTSUPP, ENETUNREACH};

size_t MaxConnections() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return kMostConnections;
  return std::clamp<size_t>(r.rlim_cur / 4, kFewestConnections, kMostConnections);
}

Result<sockaddr_in> ParseSockaddr(std::string_view text) {
  const auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not an address to listen at: expected IPv4-ADDRESS:PORT, such as "
                                   "127.0.0.1:9400 (port 0: any free one)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad();
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 ||
      ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return bad();
  }
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

std::string FormatSockaddr(const sockaddr_in& a) {
  char host[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

Status CannotServe(const std::string& address, const std::string& what, int err) {
  return Status::IoError("cannot serve metrics at " + address + ": " + what + ": " + std::strerror(err));
}

// Now, as the Date field writes it (RFC 9110, 5.6.7). mschedd never sets a
// locale, so strftime names days and months in English.
std::string HttpDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[40];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return text;
}

// A whole answer, after which the connection closes.
struct Reply {
  std::string head;  // the status line and the fields
  // Null for none. The metrics are shared by every answer of one snapshot: a
  // connection taking its answer slowly holds no copy of its own.
  std::shared_ptr<const std::string> body;
  size_t size() const { return head.size() + (body ? body->size() : 0); }
};

// A HEAD request gets the head alone, with the Content-Length the body
// would have had.
Reply MakeReply(int status, std::string_view reason, std::shared_ptr<const std::string> body, bool head_only,
                std::string_view content_type = kErrorType, std::string_view extra_fields = "") {
  const size_t size = body ? body->size() : 0;
  std::string head =
      "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\nDate: " + HttpDate() + "\r\n";
  if (size > 0) head += "Content-Type: " + std::string(content_type) + "\r\n";
  head += extra_fields;
  head += "Content-Length: " + std::to_string(size) + "\r\nConnection: close\r\n\r\n";
  return Reply{std::move(head), head_only ? nullptr : std::move(body)};
}

// `text` as a body.
std::shared_ptr<const std::string> Text(std::string text) {
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace

// The listening socket, the connections and what the log is told. Stop may
// be called from any thread; everything else runs on the server's thread,
// once Listen has succeeded.
class MetricsHttp::Loop {
 public:
  Loop(std::shared_ptr<const MetricsBoard> board, std::function<void(const std::string&)> log)
      : board_(std::move(board)), log_(std::move(log)), max_connections_(MaxConnections()) {}
  ~Loop();  // closes every descriptor
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Listens at `at` (`address` in errors); the address it got.
  Result<sockaddr_in> Listen(const sockaddr_in& at, const std::string& address);
  void Run();
  void Stop();
  size_t max_connections() const { return max_connections_; }

 private:
  // A connection goes through these phases in order, each with its timeout.
  enum Phase { kReading, kWriting, kDraining };
  static constexpr int kPhases = 3;
  static constexpr Clock::duration kTimeouts[kPhases] = {kRequestTimeout, kAnswerTimeout, kDrainTimeout};
  struct Conn {
    int fd = -1;
    Phase phase = kReading;
    Clock::time_point deadline;  // when it entered its phase, plus the phase's timeout
    uint32_t events = EPOLLIN;   // what epoll watches for
    std::string in;              // kReading: the request so far
    Reply out;                   // kWriting: the answer
    size_t sent = 0;             // kWriting: the bytes of `out` written
    std::list<Conn>::iterator self;
  };
  // Connections closed without having had their answer, for the log.
  struct Dropped {
    uint64_t late_request = 0;  // not whole within kRequestTimeout
    uint64_t at_cap = 0;        // made room for a newcomer, or for a descriptor
    uint64_t late_reader = 0;   // did not take the answer within kAnswerTimeout
    bool any() const { return late_request + at_cap + late_reader > 0; }
  };

  int WaitMs(Clock::time_point now) const;
  void Accept(Clock::time_point now);
  void AcceptFailed(Clock::time_point now, const std::string& what, int err);
  void Read(Conn& c, Clock::time_point now);
  Reply Answer(const HttpRequestHead& head);
  void Write(Conn& c, Clock::time_point now);
  void Drain(Conn& c);
  void MoveTo(Conn& c, Phase phase, Clock::time_point now);
  void Watch(Conn& c, uint32_t events);
  void Close(Conn& c);
  bool DropOne();
  void Expire(Clock::time_point now);
  void Report(Clock::time_point now);
  size_t open() const;

  const std::shared_ptr<const MetricsBoard> board_;
  const std::function<void(const std::string&)> log_;
  const size_t max_connections_;
  int listen_fd_ = -1, stop_fd_ = -1, epoll_fd_ = -1;
  // Invariant: each list holds the connections in its phase in the order
  // they entered it, which is the order of their deadlines, since every
  // entry is stamped with its batch's time and the phase's one timeout. So
  // the front of each expires first, and is the oldest there.
  std::list<Conn> phases_[kPhases];
  std::optional<Clock::time_point> accept_paused_until_;
  bool accept_failing_ = false;  // logged once, until an accept succeeds
  Dropped dropped_;
  Clock::time_point last_report_{};
  // The last snapshot answered with, and its exposition: rendered once,
  // however many connections ask for it.
  std::shared_ptr<const MetricsSnapshot> rendered_snapshot_;
  std::shared_ptr<const std::string> rendered_;
};

MetricsHttp::Loop::~Loop() {
  for (std::list<Conn>& conns : phases_) {
    for (Conn& c : conns) ::close(c.fd);
  }
  for (int fd : {listen_fd_, stop_fd_, epoll_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

Result<sockaddr_in> MetricsHttp::Loop::Listen(const sockaddr_in& at, const std::string& address) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return CannotServe(address, "cannot open a socket", errno);
  // A restarted mschedd listens again at once, beside its predecessor's
  // connections in TIME_WAIT.
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0) {
    const int err = errno;
    return CannotServe(address, "cannot bind to " + address, err);
  }
  if (::listen(listen_fd_, SOMAXCONN) != 0) {
    const int err = errno;
    return CannotServe(address, "cannot listen at " + address, err);
  }
  sockaddr_in bound{};
  socklen_t size = sizeof bound;
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &size) != 0) {
    return CannotServe(address, "getsockname", errno);
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  // Events carry a pointer: to a Conn, or to one of these two members.
  epoll_event listen_ev{EPOLLIN, {.ptr = &listen_fd_}}, stop_ev{EPOLLIN, {.ptr = &stop_fd_}};
  if (stop_fd_ < 0 || epoll_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &listen_ev) != 0 ||
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &stop_ev) != 0) {
    return CannotServe(address, "cannot set up epoll", errno);
  }
  return bound;
}

void MetricsHttp::Loop::Stop() {
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
}

void MetricsHttp::Loop::Run() {
  epoll_event events[64];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, WaitMs(Clock::now()));
    if (n < 0 && errno != EINTR) {
      log_(std::string("metrics server: epoll_wait failed: ") + std::strerror(errno) + "; no longer serving");
      return;
    }
    const Clock::time_point now = Clock::now();
    bool listener_ready = false;
    for (int i = 0; i < n; ++i) {
      void* const tag = events[i].data.ptr;
      if (tag == &stop_fd_) return;
      if (tag == &listen_fd_) {
        listener_ready = true;
        continue;
      }
      // Each handler closes at most its own connection. Accept and Expire,
      // which close others, run after the batch: no event in it can point
      // to a connection already closed.
      Conn& c = *static_cast<Conn*>(tag);
      switch (c.phase) {
        case kReading: Read(c, now); break;
        case kWriting: Write(c, now); break;
        case kDraining: Drain(c); break;
      }
    }
    if (accept_paused_until_ && now >= *accept_paused_until_) {
      accept_paused_until_.reset();
      epoll_event ev{EPOLLIN, {.ptr = &listen_fd_}};
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    }
    if (listener_ready) Accept(now);
    Expire(now);
    Report(now);
  }
}

int MetricsHttp::Loop::WaitMs(Clock::time_point now) const {
  Clock::time_point next = Clock::time_point::max();
  for (const std::list<Conn>& conns : phases_) {
    if (!conns.empty()) next = std::min(next, conns.front().deadline);
  }
  if (accept_paused_until_) next = std::min(next, *accept_paused_until_);
  if (dropped_.any()) next = std::min(next, last_report_ + kReportEvery);
  if (next == Clock::time_point::max()) return -1;
  // Rounded up: woken before the deadline, the loop would only wait again.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(next - now, Clock::duration::zero()));
  return static_cast<int>(std::min<int64_t>(ms.count(), INT_MAX));
}

void MetricsHttp::Loop::Accept(Clock::time_point now) {
  // A bounded batch: under a flood the queue never empties, and the
  // connections already open must still be served.
  for (size_t i = 0; i < max_connections_; ++i) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EAGAIN) return;  // EWOULDBLOCK on Linux
      if (std::find(std::begin(kLostConnection), std::end(kLostConnection), err) != std::end(kLostConnection)) continue;
      if ((err == EMFILE || err == ENFILE) && DropOne()) continue;  // a descriptor of ours is free now
      return AcceptFailed(now, "cannot accept a connection", err);
    }
    if (open() >= max_connections_) DropOne();
    std::list<Conn>& reading = phases_[kReading];
    Conn& c = reading.emplace_back();
    c.fd = fd;
    c.self = std::prev(reading.end());
    c.deadline = now + kTimeouts[kReading];
    epoll_event ev{c.events, {.ptr = &c}};
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      const int err = errno;
      Close(c);
      return AcceptFailed(now, "cannot watch a connection", err);
    }
    accept_failing_ = false;
    // A scraper's request has usually come with its connection: answered
    // at once, it is never in the way of a later newcomer.
    Read(c, now);
  }
}

// Logged once until an accept succeeds again; the listening socket stays
// readable, so it is not watched for a while (each wakeup would fail again).
void MetricsHttp::Loop::AcceptFailed(Clock::time_point now, const std::string& what, int err) {
  if (!accept_failing_) {
    log_("metrics server: " + what + ": " + std::strerror(err) + "; trying again every " +
         std::to_string(std::chrono::milliseconds(kAcceptPause).count()) + " ms");
  }
  accept_failing_ = true;
  accept_paused_until_ = now + kAcceptPause;
  epoll_event ev{0, {.ptr = &listen_fd_}};
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
}

void MetricsHttp::Loop::Read(Conn& c, Clock::time_point now) {
  bool peer_done = false;
  while (c.in.size() < kMaxHttpHeadBytes) {
    const size_t had = c.in.size();
    c.in.resize(kMaxHttpHeadBytes);
    const ssize_t n = ::recv(c.fd, c.in.data() + had, kMaxHttpHeadBytes - had, 0);
    c.in.resize(had + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n == 0) {
      peer_done = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    return Close(c);  // reset by the peer
  }
  const HttpRequestHead head = ParseHttpRequestHead(c.in);
  if (head.state == HttpRequestHead::State::kIncomplete) {
    if (peer_done) Close(c);  // it can never be whole
    return;
  }
  c.out = Answer(head);  // before `in`, which `head` views, goes
  c.in = std::string();
  MoveTo(c, kWriting, now);
  Write(c, now);
}

Reply MetricsHttp::Loop::Answer(const HttpRequestHead& head) {
  using State = HttpRequestHead::State;
  if (head.state == State::kMalformed) return MakeReply(400, "Bad Request", Text("not an HTTP/1.x request\n"), false);
  if (head.state == State::kTooLarge) {
    return MakeReply(431, "Request Header Fields Too Large",
                     Text("the request head is over " + std::to_string(kMaxHttpHeadBytes) + " bytes\n"), false);
  }
  const bool head_only = head.method == "HEAD";
  if (head.path != "/metrics") return MakeReply(404, "Not Found", Text("mschedd serves /metrics only\n"), head_only);
  if (!head_only && head.method != "GET") {
    return MakeReply(405, "Method Not Allowed", nullptr, false, kErrorType, "Allow: GET, HEAD\r\n");
  }
  const std::shared_ptr<const MetricsSnapshot> snapshot = board_->Latest();
  if (snapshot == nullptr) {  // the coordinator publishes one before this server starts
    return MakeReply(503, "Service Unavailable", Text("no metrics yet\n"), head_only);
  }
  if (snapshot != rendered_snapshot_) {
    rendered_ = Text(RenderPrometheus(*snapshot));
    rendered_snapshot_ = snapshot;
  }
  return MakeReply(200, "OK", rendered_, head_only, kMetricsType);
}

void MetricsHttp::Loop::Write(Conn& c, Clock::time_point now) {
  while (c.sent < c.out.size()) {
    // What is left of the head, then of the body.
    iovec parts[2];
    msghdr m{};
    m.msg_iov = parts;
    const std::string& head = c.out.head;
    if (c.sent < head.size()) parts[m.msg_iovlen++] = {const_cast<char*>(head.data()) + c.sent, head.size() - c.sent};
    if (c.out.body != nullptr) {
      const size_t done = c.sent - std::min(c.sent, head.size());
      parts[m.msg_iovlen++] = {const_cast<char*>(c.out.body->data()) + done, c.out.body->size() - done};
    }
    const ssize_t n = ::sendmsg(c.fd, &m, MSG_NOSIGNAL);
    if (n >= 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Watch(c, EPOLLOUT);
    return Close(c);  // the peer is gone
  }
  // All sent: half-close, so that the peer sees the end, and read until it
  // closes too (RFC 9112, 9.6). Closing with its bytes unread would reset
  // the connection, which can destroy the answer before the peer reads it.
  ::shutdown(c.fd, SHUT_WR);
  c.out = Reply{};
  MoveTo(c, kDraining, now);
  Watch(c, EPOLLIN);
  Drain(c);
}

void MetricsHttp::Loop::Drain(Conn& c) {
  char discard[4096];
  for (int i = 0; i < 16; ++i) {  // bounded: a peer that sends on meets its deadline
    const ssize_t n = ::recv(c.fd, discard, sizeof discard, 0);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && errno == EAGAIN) return;
    return Close(c);  // closed or reset by the peer
  }
}

void MetricsHttp::Loop::MoveTo(Conn& c, Phase phase, Clock::time_point now) {
  phases_[phase].splice(phases_[phase].end(), phases_[c.phase], c.self);  // `self` stays valid
  c.phase = phase;
  c.deadline = now + kTimeouts[phase];
}

void MetricsHttp::Loop::Watch(Conn& c, uint32_t events) {
  if (events == c.events) return;
  c.events = events;
  epoll_event ev{events, {.ptr = &c}};
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void MetricsHttp::Loop::Close(Conn& c) {
  ::close(c.fd);  // which also takes it out of the epoll set
  phases_[c.phase].erase(c.self);
}

// Closes the connection that is best spared, to make room for a newcomer or
// free a descriptor: the oldest that has had its whole answer (closing it
// loses nothing), else the oldest still sending its request (stalled, most
// likely: a scraper's request comes at once), else the oldest still taking
// its answer. So no number of stalled connections keeps a scrape out. False
// when none is open.
bool MetricsHttp::Loop::DropOne() {
  for (Phase phase : {kDraining, kReading, kWriting}) {
    if (phases_[phase].empty()) continue;
    if (phase != kDraining) ++dropped_.at_cap;
    Close(phases_[phase].front());
    return true;
  }
  return false;
}

void MetricsHttp::Loop::Expire(Clock::time_point now) {
  for (Phase phase : {kReading, kWriting, kDraining}) {
    std::list<Conn>& conns = phases_[phase];
    while (!conns.empty() && conns.front().deadline <= now) {
      if (phase == kReading) ++dropped_.late_request;
      if (phase == kWriting) ++dropped_.late_reader;
      Close(conns.front());
    }
  }
}

// One line for every connection dropped, at most once a minute: a line per
// connection would let anyone who can connect flood the coordinator's log.
void MetricsHttp::Loop::Report(Clock::time_point now) {
  if (!dropped_.any() || now < last_report_ + kReportEvery) return;
  const auto seconds = [](Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
  };
  log_("metrics server: connections dropped without their answer: " + std::to_string(dropped_.late_request) +
       " that sent no whole request within " + seconds(kRequestTimeout) + ", " + std::to_string(dropped_.at_cap) +
       " to make room for newer ones (at most " + std::to_string(max_connections_) + " open), " +
       std::to_string(dropped_.late_reader) + " that did not take their answer within " + seconds(kAnswerTimeout) +
       " (counted since the last such line; one a minute at most)");
  dropped_ = Dropped{};
  last_report_ = now;
}

size_t MetricsHttp::Loop::open() const {
  return phases_[kReading].size() + phases_[kWriting].size() + phases_[kDraining].size();
}

Result<std::string> MetricsHttp::ParseAddress(std::string_view text) {
  Result<sockaddr_in> a = ParseSockaddr(text);
  if (!a.ok()) return a.status();
  return FormatSockaddr(*a);
}

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& address,
                                                        std::shared_ptr<const MetricsBoard> board,
                                                        std::function<void(const std::string&)> log) {
  Result<sockaddr_in> at = ParseSockaddr(address);
  if (!at.ok()) return at.status();
  auto loop = std::make_unique<Loop>(std::move(board), std::move(log));
  Result<sockaddr_in> bound = loop->Listen(*at, address);
  if (!bound.ok()) return bound.status();
  return std::unique_ptr<MetricsHttp>(new MetricsHttp(std::move(loop), FormatSockaddr(*bound)));
}

MetricsHttp::MetricsHttp(std::unique_ptr<Loop> loop, std::string address)
    : loop_(std::move(loop)), address_(std::move(address)), thread_(&Loop::Run, loop_.get()) {}

MetricsHttp::~MetricsHttp() {
  loop_->Stop();
  thread_.join();
}

size_t MetricsHttp::max_connections() const { return loop_->max_connections(); }

}  // namespace msched

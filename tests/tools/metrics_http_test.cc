// MetricsHttp (tools/metrics_http.h), mschedd's metrics server, in-process
// over a board the test publishes to: the answers before and after a
// snapshot, a request sent a byte at a time, one that is not whole within
// its second, heads too large or malformed, slow readers of a large answer,
// and the cap on open connections (issue 33, item 2).
#include "metrics_http.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "http_client.h"

namespace msched {
namespace {

namespace ts = msched::testsupport;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A snapshot with `jobs` live jobs; each adds some 400 bytes to the answer.
std::shared_ptr<const MetricsSnapshot> Snapshot(size_t jobs) {
  auto s = std::make_shared<MetricsSnapshot>();
  s->version = "test";
  for (size_t i = 0; i < jobs; ++i) {
    JobMetrics j;
    j.id = i + 1;
    j.uid = 1000;
    j.allocated_bytes = j.resident_bytes = j.budget_bytes = 1ull << 30;
    s->jobs.push_back(j);
  }
  return s;
}

class MetricsHttpTest : public ::testing::Test {
 protected:
  // Serves board_ (published to or not) on a free loopback port.
  void Start() {
    ts::RaiseOwnDescriptorLimit();  // before Start, which sizes its cap by the limit
    Result<std::unique_ptr<MetricsHttp>> http = MetricsHttp::Start("127.0.0.1:0", board_, [this](const std::string& l) {
      MutexLock lock(&mu_);
      log_.push_back(l);
    });
    ASSERT_TRUE(http.ok()) << http.status().ToString();
    http_ = std::move(*http);
    port_ = std::stoi(http_->address().substr(http_->address().rfind(':') + 1));
  }
  // The lines logged so far that contain `text`.
  size_t Logged(const std::string& text) MSCHED_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    size_t n = 0;
    for (const std::string& l : log_) n += l.find(text) != std::string::npos;
    return n;
  }

  std::shared_ptr<MetricsBoard> board_ = std::make_shared<MetricsBoard>();
  Mutex mu_;
  std::vector<std::string> log_ MSCHED_GUARDED_BY(mu_);
  std::unique_ptr<MetricsHttp> http_;  // after what its thread logs to, so that it stops first
  int port_ = 0;
};

TEST_F(MetricsHttpTest, AnswersServiceUnavailableUntilASnapshotIsPublished) {
  Start();
  EXPECT_EQ(ts::Http(port_, "GET", "/metrics").status, 503);
  board_->Publish(Snapshot(2));
  const ts::HttpReply get = ts::Http(port_, "GET", "/metrics");
  ASSERT_EQ(get.status, 200);
  EXPECT_NE(get.head.find("Content-Length: " + std::to_string(get.body.size()) + "\r\n"), std::string::npos)
      << get.head;
  EXPECT_NE(get.head.find("Connection: close"), std::string::npos) << get.head;
  const ts::HttpReply head = ts::Http(port_, "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.head.find("Content-Length: " + std::to_string(get.body.size()) + "\r\n"), std::string::npos)
      << head.head;
  EXPECT_EQ(head.body, "");
}

// A client on a slow link: its request comes a byte per 25 ms, whole after
// some 0.6 s, within the second it is given.
TEST_F(MetricsHttpTest, AnswersARequestSentAByteAtATimeWithinItsSecond) {
  board_->Publish(Snapshot(1));
  Start();
  const int fd = ts::ConnectLoopback(port_, milliseconds(3000));
  ASSERT_GE(fd, 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (char c : std::string("GET /metrics HTTP/1.0\r\n\r\n")) {
    ASSERT_EQ(::write(fd, &c, 1), 1);
    std::this_thread::sleep_for(milliseconds(25));
  }
  const ts::HttpReply r = ts::ReadReply(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("msched_build_info{version=\"test\"} 1"), std::string::npos) << r.body;
}

// Closed after its second with no answer, idle or half-sent; the log counts
// the connections dropped in one line, however many they are.
TEST_F(MetricsHttpTest, DropsAConnectionWhoseRequestIsNotWholeWithinASecond) {
  board_->Publish(Snapshot(1));
  Start();
  for (const std::string sent : {"", "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"}) {
    const auto start = Clock::now();
    const int fd = ts::ConnectLoopback(port_, milliseconds(3000));
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
    char c;
    EXPECT_EQ(::read(fd, &c, 1), 0) << "closed, with no answer; sent '" << sent << "'";
    EXPECT_GT(SecondsSince(start), 0.9) << sent;
    EXPECT_LT(SecondsSince(start), 1.9) << sent;
    ::close(fd);
  }
  EXPECT_EQ(Logged("connections dropped without their answer: 1 that sent no whole request within 1 s"), 1u);
  EXPECT_EQ(Logged("dropped"), 1u) << "one line a minute at most";
}

TEST_F(MetricsHttpTest, AnswersAnOversizedHeadWith431AndAMalformedRequestWith400) {
  board_->Publish(Snapshot(1));
  Start();
  const std::string pad(9000, 'a');
  EXPECT_EQ(ts::Exchange(port_, "GET /metrics HTTP/1.1\r\nX-Pad: " + pad + "\r\n\r\n", milliseconds(3000)).status, 431);
  EXPECT_EQ(ts::Exchange(port_, "GET /metrics HTTP/1.1\r\nX-Pad: " + pad, milliseconds(3000)).status, 431)
      << "told as soon as the limit is reached";
  for (const char* bad : {"GET /metrics\r\n\r\n", "GET /metrics HTTP/2.0\r\n\r\n", "\x16\x03\x01 hello\n"}) {
    EXPECT_EQ(ts::Exchange(port_, bad, milliseconds(3000)).status, 400) << bad;
  }
  EXPECT_EQ(ts::Http(port_, "GET", "/metrics").status, 200);
}

// Readers that take nothing of an answer of several MB (and whose receive
// buffers are small), more of them than civetweb had threads, while other
// scrapes come and go: each of those is answered within 2 s, and the slow
// readers get their whole answer once they read it.
TEST_F(MetricsHttpTest, SlowReadersOfALargeAnswerHoldUpNoOtherScrape) {
  board_->Publish(Snapshot(12000));
  Start();
  std::vector<int> slow;
  const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
  for (int i = 0; i < 40; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);  // before connecting: the window
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
    slow.push_back(fd);
  }
  size_t size = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    const ts::HttpReply r = ts::Http(port_, "GET", "/metrics", milliseconds(3000));
    EXPECT_EQ(r.status, 200) << "scrape " << i;
    EXPECT_LT(SecondsSince(start), 2.0) << "scrape " << i;
    size = r.body.size();
  }
  EXPECT_GT(size, 4u << 20) << "a large answer";
  // Then each takes its answer, all at once: one after another, the last
  // would start past the server's 5 s to take an answer on a loaded host.
  std::vector<ts::HttpReply> replies(slow.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < slow.size(); ++i) {
    readers.emplace_back([&, i] {
      ts::SetTimeouts(slow[i], milliseconds(3000));
      replies[i] = ts::ReadReply(slow[i]);
    });
  }
  for (std::thread& t : readers) t.join();
  for (const ts::HttpReply& r : replies) {
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.size(), size);
  }
}

// At the cap, each newcomer closes the connection that has waited longest
// for its request, so the first ones opened go first, with no answer, the
// later ones stay, and a scrape gets in all the same.
TEST_F(MetricsHttpTest, AtTheCapTheOldestConnectionStillSendingItsRequestMakesRoom) {
  board_->Publish(Snapshot(1));
  Start();
  const size_t cap = http_->max_connections();
  std::vector<int> fds;
  for (size_t i = 0; i < cap + 8; ++i) {
    fds.push_back(ts::ConnectLoopback(port_));
    ASSERT_GE(fds.back(), 0) << i;
  }
  for (size_t i = 0; i < 8; ++i) {
    pollfd p{fds[i], POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 500), 1) << "connection " << i << " is still open";
    char c;
    EXPECT_EQ(::recv(fds[i], &c, 1, 0), 0) << "connection " << i << " was closed with no answer";
  }
  char c;
  for (size_t i = 8; i < fds.size(); ++i) {
    EXPECT_EQ(::recv(fds[i], &c, 1, MSG_DONTWAIT), -1) << "connection " << i << " is open still";
  }
  EXPECT_EQ(ts::Http(port_, "GET", "/metrics", milliseconds(2000)).status, 200);
  for (int fd : fds) ::close(fd);
}

}  // namespace
}  // namespace msched

// The job's connection (hook/src/client/coord_connection.h), over a socket
// pair whose other end the test writes as a coordinator would: orders are
// queued in order and counted, a welcome maps the gate page it carries, a
// refusal is kept, and a lost connection is reported and replaced.
#include "client/coord_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/null_sink.h>

#include "coord/unix_socket.h"
#include "fake_job.h"

namespace msched::hook {

// The hook's log, for the connection's few lines: nowhere.
spdlog::logger& Logger() {
  static spdlog::logger logger("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  return logger;
}

namespace {

using testing_fakes::Eventually;
using testing_fakes::FakeJob;

class Orders : public OrderHandler {
 public:
  void Execute(const proto::Message& m) override { types.push_back(proto::TypeOf(m)); }
  std::vector<proto::MsgType> types;
};

// A socket pair per connection: the job's end for the connection, the
// coordinator's for the test.
struct Pair {
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  int job() const { return fds[0]; }
  int coordinator() const { return fds[1]; }
  int fds[2] = {-1, -1};
};

class ConnectionTest : public ::testing::Test, public ConnectionEvents {
 protected:
  ~ConnectionTest() override {
    connection_.GiveUp();
    if (reader_.joinable()) reader_.join();
    for (const Pair& p : pairs_) ::close(p.coordinator());
  }
  // ConnectionEvents
  void Welcomed(const proto::Welcome& w) override { welcomed_job.store(w.job); }
  void Refused() override { refused.store(true); }
  bool Lost(const std::string& why) override {
    MutexLock lock(&mu_);
    lost.push_back(why);
    return welcomed_job.load() != 0;
  }
  Result<int> Reconnect() override {
    MutexLock lock(&mu_);
    if (pairs_.size() >= 2) return Status::Unavailable("no coordinator");
    pairs_.emplace_back();
    reconnects.fetch_add(1);
    return pairs_.back().job();
  }

  // Connects on a first pair and starts the reader.
  void Start() {
    pairs_.emplace_back();
    connection_.Use(pairs_.back().job());
    reader_ = std::thread(&CoordConnection::ReadLoop, &connection_);
  }
  int Coordinator() {
    MutexLock lock(&mu_);
    return pairs_.back().coordinator();
  }
  size_t LostCount() {
    MutexLock lock(&mu_);
    return lost.size();
  }
  std::vector<proto::MsgType> Carried() {
    MutexLock lock(&job_.side.mu());
    orders_.RunQueued();
    return handler_.types;
  }

  std::atomic<uint64_t> welcomed_job{0};
  std::atomic<bool> refused{false};
  std::atomic<int> reconnects{0};
  Mutex mu_;
  std::vector<std::string> lost MSCHED_GUARDED_BY(mu_);

  FakeJob job_;
  Orders handler_;
  OrderRunner orders_{job_.side, handler_};
  CondVar changed_;
  CoordConnection connection_{job_.side, orders_, changed_, *this};
  std::vector<Pair> pairs_;  // each connection's, in order (under mu_ once the reader runs)
  std::thread reader_;
};

TEST_F(ConnectionTest, OrdersAreQueuedInTheOrderSentAndCounted) {
  Start();
  ASSERT_TRUE(SendMessage(Coordinator(), proto::Go{}).ok());
  ASSERT_TRUE(SendMessage(Coordinator(), proto::Stop{}).ok());
  ASSERT_TRUE(SendMessage(Coordinator(), proto::Budget{}).ok());
  ASSERT_TRUE(Eventually([&] { return connection_.link().orders_received.load() == 3; }));
  EXPECT_TRUE(orders_.pending());
  EXPECT_EQ(Carried(),
            (std::vector<proto::MsgType>{proto::MsgType::kGo, proto::MsgType::kStop, proto::MsgType::kBudget}));
}

TEST_F(ConnectionTest, AWelcomeMapsTheGatePageItCarriesAndARefusalIsKept) {
  Start();
  Result<CoordShm> page = CoordShm::Create();
  ASSERT_TRUE(page.ok()) << page.status().message();
  proto::Welcome w;
  w.job = 7;
  w.slot = 3;
  ASSERT_TRUE(SendMessage(Coordinator(), w, page->reader_fd()).ok());
  ASSERT_TRUE(Eventually([&] { return welcomed_job.load() == 7; }));
  const LinkCounts& link = connection_.link();
  EXPECT_EQ(link.job_id.load(), 7u);
  EXPECT_EQ(link.slot_index.load(), 3u);
  ASSERT_NE(link.gate.load(), nullptr);
  page->slot(3).may_run.store(1);
  EXPECT_EQ(link.gate.load()->may_run.load(), 1u) << "the job sees what the coordinator writes";
  EXPECT_EQ(link.orders_received.load(), 0u) << "a welcome is not an order";

  ASSERT_TRUE(SendMessage(Coordinator(), proto::Refused{"more than the host memory"}).ok());
  ASSERT_TRUE(Eventually([&] { return refused.load(); }));
  MutexLock lock(&job_.side.mu());
  EXPECT_EQ(connection_.refused(), "more than the host memory");
  EXPECT_TRUE(orders_.empty());
}

TEST_F(ConnectionTest, AWelcomeWithoutItsPageDropsTheConnection) {
  Start();
  proto::Welcome w;
  w.job = 7;
  ASSERT_TRUE(SendMessage(Coordinator(), w).ok());  // no page passed
  ASSERT_TRUE(Eventually([&] { return LostCount() == 1; }));
  EXPECT_EQ(welcomed_job.load(), 0u);
}

TEST_F(ConnectionTest, ALostConnectionIsReportedAndReplacedAtOnceAfterAWelcome) {
  Start();
  welcomed_job.store(1);  // as if welcomed: the next connection is tried at once
  connection_.Send(proto::SliceEnd{5});
  EXPECT_EQ(connection_.link().messages_sent.load(), 1u);
  ::shutdown(Coordinator(), SHUT_RDWR);  // the coordinator goes away
  ASSERT_TRUE(Eventually([&] { return reconnects.load() == 1; }));
  {
    MutexLock lock(&mu_);
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_NE(lost[0].find("lost the coordinator"), std::string::npos) << lost[0];
  }
  ASSERT_TRUE(Eventually([&] { return connection_.link().messages_sent.load() == 0; }))
      << "the new connection counts from its hello";
  ASSERT_TRUE(SendMessage(Coordinator(), proto::Go{}).ok());
  ASSERT_TRUE(Eventually([&] { return connection_.link().orders_received.load() == 1; }))
      << "orders come from the new connection";
  connection_.Send(proto::SliceEnd{6});
  Result<proto::Message> heard = ReceiveMessage(Coordinator(), 1000);
  ASSERT_TRUE(heard.ok()) << heard.status().message();
  EXPECT_EQ(std::get<proto::SliceEnd>(*heard).now_ns, 6u) << "and messages go to it";
}

TEST_F(ConnectionTest, GivingUpStopsTheReaderWithoutReconnecting) {
  Start();
  connection_.GiveUp();
  reader_.join();
  EXPECT_EQ(LostCount(), 1u);
  EXPECT_EQ(reconnects.load(), 0);
}

}  // namespace
}  // namespace msched::hook

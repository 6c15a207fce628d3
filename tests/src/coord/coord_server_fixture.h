// CoordServerTest: a coordinator server run in-process on a socket of its
// own, with raw socket clients that speak the protocol as jobs and the
// command line do. Shared by the coordinator server's tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "coord/coord_server.h"

namespace msched::testing_fixtures {

constexpr uint64_t kGiB = 1ull << 30;

class CoordServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "coord_" + std::to_string(getpid()) + "_" + std::to_string(serial_++);
    ::mkdir(dir_.c_str(), 0755);  // others may reach a root coordinator's socket
    Start();
  }
  void TearDown() override {
    Stop();
    ::rmdir(dir_.c_str());
  }
  void Start(uint64_t answer_timeout_ms = 10000, ServerOptions o = {}) {
    o.socket_path = socket();
    o.policy.hbm_bytes = hbm_bytes_;
    o.policy.usable_fraction = 1.0;
    o.policy.oversubscribe = 4;
    o.policy.min_slice_ns = 1'000'000;
    o.policy.max_slice_ns = 100'000'000;
    o.answer_timeout_ms = answer_timeout_ms;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += line + "\n";
    };
    Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    thread_ = std::thread([this] { server_->Run(); });
  }
  void Stop() {
    if (!server_) return;
    server_->Shutdown();
    thread_.join();
    server_.reset();
  }
  std::string socket() const { return dir_ + "/s.sock"; }
  // The GPU memory the next Start() schedules (0: learnt from a job).
  uint64_t hbm_bytes_ = 16 * kGiB;
  std::string log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  // A job's connection after hello; returns the socket.
  int Join(uint64_t mem, const std::string& name = "job", int priority = 0) {
    Result<int> fd = ConnectUnix(socket());
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    proto::Hello h;
    h.declared_mem = mem;
    h.allocated = mem;
    h.name = name;
    h.priority = priority;
    EXPECT_TRUE(SendMessage(*fd, h).ok());
    return *fd;
  }
  template <typename M>
  M Expect(int fd) {
    Result<proto::Message> m = ReceiveMessage(fd, 5000);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok() || !std::holds_alternative<M>(*m)) {
      ADD_FAILURE() << "expected " << proto::MsgTypeName(M::kType) << ", got "
                    << (m.ok() ? proto::MsgTypeName(proto::TypeOf(*m)) : "nothing");
      return M{};
    }
    return std::get<M>(*m);
  }
  bool Closed(int fd) { return ReceiveMessage(fd, 5000).status().code() == StatusCode::kIoError; }
  // The welcome and the read-only descriptor of the shared memory it carries.
  std::pair<proto::Welcome, int> ExpectWelcome(int fd) {
    int shm_fd = -1;
    Result<proto::Message> m = ReceiveMessage(fd, 5000, &shm_fd);
    if (!m.ok() || !std::holds_alternative<proto::Welcome>(*m)) {
      ADD_FAILURE() << "expected a welcome: "
                    << (m.ok() ? proto::MsgTypeName(proto::TypeOf(*m)) : m.status().ToString());
      return {proto::Welcome{}, shm_fd};
    }
    return {std::get<proto::Welcome>(*m), shm_fd};
  }
  proto::ControlReply Ask(const proto::Control& c) {
    Result<int> fd = ConnectUnix(socket());
    EXPECT_TRUE(fd.ok());
    EXPECT_TRUE(SendMessage(*fd, c).ok());
    proto::ControlReply r = Expect<proto::ControlReply>(*fd);
    ::close(*fd);
    return r;
  }
  nlohmann::json Status() { return nlohmann::json::parse(Ask(proto::Control{}).text); }

  // Two jobs of 10 GiB on 16, which take turns, each with the gate page its
  // welcome carried, mapped.
  struct TurnTakers {
    int fds[2];
    std::vector<CoordShm> shm;
    uint32_t slots[2];
  };
  void JoinTurnTakers(TurnTakers* t) {
    for (int i = 0; i < 2; ++i) {
      t->fds[i] = Join(10 * kGiB, "job" + std::to_string(i));
      const auto [w, shm_fd] = ExpectWelcome(t->fds[i]);
      Result<CoordShm> mapped = CoordShm::OpenReadOnly(shm_fd);
      ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
      t->shm.push_back(std::move(*mapped));
      t->slots[i] = w.slot;
    }
  }
  // The running one's slice ends at `now`: it is stopped, answers, and the
  // other is told to go. `stopped` runs after the Stop arrives.
  void Switch(
      const TurnTakers& t, int running, uint64_t now, const std::function<void()>& stopped = [] {}) {
    ASSERT_TRUE(SendMessage(t.fds[running], proto::SliceEnd{now}).ok());
    Expect<proto::Stop>(t.fds[running]);
    stopped();
    proto::Stopped s;
    s.now_ns = now;
    s.working_set = 10 * kGiB;
    ASSERT_TRUE(SendMessage(t.fds[running], s).ok());
    Expect<proto::Go>(t.fds[1 - running]);
  }

  static int serial_;
  std::string dir_;
  std::unique_ptr<CoordServer> server_;
  std::thread thread_;
  std::mutex log_mu_;
  std::string log_;
};
inline int CoordServerTest::serial_ = 0;

}  // namespace msched::testing_fixtures

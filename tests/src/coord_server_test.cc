// The coordinator server in-process, driven by raw socket clients: the
// protocol as jobs and the CLI speak it, and everything a broken or hostile
// peer might do.
#include "coord_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace msched {
namespace {

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
  void Start(uint64_t answer_timeout_ms = 10000) {
    ServerOptions o;
    o.socket_path = socket();
    o.policy.hbm_bytes = 16 * kGiB;
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
  proto::ControlReply Ask(const proto::Control& c) {
    Result<int> fd = ConnectUnix(socket());
    EXPECT_TRUE(fd.ok());
    EXPECT_TRUE(SendMessage(*fd, c).ok());
    proto::ControlReply r = Expect<proto::ControlReply>(*fd);
    ::close(*fd);
    return r;
  }
  nlohmann::json Status() { return nlohmann::json::parse(Ask(proto::Control{}).text); }

  static int serial_;
  std::string dir_;
  std::unique_ptr<CoordServer> server_;
  std::thread thread_;
  std::mutex log_mu_;
  std::string log_;
};
int CoordServerTest::serial_ = 0;

TEST_F(CoordServerTest, AJobRegistersAndRunsAndItsGateOpensInSharedMemory) {
  const int fd = Join(4 * kGiB, "train");
  const proto::Welcome w = Expect<proto::Welcome>(fd);
  EXPECT_TRUE(w.admitted);
  const proto::Go go = Expect<proto::Go>(fd);
  EXPECT_EQ(go.slice_end_ns, proto::kNever);
  Result<CoordShm> shm = CoordShm::OpenReadOnly(w.shm_name);
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  EXPECT_EQ(shm->slot(w.slot).job.load(), w.job);
  EXPECT_EQ(shm->slot(w.slot).may_run.load(), 1u);
  EXPECT_EQ(shm->slot(w.slot).budget.load(), 16 * kGiB);
  const nlohmann::json s = Status();
  ASSERT_EQ(s["jobs"].size(), 1u);
  EXPECT_EQ(s["jobs"][0]["name"], "train");
  EXPECT_EQ(s["jobs"][0]["pid"], getpid()) << "identity from SO_PEERCRED";
  EXPECT_EQ(s["jobs"][0]["state"], "running");
  ::close(fd);
}

TEST_F(CoordServerTest, SharedMemoryIsReadOnlyForJobs) {
  const int fd = Join(kGiB);
  const proto::Welcome w = Expect<proto::Welcome>(fd);
  struct stat st;
  const int shm = ::shm_open(w.shm_name.c_str(), O_RDONLY, 0);
  ASSERT_GE(shm, 0);
  ASSERT_EQ(::fstat(shm, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "others may read, only the coordinator writes";
  ::close(shm);
  ::close(fd);
}

TEST_F(CoordServerTest, WhenAJobDiesItsMemoryGoesToTheNext) {
  const int a = Join(12 * kGiB);
  Expect<proto::Welcome>(a);
  Expect<proto::Go>(a);
  const int b = Join(12 * kGiB);  // admitted, but 24 GiB on 16: it waits for its turn
  Expect<proto::Welcome>(b);
  ::close(a);  // as kill -9 would
  const proto::Go go = Expect<proto::Go>(b);
  EXPECT_EQ(go.slice_end_ns, proto::kNever) << "alone now: no more turns";
  EXPECT_NE(log().find("is gone"), std::string::npos) << log();
  ::close(b);
}

TEST_F(CoordServerTest, MalformedMessagesAreRejectedAndTheRestGoOn) {
  const int good = Join(kGiB);
  Expect<proto::Welcome>(good);
  Expect<proto::Go>(good);

  Result<int> bad = ConnectUnix(socket());
  ASSERT_TRUE(bad.ok());
  const char garbage[] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::write(*bad, garbage, sizeof garbage), static_cast<ssize_t>(sizeof garbage));
  EXPECT_TRUE(Closed(*bad));
  ::close(*bad);

  // A job that sends what only the coordinator may send.
  const int rogue = Join(kGiB);
  Expect<proto::Welcome>(rogue);
  Expect<proto::Go>(rogue);
  ASSERT_TRUE(SendMessage(rogue, proto::Go{}).ok());
  EXPECT_TRUE(Closed(rogue));
  ::close(rogue);

  // A message before hello, and a second hello.
  Result<int> early = ConnectUnix(socket());
  ASSERT_TRUE(SendMessage(*early, proto::Usage{1, 1}).ok());
  EXPECT_TRUE(Closed(*early));
  ::close(*early);
  const int twice = Join(kGiB);
  Expect<proto::Welcome>(twice);
  Expect<proto::Go>(twice);
  ASSERT_TRUE(SendMessage(twice, proto::Hello{}).ok());
  EXPECT_TRUE(Closed(twice));
  ::close(twice);

  const std::string l = log();
  EXPECT_NE(l.find("rejected a malformed message"), std::string::npos) << l;
  EXPECT_NE(l.find("a coordinator-to-job message sent by a job"), std::string::npos) << l;
  EXPECT_NE(l.find("before hello"), std::string::npos) << l;
  EXPECT_NE(l.find("a second hello"), std::string::npos) << l;
  EXPECT_EQ(Status()["jobs"][0]["state"], "running") << "the good job is untouched";
  ::close(good);
}

TEST_F(CoordServerTest, PauseAndResumeByTheOwner) {
  const int fd = Join(4 * kGiB);
  const proto::Welcome w = Expect<proto::Welcome>(fd);
  Expect<proto::Go>(fd);
  proto::Control pause;
  pause.op = proto::ControlOp::kPause;
  pause.job = w.job;
  proto::ControlReply r = Ask(pause);
  EXPECT_TRUE(r.ok) << r.text;
  const proto::Stop stop = Expect<proto::Stop>(fd);
  EXPECT_EQ(stop.reason, proto::StopReason::kPause);
  EXPECT_EQ(stop.evict_bytes, proto::kNever);
  ASSERT_TRUE(SendMessage(fd, proto::Stopped{10, 0, kGiB, 0, 0}).ok());
  EXPECT_EQ(Status()["jobs"][0]["state"], "paused");
  EXPECT_FALSE(Ask(pause).ok) << "already paused";
  proto::Control resume = pause;
  resume.op = proto::ControlOp::kResume;
  EXPECT_TRUE(Ask(resume).ok);
  const proto::Go go = Expect<proto::Go>(fd);
  EXPECT_TRUE(go.load) << "its working set comes back";
  proto::Control missing = pause;
  missing.job = 999;
  EXPECT_NE(Ask(missing).text.find("no job 999"), std::string::npos);
  ::close(fd);
}

TEST_F(CoordServerTest, OnlyTheOwnerOrRootMayControlAJob) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const int fd = Join(kGiB);
  const proto::Welcome w = Expect<proto::Welcome>(fd);
  Expect<proto::Go>(fd);
  const pid_t child = fork();
  if (child == 0) {
    if (setuid(65534) != 0) _exit(3);
    Result<int> c = ConnectUnix(socket());
    if (!c.ok()) _exit(4);
    proto::Control pause;
    pause.op = proto::ControlOp::kPause;
    pause.job = w.job;
    if (!SendMessage(*c, pause).ok()) _exit(5);
    Result<proto::Message> m = ReceiveMessage(*c, 5000);
    if (!m.ok()) _exit(6);
    const auto& r = std::get<proto::ControlReply>(*m);
    // Nor may another user write the coordinator's shared memory.
    const bool shm_writable = ::shm_open(w.shm_name.c_str(), O_RDWR, 0) >= 0;
    _exit(!r.ok && r.text.find("only its owner or root") != std::string::npos && !shm_writable ? 0 : 7);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(Status()["jobs"][0]["state"], "running");
  ::close(fd);
}

TEST_F(CoordServerTest, AJobThatStopsAnsweringIsPassedOver) {
  Stop();
  Start(/*answer_timeout_ms=*/300);
  const int a = Join(10 * kGiB, "hung");
  Expect<proto::Welcome>(a);
  Expect<proto::Go>(a);
  const int b = Join(10 * kGiB, "patient");  // 20 GiB on 16: turns
  Expect<proto::Welcome>(b);
  // Job a never reports its slice end, nor answers anything: after the
  // timeout the coordinator stops it and, unanswered again, starts b.
  ASSERT_TRUE(SendMessage(b, proto::SliceEnd{1}).ok());  // b is not running: ignored
  const proto::Go go = Expect<proto::Go>(b);
  EXPECT_GT(go.budget, 0u);
  EXPECT_NE(log().find("has not answered"), std::string::npos) << log();
  ::close(a);
  ::close(b);
}

TEST_F(CoordServerTest, ASecondCoordinatorOnTheSameSocketIsRefusedAndAStaleSocketIsReplaced) {
  ServerOptions o;
  o.socket_path = socket();
  Result<std::unique_ptr<CoordServer>> second = CoordServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("a coordinator already runs at"), std::string::npos);
  Stop();
  // A socket file left behind by a coordinator that died.
  Result<int> l = ListenUnix(socket(), false);
  ASSERT_TRUE(l.ok());
  ::close(*l);  // the file remains, nobody listens
  Start();
  const int fd = Join(kGiB);
  EXPECT_TRUE(Expect<proto::Welcome>(fd).admitted);
  ::close(fd);
}

TEST_F(CoordServerTest, AnUnsafeSocketDirectoryIsRefused) {
  const std::string open_dir = dir_ + "/open";
  ::mkdir(open_dir.c_str(), 0777);
  ::chmod(open_dir.c_str(), 0777);
  ServerOptions o;
  o.socket_path = open_dir + "/s.sock";
  Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
  if (geteuid() == 0) {
    // root may use a world-writable directory it owns (like /run); the socket is 0666 for every user.
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    struct stat st;
    ASSERT_EQ(::stat(o.socket_path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666u);
  } else {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("writable by others"), std::string::npos);
  }
  if (s.ok()) s->reset();
  ::unlink(o.socket_path.c_str());
  ::rmdir(open_dir.c_str());
}

}  // namespace
}  // namespace msched

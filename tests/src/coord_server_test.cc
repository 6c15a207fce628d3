// The coordinator server in-process, driven by raw socket clients: the
// protocol as jobs and the CLI speak it, and everything a broken or hostile
// peer might do.
#include "coord/coord_server.h"

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
  void Start(uint64_t answer_timeout_ms = 10000, ServerOptions o = {}) {
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
  // The welcome and the read-only descriptor of the shared memory it carries.
  std::pair<proto::Welcome, int> ExpectWelcome(int fd) {
    int shm_fd = -1;
    Result<proto::Message> m = ReceiveMessage(fd, 5000, &shm_fd);
    if (!m.ok() || !std::holds_alternative<proto::Welcome>(*m)) {
      ADD_FAILURE() << "expected a welcome: " << (m.ok() ? proto::MsgTypeName(proto::TypeOf(*m)) : m.status().ToString());
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
  void Switch(const TurnTakers& t, int running, uint64_t now, const std::function<void()>& stopped = [] {}) {
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
int CoordServerTest::serial_ = 0;

TEST_F(CoordServerTest, AJobRegistersAndRunsAndItsGateOpensInSharedMemory) {
  const int fd = Join(4 * kGiB, "train");
  const auto [w, shm_fd] = ExpectWelcome(fd);
  EXPECT_TRUE(w.admitted);
  const proto::Go go = Expect<proto::Go>(fd);
  EXPECT_EQ(go.slice_end_ns, proto::kNever);
  Result<CoordShm> shm = CoordShm::OpenReadOnly(shm_fd);
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  EXPECT_EQ(shm->slot(w.slot).job.load(), w.job);
  EXPECT_EQ(shm->slot(w.slot).may_run.load(), 1u);
  EXPECT_EQ(go.budget, 16 * kGiB);
  const nlohmann::json s = Status();
  ASSERT_EQ(s["jobs"].size(), 1u);
  EXPECT_EQ(s["jobs"][0]["name"], "train");
  EXPECT_EQ(s["jobs"][0]["pid"], getpid()) << "identity from SO_PEERCRED";
  EXPECT_EQ(s["jobs"][0]["state"], "running");
  ::close(fd);
}

TEST_F(CoordServerTest, SharedMemoryIsReadOnlyForJobsAndHasNoName) {
  const int fd = Join(kGiB);
  const auto [w, shm] = ExpectWelcome(fd);
  ASSERT_GE(shm, 0) << "the welcome carries the shared memory";
  EXPECT_EQ(::fcntl(shm, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(::mmap(nullptr, sizeof(ShmLayout), PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0), MAP_FAILED)
      << "a job cannot map it writable";
  EXPECT_EQ(errno, EACCES);
  void* p = ::mmap(nullptr, sizeof(ShmLayout), PROT_READ, MAP_SHARED, shm, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_NE(::mprotect(p, sizeof(ShmLayout), PROT_READ | PROT_WRITE), 0) << "nor make it writable later";
  ::munmap(p, sizeof(ShmLayout));
  // Nothing under /dev/shm another user could pre-create, find or open.
  char link[64], target[256] = {};
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", shm);
  ASSERT_GT(::readlink(link, target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target).rfind("/memfd:", 0), 0u) << target;
  ::close(shm);
  ::close(fd);
}

TEST_F(CoordServerTest, AJobNameThatIsNotCleanUtf8IsRejectedAndTheStatusStillWorks) {
  const int good = Join(kGiB, "good");
  Expect<proto::Welcome>(good);
  for (const char* bad : {"caf\xe9", "bad\x01name"}) {
    // The name bytes written raw, as a hostile client would: the hook's own
    // client sanitizes names before they leave (proto::SanitizeName).
    std::string frame = proto::Encode(proto::Hello{});
    const std::string name(bad);
    const uint32_t len = static_cast<uint32_t>(name.size());
    std::memcpy(frame.data() + frame.size() - 4, &len, 4);
    frame += name;
    const uint32_t payload = static_cast<uint32_t>(frame.size() - proto::kHeaderSize);
    std::memcpy(frame.data() + 8, &payload, 4);
    Result<int> fd = ConnectUnix(socket());
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::write(*fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
    EXPECT_TRUE(Closed(*fd));
    ::close(*fd);
  }
  const nlohmann::json s = Status();  // throws, failing the test, if the status is not JSON
  ASSERT_EQ(s["jobs"].size(), 1u);
  EXPECT_EQ(s["jobs"][0]["name"], "good");
  EXPECT_NE(log().find("malformed hello"), std::string::npos) << log();
  ::close(good);
}

TEST_F(CoordServerTest, ConnectionsThatSayNothingOrStopMidFrameAreDropped) {
  Stop();
  ServerOptions o;
  o.hello_timeout_ms = 300;
  Start(10000, o);
  Result<int> silent = ConnectUnix(socket());
  ASSERT_TRUE(silent.ok());
  const int half = Join(kGiB, "half");
  Expect<proto::Welcome>(half);
  Expect<proto::Go>(half);
  const std::string frame = proto::Encode(proto::Usage{});
  ASSERT_EQ(::write(half, frame.data(), 5), 5);
  EXPECT_TRUE(Closed(*silent));
  EXPECT_TRUE(Closed(half));
  ::close(*silent);
  ::close(half);
  // A header announcing more than its type can hold is refused before any payload.
  Result<int> big = ConnectUnix(socket());
  std::string huge = proto::Encode(proto::Hello{});
  const uint32_t size = proto::kMaxPayload;
  std::memcpy(huge.data() + 8, &size, 4);
  ASSERT_EQ(::write(*big, huge.data(), proto::kHeaderSize), static_cast<ssize_t>(proto::kHeaderSize));
  EXPECT_TRUE(Closed(*big));
  ::close(*big);
  const std::string l = log();
  EXPECT_NE(l.find("said nothing for 300 ms"), std::string::npos) << l;
  EXPECT_NE(l.find("left a message unfinished"), std::string::npos) << l;
  EXPECT_NE(l.find("too large"), std::string::npos) << l;
  const int fd = Join(kGiB, "after");
  EXPECT_TRUE(Expect<proto::Welcome>(fd).admitted) << "still serving";
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

TEST_F(CoordServerTest, AJobToldToGoFindsItsGateAlreadyOpen) {
  // The coordinator opens the job's gate before it sends Go: a job acting on
  // its Go at once must not find the gate closed (the hook would then wait a
  // recheck period before it launches). A timeline makes each gate update
  // slower, so the race, if any, is lost often.
  Stop();
  ServerOptions o;
  o.trace_path = dir_ + "/timeline.json";
  Start(/*answer_timeout_ms=*/10000, o);
  TurnTakers t;
  JoinTurnTakers(&t);
  Expect<proto::Go>(t.fds[0]);
  uint64_t now = 0;
  int closed = 0;
  constexpr int kSwitches = 200;
  for (int i = 0, running = 0; i < kSwitches; ++i, running = 1 - running) {
    Switch(t, running, now += 100'000'000);
    closed += t.shm[1 - running].slot(t.slots[1 - running]).may_run.load(std::memory_order_acquire) == 0;
  }
  EXPECT_EQ(closed, 0) << "of " << kSwitches << " Go messages found their gate closed";
  ::close(t.fds[0]);
  ::close(t.fds[1]);
  Stop();
  ::unlink(o.trace_path.c_str());
}

TEST_F(CoordServerTest, EveryOrderIsCountedInTheGatePageBeforeItIsSentAndTheSlotNamesTheProcess) {
  // A job blocked in a simulated run tells its peers how many orders it had
  // received when it blocked; a peer compares that with this count to know
  // that one is on its way (coord_client.cc, WaitTurn).
  TurnTakers t;
  JoinTurnTakers(&t);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(t.shm[i].slot(t.slots[i]).pid.load(), getpid()) << "from SO_PEERCRED";
  uint64_t received[2] = {0, 0};
  auto sent = [&](int i) { return t.shm[i].slot(t.slots[i]).orders_sent.load(std::memory_order_acquire); };
  Expect<proto::Go>(t.fds[0]);
  EXPECT_EQ(sent(0), ++received[0]);
  EXPECT_EQ(sent(1), 0u) << "the welcome is not an order";
  uint64_t now = 0;
  for (int i = 0, running = 0; i < 4; ++i, running = 1 - running) {
    Switch(t, running, now += 100'000'000, [&] { EXPECT_EQ(sent(running), ++received[running]); });
    EXPECT_EQ(sent(1 - running), ++received[1 - running]);
  }
  ::close(t.fds[0]);
  ::close(t.fds[1]);
}

TEST_F(CoordServerTest, EveryMessageOfAJobIsCountedInTheGatePageOnceHandled) {
  // A job in a simulated run holds its place on the clock until the count
  // reaches what it sent (coord_client.cc, WaitTurn).
  TurnTakers t;
  JoinTurnTakers(&t);
  Expect<proto::Go>(t.fds[0]);
  auto handled = [&](int i, uint64_t want) {
    // Published after the orders the message brought: poll for it.
    const auto& count = t.shm[i].slot(t.slots[i]).messages_handled;
    for (int tries = 0; tries < 5000 && count.load(std::memory_order_acquire) < want; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return count.load(std::memory_order_acquire);
  };
  EXPECT_EQ(handled(0, 0), 0u) << "the hello is not counted";
  ASSERT_TRUE(SendMessage(t.fds[0], proto::Usage{10 * kGiB, 1000, {}, 0}).ok());
  EXPECT_EQ(handled(0, 1), 1u) << "a report that asks nothing";
  Status();  // a control request, on a connection of its own
  Switch(t, /*running=*/0, 100'000'000);  // a slice's end and a stop's reply
  EXPECT_EQ(handled(0, 3), 3u);
  EXPECT_EQ(handled(1, 0), 0u) << "the other job sent nothing";
  ASSERT_TRUE(SendMessage(t.fds[1], proto::Goodbye{200'000'000, {}}).ok());
  EXPECT_EQ(handled(1, 1), 1u) << "its goodbye";
  EXPECT_EQ(handled(0, 3), 3u);
  ::close(t.fds[0]);
  ::close(t.fds[1]);
}

// mschedd --metrics: the server publishes snapshots to the board as jobs
// come, report and go, and a reader on another thread sees them (TSan runs
// this too); names stay out unless the option asks for them.
TEST_F(CoordServerTest, MetricsArePublishedToTheBoardAsJobsComeReportAndGo) {
  Stop();
  ServerOptions o;
  o.metrics = std::make_shared<MetricsBoard>();
  Start(10000, o);
  ASSERT_NE(o.metrics->Latest(), nullptr) << "published once at the start";
  EXPECT_EQ(o.metrics->Latest()->jobs.size(), 0u);
  // Waits until a published snapshot satisfies `pred` (the server publishes
  // at most once a tick).
  auto eventually = [&](auto pred) {
    for (int i = 0; i < 200; ++i) {
      if (std::shared_ptr<const MetricsSnapshot> m = o.metrics->Latest(); m && pred(*m)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  const int a = Join(10 * kGiB, "secret-a");
  Expect<proto::Welcome>(a);
  Expect<proto::Go>(a);
  const int b = Join(10 * kGiB, "secret-b");  // 20 GiB on 16: they take turns
  Expect<proto::Welcome>(b);
  ASSERT_TRUE(SendMessage(a, proto::Usage{10 * kGiB, 5, {3, 1 << 20}}).ok());
  EXPECT_TRUE(eventually([](const MetricsSnapshot& m) {
    return m.jobs_running == 2 && m.groups == 2 && m.faults == 3 && m.prefetched_bytes == 1u << 20;
  }));
  ASSERT_TRUE(SendMessage(a, proto::SliceEnd{100'000'000}).ok());
  Expect<proto::Stop>(a);
  proto::Stopped st;
  st.now_ns = 100'000'000;
  st.resident = 6 * kGiB;
  st.counters = {5, 2 << 20};
  ASSERT_TRUE(SendMessage(a, st).ok());
  Expect<proto::Go>(b);
  EXPECT_TRUE(eventually([](const MetricsSnapshot& m) {
    return m.switches == 1 && m.slice_seconds.count == 1 && m.swap_out_bytes == 4 * kGiB && m.faults == 5;
  })) << "job a's turn ended, and it gave up 4 of its 10 GiB";
  ASSERT_TRUE(SendMessage(b, proto::Goodbye{200'000'000, {7, 0}}).ok());
  EXPECT_TRUE(eventually([](const MetricsSnapshot& m) { return m.jobs.size() == 1 && m.faults == 12; }))
      << "job b's final count is in, and its series are gone";
  const std::shared_ptr<const MetricsSnapshot> last = o.metrics->Latest();
  EXPECT_EQ(last->jobs[0].uid, static_cast<uint32_t>(getuid()));
  EXPECT_EQ(RenderPrometheus(*last).find("secret"), std::string::npos) << "no names unless asked for";
  ::close(a);
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
  ASSERT_TRUE(SendMessage(*early, proto::Usage{1, 1, {}}).ok());
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
  ASSERT_TRUE(SendMessage(fd, proto::Stopped{10, 0, kGiB, 0, 0, {}}).ok());
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
    _exit(!r.ok && r.text.find("only its owner or root") != std::string::npos ? 0 : 7);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(Status()["jobs"][0]["state"], "running");
  ::close(fd);
}

// The welcome carries the idle yield (mschedd --idle-yield); a
// job idle while another waits gives its turn up, the waiting one's Go is
// dated when it went idle, and `msched status` says why each waits.
TEST_F(CoordServerTest, AnIdleJobGivesItsTurnToTheWaitingOneAndRejoinsWhenItHasWork) {
  const int a = Join(10 * kGiB, "loader");
  EXPECT_EQ(ExpectWelcome(a).first.idle_yield_ns, 50'000'000u) << "the default";
  Expect<proto::Go>(a);
  const int b = Join(10 * kGiB, "trainer");  // 20 GiB on 16: turns
  Expect<proto::Welcome>(b);
  ASSERT_TRUE(SendMessage(a, proto::Idle{40'000'000, true}).ok());
  const proto::Stop stop = Expect<proto::Stop>(a);
  EXPECT_EQ(stop.evict_bytes, 4 * kGiB);
  proto::Stopped st;
  st.now_ns = 90'000'000;  // its clock is far past the moment it went idle
  st.working_set = 10 * kGiB;
  st.resident = 6 * kGiB;
  ASSERT_TRUE(SendMessage(a, st).ok());
  const proto::Go go = Expect<proto::Go>(b);
  EXPECT_EQ(go.start_ns, 40'000'000u);
  EXPECT_EQ(go.slice_end_ns, proto::kNever) << "the idle job is out of the rotation";
  nlohmann::json s = Status();
  EXPECT_EQ(s["coordinator"]["idle_yield_ns"], 50'000'000u);
  ASSERT_EQ(s["jobs"].size(), 2u);
  EXPECT_EQ(s["jobs"][0]["wait_reason"], "idle");
  EXPECT_EQ(s["jobs"][0]["idle_yields"], 1u);
  EXPECT_EQ(s["jobs"][1]["run_state"], "running");
  ASSERT_TRUE(SendMessage(a, proto::Idle{100'000'000, false}).ok());  // it launches again
  for (int i = 0; i < 100 && Status()["coordinator"]["slice_end_ns"].is_null(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s = Status();
  EXPECT_FALSE(s["coordinator"]["slice_end_ns"].is_null()) << "the running job's turn now ends";
  EXPECT_EQ(s["jobs"][0]["wait_reason"], "turn");
  ::close(a);
  ::close(b);
}

TEST_F(CoordServerTest, IdleYieldOffIsSentAsZero) {
  Stop();
  ServerOptions o;
  o.idle_yield_ns = 0;
  Start(10000, o);
  const int a = Join(kGiB);
  EXPECT_EQ(ExpectWelcome(a).first.idle_yield_ns, 0u);
  ::close(a);
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

// A job that reads nothing (stopped by SIGSTOP, suspended by Slurm, held in
// a debugger) while its neighbour's usage moves its grant stays the same
// job: its orders wait, consecutive grants merge into the latest, and once
// it reads it finds every order in turn, the last grant the one in force.
TEST_F(CoordServerTest, AJobThatReadsNothingKeepsItsPlaceAndFindsItsLatestGrant) {
  const int stopped = Join(6 * kGiB, "stopped");
  Expect<proto::Welcome>(stopped);
  const int busy = Join(4 * kGiB, "busy");
  Expect<proto::Welcome>(busy);
  // Some 20,000 grants for `stopped` (about 0.5 MiB of frames; a socket
  // takes some 200 KiB): `busy` frees and allocates again, each report
  // asking for an answer so that every one is handled before the next.
  constexpr int kReports = 20000;
  for (int i = 1; i <= kReports; ++i) {
    const uint64_t allocated = (i % 2 ? 4 : 8) * kGiB;
    ASSERT_TRUE(SendMessage(busy, proto::Usage{allocated, static_cast<uint64_t>(i), {}, static_cast<uint64_t>(i)}).ok());
    for (;;) {  // its own orders: a Go, Budgets, and the answer to this ask
      const Result<proto::Message> m = ReceiveMessage(busy, 5000);
      ASSERT_TRUE(m.ok()) << m.status().ToString() << " at report " << i;
      const auto* b = std::get_if<proto::Budget>(&*m);
      if (b != nullptr && b->answers == static_cast<uint64_t>(i)) break;
    }
  }
  EXPECT_EQ(log().find("dropping its connection"), std::string::npos) << log();
  const nlohmann::json status = Status();
  ASSERT_EQ(status["jobs"].size(), 2u) << status.dump();
  // It reads at last: orders in turn, the last grant that of `busy` at 8 GiB.
  uint64_t last_budget = 0;
  int orders = 0;
  for (;;) {
    const Result<proto::Message> m = ReceiveMessage(stopped, 200);
    if (!m.ok()) break;
    ++orders;
    if (const auto* b = std::get_if<proto::Budget>(&*m)) last_budget = b->budget;
  }
  EXPECT_GT(orders, 0);
  EXPECT_LT(orders, kReports) << "grants that waited merged";
  const nlohmann::json after = Status();
  uint64_t granted = 0;
  for (const nlohmann::json& j : after["jobs"]) {
    if (j.value("name", "") == "stopped") granted = j.value("budget_bytes", uint64_t{0});
  }
  EXPECT_EQ(last_budget, granted) << after.dump();
  ::close(stopped);
  ::close(busy);
}

TEST_F(CoordServerTest, AnIdleJobHoldingMostOfTheGpuDoesNotKeepASmallOneWaiting) {
  Stop();
  Start(/*answer_timeout_ms=*/300);
  // A hello that declares nearly the whole GPU, then silence.
  const int idle = Join(15 * kGiB + kGiB / 2, "idle");
  Expect<proto::Welcome>(idle);
  Expect<proto::Go>(idle);
  const int small = Join(kGiB, "small");
  Expect<proto::Welcome>(small);
  const proto::Go go = Expect<proto::Go>(small);
  EXPECT_GT(go.budget, 0u) << "the small job runs once the idle one is passed over";
  ::close(idle);
  ::close(small);
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

// Runs `body` as uid 65534 in a child; its exit status (0: every check held).
template <typename Body>
int AsNobody(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(CoordServerTest, GuestsAreBoundedAndSeeOthersJobsWithoutNames) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  Stop();
  ServerOptions o;
  o.max_jobs_per_user = 2;
  Start(10000, o);
  const int mine = Join(kGiB, "roots-secret");
  Expect<proto::Welcome>(mine);
  const int status = AsNobody([&] {
    auto join = [&](int priority) {
      Result<int> fd = ConnectToCoordinator(socket());
      if (!fd.ok()) return -1;
      proto::Hello h;
      h.name = "guest";
      h.priority = priority;
      return SendMessage(*fd, h).ok() ? *fd : -1;
    };
    const int a = join(100), b = join(0), c = join(0);
    if (a < 0 || b < 0 || c < 0) return 1;
    Result<proto::Message> wa = ReceiveMessage(a, 5000), wb = ReceiveMessage(b, 5000), wc = ReceiveMessage(c, 5000);
    if (!wa.ok() || !std::holds_alternative<proto::Welcome>(*wa)) return 2;
    if (!wb.ok() || !std::holds_alternative<proto::Welcome>(*wb)) return 3;
    if (!wc.ok() || !std::holds_alternative<proto::Refused>(*wc)) return 4;
    if (std::get<proto::Refused>(*wc).reason.find("the most one user may have") == std::string::npos) return 5;
    Result<int> q = ConnectToCoordinator(socket());
    if (!q.ok() || !SendMessage(*q, proto::Control{}).ok()) return 6;
    Result<proto::Message> r = ReceiveMessage(*q, 5000);
    if (!r.ok()) return 7;
    const nlohmann::json s = nlohmann::json::parse(std::get<proto::ControlReply>(*r).text, nullptr, false);
    if (!s.is_object()) return 8;
    for (const nlohmann::json& j : s["jobs"]) {
      const bool own = j["uid"] == 65534;
      if (own && (j["name"] != "guest" || j["priority"] != 0)) return 9;  // its priority 100 was capped
      if (!own && (j["name"] != "" || j["pid"] != 0)) return 10;          // root's job: no name, no pid
    }
    proto::Control raise;
    raise.op = proto::ControlOp::kPriority;
    raise.job = std::get<proto::Welcome>(*wb).job;
    raise.priority = 5;
    Result<int> p = ConnectToCoordinator(socket());
    if (!p.ok() || !SendMessage(*p, raise).ok()) return 11;
    Result<proto::Message> pr = ReceiveMessage(*p, 5000);
    if (!pr.ok() || std::get<proto::ControlReply>(*pr).ok) return 12;
    return 0;
  });
  EXPECT_EQ(status, 0);
  const nlohmann::json s = Status();
  EXPECT_EQ(s["jobs"][0]["name"], "roots-secret") << "root sees everything";
  ::close(mine);
}

TEST(CoordinatorTrustTest, AJobNeverTalksToACoordinatorRunByAnotherUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const std::string dir = ::testing::TempDir() + "trust_" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0777);
  ::chmod(dir.c_str(), 0777);
  const std::string planted = dir + "/planted";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t impostor = fork();
  if (impostor == 0) {
    // Another user pre-creates the directory a victim's coordinator would use.
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    ::mkdir(planted.c_str(), 0755);
    Result<int> l = ListenUnix(planted + "/gpu0.sock", /*any_user=*/true);
    (void)!::write(ready[1], l.ok() ? "y" : "n", 1);
    ::pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  Result<int> fd = ConnectToCoordinator(planted + "/gpu0.sock");
  ::kill(impostor, SIGKILL);
  ::waitpid(impostor, nullptr, 0);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(fd.status().message().find("belongs to uid 65534"), std::string::npos) << fd.status().ToString();
  // The victim's own coordinator refuses that directory too.
  ServerOptions o;
  o.socket_path = planted + "/gpu0.sock";
  Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
  EXPECT_FALSE(s.ok());
  ::unlink((planted + "/gpu0.sock").c_str());
  ::rmdir(planted.c_str());
  ::rmdir(dir.c_str());
  ::close(ready[0]);
  ::close(ready[1]);
}

// User plus system CPU seconds `pid` has used.
double CpuSeconds(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  const int got = std::fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime);
  std::fclose(f);
  return got == 2 ? static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK)) : -1;
}

TEST(CoordinatorLimitsTest, AtTheDescriptorLimitItWaitsInsteadOfSpinning) {
  const std::string dir = ::testing::TempDir() + "fdlimit_" + std::to_string(getpid());
  ::mkdir(dir.c_str(), 0700);
  const std::string sock = dir + "/s.sock";
  const pid_t server = fork();
  if (server == 0) {
    rlimit low{24, 24};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(100);
    ServerOptions o;
    o.socket_path = sock;
    o.policy.hbm_bytes = 16 * kGiB;
    Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
    if (!s.ok()) _exit(101);
    (*s)->Run();
    _exit(0);
  }
  for (int i = 0; i < 200 && ::access(sock.c_str(), F_OK) != 0; ++i) usleep(10000);
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) {
    if (Result<int> fd = ConnectUnix(sock); fd.ok()) held.push_back(*fd);
  }
  EXPECT_EQ(held.size(), 40u) << "queued by the kernel even when the coordinator cannot accept";
  usleep(300000);
  const double before = CpuSeconds(server);
  usleep(1000000);
  const double used = CpuSeconds(server) - before;
  EXPECT_LT(used, 0.3) << "a coordinator out of descriptors must not spin";
  for (int fd : held) ::close(fd);
  // Once descriptors are free again it serves.
  Result<int> fd = ConnectUnix(sock);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(SendMessage(*fd, proto::Control{}).ok());
  Result<proto::Message> reply = ReceiveMessage(*fd, 5000);
  EXPECT_TRUE(reply.ok() && std::holds_alternative<proto::ControlReply>(*reply))
      << (reply.ok() ? "another message" : reply.status().ToString());
  ::close(*fd);
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  ::unlink(sock.c_str());
  ::rmdir(dir.c_str());
}

TEST_F(CoordServerTest, AnythingButAStaleSocketIsNeverReplaced) {
  Stop();
  const std::string file = dir_ + "/results.csv";
  {
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("precious\n", f);
    std::fclose(f);
  }
  ServerOptions o;
  o.socket_path = file;
  Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("is not a socket"), std::string::npos) << s.status().ToString();
  char buf[16] = {};
  FILE* f = std::fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(std::fgets(buf, sizeof buf, f), nullptr);
  std::fclose(f);
  EXPECT_STREQ(buf, "precious\n");
  ::unlink(file.c_str());
  Start();
}

// A directory others may write (0777, not sticky) lets anyone put a socket
// of their own in the coordinator's place, even when root owns it. Whoever
// owns it, both ends (a root mschedd included, and every job) refuse it; a
// sticky one, as /tmp, is accepted.
TEST_F(CoordServerTest, AnUnsafeSocketDirectoryIsRefusedWhoeverOwnsIt) {
  const std::string open_dir = dir_ + "/open";
  ::mkdir(open_dir.c_str(), 0777);
  ::chmod(open_dir.c_str(), 0777);  // the test's user owns it: root's, run as root
  ServerOptions o;
  o.socket_path = open_dir + "/s.sock";
  Result<std::unique_ptr<CoordServer>> s = CoordServer::Start(o);
  ASSERT_FALSE(s.ok()) << "mschedd listened in " << open_dir;
  EXPECT_NE(s.status().message().find(open_dir + " is writable by others and not sticky"), std::string::npos)
      << s.status().ToString();

  // A job: the fixture's coordinator, once its directory is opened to all.
  auto job_refuses = [&] {
    Result<int> fd = ConnectToCoordinator(socket());
    if (fd.ok()) ::close(*fd);
    return !fd.ok() && fd.status().code() == StatusCode::kPermissionDenied &&
           fd.status().message().find("is writable by others") != std::string::npos;
  };
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  EXPECT_TRUE(job_refuses()) << "a job of the directory's owner";
  if (geteuid() == 0) {
    EXPECT_EQ(AsNobody([&] { return job_refuses() ? 0 : 1; }), 0) << "a job of another user";
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);

  // Sticky: accepted, and the socket has its mode from the start, whatever the umask.
  ::chmod(open_dir.c_str(), 01777);
  const mode_t umask_before = ::umask(077);
  s = CoordServer::Start(o);
  ::umask(umask_before);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat(o.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, geteuid() == 0 ? 0666u : 0600u) << "0666 for a root coordinator serving every user";
  Result<int> fd = ConnectToCoordinator(o.socket_path);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  if (fd.ok()) ::close(*fd);
  s->reset();
  ::unlink(o.socket_path.c_str());
  ::rmdir(open_dir.c_str());
}

}  // namespace
}  // namespace msched

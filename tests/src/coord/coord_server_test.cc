// The coordinator server in-process, driven by raw socket clients: the
// protocol as jobs speak it, and everything a broken or hostile job might
// do (control requests, ownership, guests and the socket's safety are in
// coord_server_access_test.cc).
#include "coord/coord_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "coord_server_fixture.h"

namespace msched {
namespace {

using testing_fixtures::CoordServerTest;
using testing_fixtures::kGiB;

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
  // that one is on its way (hook/src/client/coord_orders.cc, WaitTurn).
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
  // reaches what it sent (hook/src/client/coord_orders.cc, WaitTurn).
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
  Status();                               // a control request, on a connection of its own
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
  ASSERT_TRUE(SendMessage(a, proto::Usage{10 * kGiB, 5, {3, 1 << 20, 5 << 20}}).ok());
  EXPECT_TRUE(eventually([](const MetricsSnapshot& m) {
    return m.jobs_running == 2 && m.groups == 2 && m.faults == 3 && m.prefetched_bytes == 1u << 20 &&
           std::any_of(m.jobs.begin(), m.jobs.end(),
                       [](const JobMetrics& j) { return j.peak_over_budget_bytes == 5u << 20; });
  })) << "job a's peak over its budget reached the scheduler and the metrics";
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
  o.policy.idle_yield_ns = 0;
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
    ASSERT_TRUE(
        SendMessage(busy, proto::Usage{allocated, static_cast<uint64_t>(i), {}, static_cast<uint64_t>(i)}).ok());
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

}  // namespace
}  // namespace msched

// The coordinator server's control requests and its guard against other
// users: pause and resume by a job's owner, ownership, guests' limits and
// privacy, never talking to another user's coordinator, the descriptor
// limit, and a socket that is never replaced unless stale and never placed
// in an unsafe directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "coord/coord_server.h"
#include "coord_server_fixture.h"

namespace msched {
namespace {

using testing_fixtures::CoordServerTest;
using testing_fixtures::kGiB;

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

// A guest's report of the GPU's size is never taken: a first hello claiming
// 4 KiB once set the GPU's size for the coordinator's whole life, and every
// later job, root's included, was refused. Root's report still teaches it.
TEST_F(CoordServerTest, AGuestsReportOfTheGpusSizeIsNotTaken) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  Stop();
  hbm_bytes_ = 0;
  Start();
  const int status = AsNobody([&] {
    Result<int> fd = ConnectToCoordinator(socket());
    if (!fd.ok()) return 1;
    proto::Hello h;
    h.name = "guest";
    h.device_total = 4096;
    h.declared_mem = 1 << 20;
    if (!SendMessage(*fd, h).ok()) return 2;
    Result<proto::Message> w = ReceiveMessage(*fd, 5000);
    return w.ok() && std::holds_alternative<proto::Welcome>(*w) ? 0 : 3;
  });
  ASSERT_EQ(status, 0);
  EXPECT_EQ(Status()["coordinator"]["hbm_bytes"], 0u) << "the guest's 4 KiB was taken as the GPU's size";
  Result<int> fd = ConnectUnix(socket());
  ASSERT_TRUE(fd.ok());
  proto::Hello root;
  root.declared_mem = 4 * kGiB;
  root.device_total = 16 * kGiB;
  ASSERT_TRUE(SendMessage(*fd, root).ok());
  EXPECT_TRUE(Expect<proto::Welcome>(*fd).job != 0) << "root's 4 GiB job is not refused";
  EXPECT_EQ(Status()["coordinator"]["hbm_bytes"], 16 * kGiB);
  ::close(*fd);
}

// A job's time is checked against the coordinator's own reading of the
// device clock: a hello (or any later message) carrying 2^62 ns once became
// the coordinator's clock for good, and every later job was told to start
// then (on the simulator it waited forever). Times within the slack are
// taken as they are.
TEST_F(CoordServerTest, AJobsClockCannotCarryTheCoordinatorsIntoTheFuture) {
  Stop();
  auto device_now = std::make_shared<std::atomic<uint64_t>>(5'000'000'000);
  ServerOptions o;
  o.device_clock = [device_now] { return device_now->load(); };
  Start(10000, o);
  const uint64_t lie = uint64_t{1} << 62;
  Result<int> liar = ConnectUnix(socket());
  ASSERT_TRUE(liar.ok());
  proto::Hello h;
  h.declared_mem = 10 * kGiB;
  h.now_ns = lie;
  ASSERT_TRUE(SendMessage(*liar, h).ok());
  Expect<proto::Welcome>(*liar);
  EXPECT_EQ(Expect<proto::Go>(*liar).start_ns, 5'000'000'000u) << "the device's time, not the claim";
  proto::Usage u;
  u.allocated = 10 * kGiB;
  u.now_ns = lie;
  ASSERT_TRUE(SendMessage(*liar, u).ok());
  device_now->store(6'000'000'000);
  Result<int> honest = ConnectUnix(socket());
  ASSERT_TRUE(honest.ok());
  proto::Hello ok;
  ok.declared_mem = 10 * kGiB;
  ok.now_ns = 6'500'000'000;  // within the slack of the device's 6 s
  ASSERT_TRUE(SendMessage(*honest, ok).ok());
  Expect<proto::Welcome>(*honest);
  const nlohmann::json s = Status();
  ASSERT_EQ(s["jobs"].size(), 2u);
  EXPECT_EQ(s["coordinator"]["device_time_ns"], 6'500'000'000u) << s.dump();
  const std::string said = log();
  EXPECT_NE(said.find("ahead of the device's own clock"), std::string::npos) << said;
  EXPECT_EQ(said.find("ahead of the device's own clock"), said.rfind("ahead of the device's own clock"))
      << "said once for the connection: " << said;
  ::close(*liar);
  ::close(*honest);
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

// mschedd --metrics as a process: two simulated jobs that do not fit the
// GPU together take turns under it while the test reads /metrics over HTTP
// with a plain socket, and checks the series a scrape would see (jobs by
// state, per-job memory, switches, swaps, slices, the jobs' counters), that
// jobs' series go when they do, what else the endpoint answers, that names
// are published only with --metrics-names, the errors for a bad address
// and a port in use, and that hundreds of stalled connections do not hold up
// a scrape. The HTTP server's other limits are tested in-process
// (metrics_http_test.cc).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"
#include "http_client.h"
#include "run_program.h"

namespace {

namespace ts = msched::testsupport;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kHbm = 64 * kMiB;

using ts::ConnectLoopback;
using ts::Http;
using ts::HttpReply;

// series ("msched_jobs{state=\"running\"}") -> value, from an exposition.
std::map<std::string, double> Series(const std::string& body) {
  std::map<std::string, double> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// The per-job series of `metric`: labels -> value.
std::map<std::string, double> PerJob(const std::map<std::string, double>& series, const std::string& metric) {
  std::map<std::string, double> out;
  for (const auto& [name, value] : series) {
    if (name.rfind(metric + "{", 0) == 0) out[name.substr(metric.size())] = value;
  }
  return out;
}

// What the live jobs hold in HBM together.
double ResidentSum(const std::map<std::string, double>& series) {
  double sum = 0;
  for (const auto& [labels, value] : PerJob(series, "msched_job_resident_bytes")) sum += value;
  return sum;
}

class MschedMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "metrics_" + std::to_string(getpid()) + "_" + std::to_string(serial_++);
    ::mkdir(dir_.c_str(), 0700);
    device_ = "metrics" + std::to_string(getpid()) + "_" + std::to_string(serial_);
  }
  void TearDown() override {
    for (auto& j : jobs_) j.Kill(SIGKILL), j.Wait();
    if (daemon_) daemon_->Kill(SIGTERM), daemon_->Wait();
    ::unlink(("/dev/shm/msim-" + device_).c_str());
  }
  std::string Socket() const { return dir_ + "/gpu0.sock"; }
  std::string Log() const { return ts::Slurp(dir_ + "/mschedd.log"); }

  // Starts mschedd with --metrics on a port the system picks; returns that port.
  int StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        MSCHEDD,     "--socket",   Socket(), "--gpu-memory", std::to_string(kHbm), "--log", dir_ + "/mschedd.log",
        "--metrics", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto d = msched::Subprocess::Spawn(argv);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return 0;
    daemon_.emplace(std::move(*d));
    const std::regex serving(R"(serving metrics at http://127\.0\.0\.1:([0-9]+)/metrics)");
    std::smatch m;
    for (int i = 0; i < 500; ++i) {
      const std::string log = Log();
      if (std::regex_search(log, m, serving)) return std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "mschedd never said where it serves metrics: " << Log();
    return 0;
  }

  // A vector-add job of `foot` bytes and `tasks` tasks under the coordinator.
  void StartJob(const std::string& name, uint64_t foot, int tasks, std::map<std::string, std::string> env = {}) {
    msched::SpawnOptions o;
    o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
             {"LD_PRELOAD", LIBMSCHED},
             {"MSIM_DEVICE", device_},
             {"MSIM_HBM_BYTES", std::to_string(kHbm)},
             {"MSCHED_SOCKET", Socket()},
             {"MSCHED_COORD", "required"},
             {"MSCHED_TEMPLATES", WORKLOADS_DIR "/kernels"},
             {"MSCHED_JOB_NAME", name},
             {"MSCHED_LOG_LEVEL", "warn"}};
    for (auto& [k, v] : env) o.env[k] = v;
    o.stdout_path = o.stderr_path = dir_ + "/" + name + ".out";
    auto p = msched::Subprocess::Spawn({MSIM_RUN, WORKLOADS_DIR "/micro_vadd.json", "--set",
                                        "FOOT=" + std::to_string(foot), "--set", "TASKS=" + std::to_string(tasks)},
                                       o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    jobs_.push_back(std::move(*p));
  }

  // Scrapes until `pred` holds for the series, up to `seconds`; the last scrape.
  template <typename Pred>
  std::map<std::string, double> ScrapeUntil(int port, Pred pred, int seconds = 60) {
    std::map<std::string, double> series;
    for (int i = 0; i < seconds * 20; ++i) {
      const HttpReply r = Http(port, "GET", "/metrics");
      if (r.status == 200) {
        series = Series(r.body);
        if (pred(series)) return series;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the metrics never showed what was expected; last scrape:\n"
                  << Http(port, "GET", "/metrics").body << "\nmschedd's log:\n"
                  << Log();
    return series;
  }

  static int serial_;
  std::string dir_, device_;
  std::optional<msched::Subprocess> daemon_;
  std::vector<msched::Subprocess> jobs_;
};
int MschedMetricsTest::serial_ = 0;

TEST_F(MschedMetricsTest, TwoJobsTakingTurnsShowInTheSeriesAndTheirSeriesGoWithThem) {
  const int port = StartDaemon({"--slice", "5ms"});
  ASSERT_GT(port, 0);
  HttpReply first = Http(port, "GET", "/metrics");
  ASSERT_EQ(first.status, 200) << first.head;
  EXPECT_NE(first.head.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"), std::string::npos) << first.head;
  std::map<std::string, double> s = Series(first.body);
  EXPECT_EQ(s["msched_jobs{state=\"running\"}"], 0);
  EXPECT_EQ(s["msched_gpu_memory_bytes"], static_cast<double>(kHbm));
  EXPECT_EQ(s.count("msched_build_info{version=\"" MSCHED_VERSION "\"}"), 1u) << first.body;
  EXPECT_GT(s["msched_start_time_seconds"], 1.7e9);

  // 40 MiB each on 64 MiB: they take turns, a switch every 5 ms of device
  // time. One demand-pages (MSCHED_MODE=um), so that it reports faults;
  // the other prefetches what each kernel needs, and reports those bytes.
  StartJob("metrics-a", 40 * kMiB, 1000000);
  StartJob("metrics-b", 40 * kMiB, 1000000, {{"MSCHED_MODE", "um"}});
  s = ScrapeUntil(port, [](std::map<std::string, double>& m) {
    return m["msched_jobs{state=\"running\"}"] == 2 && m["msched_switches_total"] >= 4 &&
           m["msched_faults_total"] > 0 && m["msched_prefetched_bytes_total"] > 0 &&
           m["msched_swap_bytes_total{direction=\"in\"}"] > 0 && ResidentSum(m) > 0;
  });
  EXPECT_EQ(s["msched_jobs{state=\"waiting\"}"], 0);
  EXPECT_EQ(s["msched_jobs_submitted_total"], 2);
  EXPECT_EQ(s["msched_admissions_total"], 2);
  EXPECT_EQ(s["msched_groups"], 2) << "they do not fit together";
  EXPECT_GT(s["msched_swap_bytes_total{direction=\"out\"}"], 0);
  EXPECT_GE(s["msched_slice_seconds_count"], 4);
  EXPECT_EQ(s["msched_slice_seconds_bucket{le=\"+Inf\"}"], s["msched_slice_seconds_count"]);
  EXPECT_GT(s["msched_slice_seconds_sum"], 0);
  const uid_t uid = getuid();
  const std::map<std::string, double> resident = PerJob(s, "msched_job_resident_bytes");
  ASSERT_EQ(resident.size(), 2u) << Http(port, "GET", "/metrics").body;
  // Either job may have been swapped out to nothing at this instant; what
  // they hold together is not (the scrape waited for it).
  for (const auto& [labels, value] : resident) {
    EXPECT_TRUE(std::regex_match(labels, std::regex("\\{job_id=\"[12]\",uid=\"" + std::to_string(uid) + "\"\\}")))
        << labels << ": job id and uid only, no name";
    EXPECT_EQ(s["msched_job_declared_bytes" + labels], 0) << "no MSCHED_MEM";
    EXPECT_GT(s["msched_job_allocated_bytes" + labels], 0);
    EXPECT_GT(s["msched_job_budget_bytes" + labels], 0);
    EXPECT_EQ(s.count("msched_job_waited_seconds" + labels), 1u);
  }
  double on_gpu = 0;
  for (const auto& [labels, value] : PerJob(s, "msched_job_on_gpu")) on_gpu += value;
  EXPECT_LE(on_gpu, 1) << "one group at a time";
  // Each job's status as labels: its run state, why it waits, class, priority.
  const std::map<std::string, double> info = PerJob(s, "msched_job_info");
  ASSERT_EQ(info.size(), 2u);
  const std::regex info_labels(
      "\\{job_id=\"[12]\",uid=\"[0-9]+\",state=\"(running|waiting|swapped out)\",wait_reason=\"(|turn)\","
      "class=\"unset\",priority=\"0\"\\}");
  for (const auto& [labels, value] : info) {
    EXPECT_TRUE(std::regex_match(labels, info_labels)) << labels;
    EXPECT_EQ(value, 1);
  }

  // A job that is gone has no series; what it added to the totals stays.
  const double faults = s["msched_faults_total"];
  jobs_[1].Kill(SIGKILL);
  jobs_[1].Wait();
  s = ScrapeUntil(port, [](std::map<std::string, double>& m) { return m["msched_jobs{state=\"running\"}"] == 1; });
  EXPECT_EQ(PerJob(s, "msched_job_resident_bytes").size(), 1u);
  EXPECT_GE(s["msched_faults_total"], faults);
  EXPECT_EQ(Http(port, "GET", "/metrics").body.find("metrics-"), std::string::npos) << "names are not published";
}

TEST_F(MschedMetricsTest, OnlyGetAndHeadOfMetricsAreServed) {
  const int port = StartDaemon();
  ASSERT_GT(port, 0);
  EXPECT_EQ(Http(port, "GET", "/").status, 404);
  EXPECT_EQ(Http(port, "GET", "/metrics/x").status, 404);
  EXPECT_EQ(Http(port, "GET", "/metricsx").status, 404);
  const HttpReply post = Http(port, "POST", "/metrics");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.head.find("Allow: GET, HEAD"), std::string::npos) << post.head;
  const HttpReply head = Http(port, "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty()) << head.body;
  EXPECT_EQ(Http(port, "GET", "/metrics?x=1").status, 200) << "a query string changes nothing";
}

// The table in docs/operate.md ("Metrics") lists exactly what is served,
// with the types served.
TEST_F(MschedMetricsTest, EveryMetricServedIsDocumentedWithItsType) {
  std::map<std::string, std::string> documented, served;
  std::ifstream doc(DOCS_DIR "/operate.md");
  const std::regex row(R"(^\| `(msched_[a-z_]+)` \| (gauge|counter|histogram) \|)");
  std::smatch m;
  for (std::string line; std::getline(doc, line);) {
    if (std::regex_search(line, m, row)) documented[m[1]] = m[2];
  }
  ASSERT_GT(documented.size(), 15u) << "the metrics table in docs/operate.md was not found";
  const int port = StartDaemon();
  ASSERT_GT(port, 0);
  std::istringstream body(Http(port, "GET", "/metrics").body);
  const std::regex type(R"(^# TYPE (msched_[a-z_]+) ([a-z]+)$)");
  for (std::string line; std::getline(body, line);) {
    if (std::regex_match(line, m, type)) served[m[1]] = m[2];
  }
  EXPECT_EQ(served, documented);
  // The operator's kit (packaging/grafana, packaging/prometheus) queries
  // only what is served: a renamed metric breaks its panel or alert here.
  const std::regex used(R"(\bmsched_[a-z_]+)");
  for (const char* kit : {DOCS_DIR "/../packaging/grafana/msched-dashboard.json",
                          DOCS_DIR "/../packaging/prometheus/msched-alerts.yml"}) {
    const std::string text = ts::Slurp(kit);
    ASSERT_FALSE(text.empty()) << kit;
    int names = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), used); it != std::sregex_iterator(); ++it, ++names) {
      const std::string name = std::regex_replace(it->str(), std::regex("_(bucket|sum|count)$"), "");
      EXPECT_TRUE(served.count(name)) << kit << " uses " << name << ", which mschedd does not serve";
    }
    EXPECT_GT(names, 5) << kit;
  }
}

TEST_F(MschedMetricsTest, NamesArePublishedOnlyWithMetricsNames) {
  const int port = StartDaemon({"--metrics-names"});
  ASSERT_GT(port, 0);
  StartJob("named-job", 8 * kMiB, 1000000);
  const std::map<std::string, double> s = ScrapeUntil(
      port, [](std::map<std::string, double>& m) { return PerJob(m, "msched_job_resident_bytes").size() == 1; });
  const std::map<std::string, double> resident = PerJob(s, "msched_job_resident_bytes");
  ASSERT_EQ(resident.size(), 1u);
  EXPECT_EQ(resident.begin()->first, "{job_id=\"1\",uid=\"" + std::to_string(getuid()) + "\",name=\"named-job\"}");
}

TEST_F(MschedMetricsTest, ABadAddressIsAUsageErrorAndAPortInUseFailsToStart) {
  for (const char* bad : {"9400", "localhost:9400", "127.0.0.1:65536", "127.0.0.1:", "[::1]:9400", "1.2.3:80"}) {
    const ts::ProgramRun r = ts::RunProgram({MSCHEDD, "--socket", Socket(), "--metrics", bad}, {});
    EXPECT_EQ(r.status, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(std::string("mschedd: --metrics '") + bad +
                         "' is not valid: expected IPv4-ADDRESS:PORT, such as 127.0.0.1:9400"),
              std::string::npos)
        << r.err;
  }
  const ts::ProgramRun names = ts::RunProgram({MSCHEDD, "--socket", Socket(), "--metrics-names"}, {});
  EXPECT_EQ(names.status, 2);
  EXPECT_NE(names.err.find("--metrics-names needs --metrics"), std::string::npos) << names.err;

  // A port someone else listens at.
  const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const ts::ProgramRun r = ts::RunProgram({MSCHEDD, "--socket", Socket(), "--metrics", address}, {});
  ::close(taken);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("mschedd: cannot serve metrics at " + address + ": cannot bind to " + address),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Address already in use"), std::string::npos) << r.err;
  struct stat st {};
  EXPECT_NE(::stat(Socket().c_str(), &st), 0) << "the coordinator's socket is removed again";
}

// No number of local connections may blind /metrics (issue 33, item 2).
// civetweb, with a thread per connection, had every scrape wait a second
// for each 32 connections left idle or half-sent, and with 300 it failed to
// accept most scrapes at all. Here 600 such connections, half idle and half
// half-sent, more than the server's cap, are kept open (each reopened as
// soon as mschedd drops it) while 5 scrapes are timed: each is answered
// within 2 s. The connections dropped are counted in one log line, not a
// line each.
TEST_F(MschedMetricsTest, HalfSentAndIdleConnectionsDoNotHoldUpAScrape) {
  const int port = StartDaemon();
  ASSERT_GT(port, 0);
  const size_t limit = ts::RaiseOwnDescriptorLimit();
  ASSERT_GT(limit, 700u) << "the test holds 600 connections";
  std::atomic<bool> scraped{false};
  std::atomic<size_t> reopened{0};
  std::thread stallers([&] {
    std::vector<int> fds(600, -1);
    while (!scraped.load()) {
      for (size_t i = 0; i < fds.size(); ++i) {
        char c;
        if (fds[i] >= 0 && ::recv(fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN) continue;
        if (fds[i] >= 0) {  // dropped
          ::close(fds[i]);
          ++reopened;
        }
        fds[i] = ConnectLoopback(port, std::chrono::milliseconds(100));
        const std::string half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        if (fds[i] >= 0 && i % 2 == 1) (void)!::write(fds[i], half.data(), half.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int fd : fds) ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the stallers connect first
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const HttpReply r = Http(port, "GET", "/metrics", std::chrono::milliseconds(3000));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.status, 200) << "scrape " << i << " got no answer in " << seconds << " s";
    EXPECT_LT(seconds, 2.0) << "scrape " << i;
  }
  scraped.store(true);
  stallers.join();
  EXPECT_GT(reopened.load(), 0u) << "the cap and the 1 s timeout dropped some";
  EXPECT_EQ(Http(port, "GET", "/metrics").status, 200) << "and it serves on";
  const std::string log = Log();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("connections dropped without their answer", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;
}

}  // namespace

// mschedd: the coordinator for one GPU. Started by hand, by a system unit,
// or by `msched run` when none is running (then with --idle-exit, so it goes
// away when its jobs are done).
//
//   mschedd [--socket PATH | --gpu N] [--gpu-memory SIZE] [--host-memory SIZE]
//           [--oversubscribe RATIO] [--slice DURATION|adaptive] [--swap-fraction F]
//           [--min-slice DURATION] [--max-slice DURATION] [--aging DURATION]
//           [--answer-timeout DURATION] [--idle-exit DURATION] [--log FILE]
//           [--idle-yield DURATION|off] [--serving-idle-yield DURATION]
//           [--hello-timeout DURATION] [--max-jobs-per-user N] [--max-guest-priority N]
//           [--trace FILE] [--trace-max SIZE] [--metrics ADDR:PORT] [--metrics-names]
//
// --gpu N: serve the machine's GPU N at its socket as jobs find it
// (gpu<N>.sock in MSCHED_SOCKET_DIR or the default directory: msched/config.h,
// CoordinatorSocket); without --gpu or --socket, MSCHED_SOCKET, else GPU 0's.
// --idle-yield (default 50ms): a job that holds its turn while others wait
// and launches nothing for that long gives the turn up (docs/coordinator.md);
// a service after --serving-idle-yield (default 2ms).
// --metrics serves GET /metrics in the Prometheus text format at a numeric
// IPv4 address and port (off by default; docs/operate.md, "Metrics"): jobs
// by id and uid, and by name too only with --metrics-names, since anyone
// who reaches the port reads it.
// Log lines go to stderr (or --log), never stdout. SIGINT and SIGTERM stop
// it cleanly (the socket and shared memory are removed); SIGHUP reopens the
// --log file, for log rotation. Exit status: 0 on
// a clean stop, 1 when it cannot start, 2 on a usage error.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>

#include "base/machine_gpu.h"
#include "coord/coord_server.h"
#include "device_view.h"
#include "metrics_http.h"
#include "msched/config.h"
#include "tool_paths.h"
#include "version.h"

namespace msched {
namespace {

constexpr char kUsage[] =
    "usage: mschedd [--socket PATH | --gpu N] [--gpu-memory SIZE] [--host-memory SIZE] [--oversubscribe RATIO]\n"
    "               [--slice DURATION|adaptive] [--swap-fraction F] [--min-slice DURATION] [--max-slice DURATION]\n"
    "               [--aging DURATION] [--answer-timeout DURATION] [--idle-exit DURATION] [--log FILE]\n"
    "               [--idle-yield DURATION|off] [--serving-idle-yield DURATION] [--hello-timeout DURATION]\n"
    "               [--max-jobs-per-user N] [--max-guest-priority N] [--trace FILE] [--trace-max SIZE]\n"
    "               [--metrics ADDR:PORT] [--metrics-names]\n"
    "       mschedd --help | --version\n"
    "--gpu N: the coordinator of the machine's GPU N (as nvidia-smi numbers it), at the socket jobs on that\n"
    "GPU look for (gpu<N>.sock; MSCHED_SOCKET_DIR, see msched help); the default is GPU 0.\n"
    "--gpu-memory: the GPU memory it schedules; by default what the GPU says (NVML; on the simulated GPU,\n"
    "the shared device MSIM_DEVICE names), never what a job says. Jobs' times are checked against the GPU's\n"
    "clock (the simulated GPU's, else CLOCK_MONOTONIC).\n"
    "--idle-yield: a job that holds its turn on the GPU while others wait for theirs, and has launched\n"
    "nothing (and synchronised what it launched) for this long, gives its turn up; it rejoins the\n"
    "rotation at its next launch. Default 50ms, at least 1ms; 0 or off never takes a turn away for idleness.\n"
    "--serving-idle-yield: the same for a job declared a service (msched run --class service), and for\n"
    "a job that has given its turn up for want of work more than once, back from a pause at least\n"
    "--idle-yield long: a service's pauses are the gaps between requests, and each millisecond of the\n"
    "yield is one every waiting request loses. Default 2ms, at least 1ms (at most --idle-yield).\n"
    "Guests (users other than root and the coordinator's own) may hold at most --max-jobs-per-user jobs\n"
    "(default 64) and priorities up to --max-guest-priority (default 0).\n"
    "--trace writes the timeline (Chrome trace format: open it at ui.perfetto.dev or chrome://tracing), at\n"
    "most --trace-max bytes (default 256MiB); see tracing.md in the documentation.\n"
    "--metrics serves GET /metrics (Prometheus text format) at a numeric IPv4 address and port, such as\n"
    "127.0.0.1:9400 (off by default). Anyone who reaches it may read it, so jobs appear by id and uid only;\n"
    "--metrics-names adds their names. See operate.md in the documentation.\n"
    "The documentation is in share/doc/msched/ where msched is installed (docs/ in its source tree).\n";

CoordServer* g_server = nullptr;

void OnSignal(int) {
  if (g_server != nullptr) g_server->Shutdown();  // a write(2) to an eventfd: async-signal-safe
}

// SIGHUP: the next log line goes to a --log file opened anew (the old one
// was rotated away). Only the flag is set here: async-signal-safe.
std::atomic<bool> g_reopen_log{false};
void OnHangup(int) { g_reopen_log.store(true); }

// 90% of the host's RAM: where evicted data must fit.
uint64_t DefaultHostLimit() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024 / 10 * 9;
    in.ignore(64, '\n');
  }
  return UINT64_MAX;
}

bool ParseRatio(const std::string& text, double* out, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

constexpr uint64_t kShortestIdleYieldNs = 1'000'000;

// Every connection holds a descriptor: take the most the hard limit allows,
// so that a shared coordinator is not the first to run out.
void RaiseDescriptorLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &r);
  }
}

int Main(int argc, char** argv) {
  ServerOptions o;
  std::optional<int> gpu;  // --gpu, when given instead of --socket
  o.policy.host_bytes = DefaultHostLimit();
  std::string log_path;
  std::string metrics_address;  // empty: no metrics
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") return PrintVersion("mschedd");
    if (a == "--metrics-names") {  // the one option without a value
      o.metrics_job_names = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "mschedd: " << a << " needs a value\n" << kUsage;
      return 2;
    }
    const std::string v = argv[++i];
    auto bad = [&](const char* accepted) {
      std::cerr << "mschedd: " << a << " '" << v << "' is not valid: expected " << accepted << "\n";
      return 2;
    };
    auto duration = [&](uint64_t* out) {
      Result<uint64_t> d = ParseDurationNs(v);
      if (!d.ok()) return false;
      *out = *d;
      return true;
    };
    auto bytes = [&](uint64_t* out) {
      Result<uint64_t> b = ParseBytes(v);
      if (!b.ok() || *b == 0) return false;
      *out = *b;
      return true;
    };
    uint64_t ns = 0;
    if (a == "--socket") {
      o.socket_path = v;
    } else if (a == "--gpu") {
      Result<int64_t> n = ParseInteger(v, 0, kMaxGpuIndex);
      if (!n.ok()) return bad(("a GPU index from 0 to " + std::to_string(kMaxGpuIndex)).c_str());
      gpu = static_cast<int>(*n);
    } else if (a == "--gpu-memory") {
      if (!bytes(&o.policy.hbm_bytes)) return bad("a size such as 16GiB");
    } else if (a == "--host-memory") {
      if (!bytes(&o.policy.host_bytes)) return bad("a size such as 64GiB");
    } else if (a == "--oversubscribe") {
      if (!ParseRatio(v, &o.policy.oversubscribe, 1.0, 64.0)) return bad("a ratio from 1 to 64");
    } else if (a == "--slice") {
      if (v != "adaptive" && !duration(&o.policy.fixed_slice_ns)) return bad("a duration such as 100ms, or adaptive");
    } else if (a == "--swap-fraction") {
      if (!ParseRatio(v, &o.policy.swap_fraction, 0.001, 1.0)) return bad("a fraction from 0.001 to 1");
    } else if (a == "--min-slice") {
      if (!duration(&o.policy.min_slice_ns)) return bad("a duration such as 20ms");
    } else if (a == "--max-slice") {
      if (!duration(&o.policy.max_slice_ns)) return bad("a duration such as 10s");
    } else if (a == "--aging") {
      if (!duration(&o.policy.aging_ns) || o.policy.aging_ns == 0) return bad("a duration such as 1min");
    } else if (a == "--answer-timeout") {
      if (!duration(&ns) || ns < 1000000) return bad("a duration of at least 1ms");
      o.answer_timeout_ms = ns / 1000000;
    } else if (a == "--idle-yield") {
      // At least a millisecond: a job's idle timer looks again every idle
      // yield, and shorter ones only spin its host (a job with host phases
      // once never finished under 1ns).
      if (v == "off" || v == "0") {
        o.policy.idle_yield_ns = 0;
      } else if (!duration(&o.policy.idle_yield_ns) || o.policy.idle_yield_ns < kShortestIdleYieldNs) {
        return bad("a duration of at least 1ms such as 50ms, or 0 or off");
      }
    } else if (a == "--serving-idle-yield") {
      if (!duration(&o.policy.serving_idle_yield_ns) || o.policy.serving_idle_yield_ns < kShortestIdleYieldNs) {
        return bad("a duration of at least 1ms such as 2ms");
      }
    } else if (a == "--idle-exit") {
      if (!duration(&ns)) return bad("a duration such as 60s");
      o.idle_exit_ms = ns / 1000000;
    } else if (a == "--log") {
      log_path = v;
    } else if (a == "--trace") {
      o.trace_path = v;
    } else if (a == "--trace-max") {
      if (!bytes(&o.trace_max_bytes) || o.trace_max_bytes < 4096) return bad("a size of at least 4KiB, such as 64MiB");
    } else if (a == "--metrics") {
      Result<std::string> address = MetricsHttp::ParseAddress(v);
      if (!address.ok()) return bad("IPv4-ADDRESS:PORT, such as 127.0.0.1:9400");
      metrics_address = *address;
    } else if (a == "--hello-timeout") {
      if (!duration(&ns) || ns < 1000000) return bad("a duration of at least 1ms");
      o.hello_timeout_ms = ns / 1000000;
    } else if (a == "--max-jobs-per-user") {
      Result<int64_t> n = ParseInteger(v, 1, kShmSlots);
      if (!n.ok()) return bad("an integer from 1 to 256");
      o.max_jobs_per_user = static_cast<uint32_t>(*n);
    } else if (a == "--max-guest-priority") {
      Result<int64_t> n = ParseInteger(v, kMinPriority, kMaxPriority);
      if (!n.ok()) return bad("an integer from -100 to 100");
      o.max_guest_priority = static_cast<int>(*n);
    } else {
      std::cerr << "mschedd: unknown option " << a << "\n" << kUsage;
      return 2;
    }
  }
  if (gpu.has_value() && !o.socket_path.empty()) {
    std::cerr << "mschedd: --gpu and --socket both say where to listen; give one\n";
    return 2;
  }
  if (o.socket_path.empty()) o.socket_path = gpu ? GpuSocketFromEnvironment(*gpu) : SocketFromEnvironment();
  if (o.policy.min_slice_ns > o.policy.max_slice_ns) {
    std::cerr << "mschedd: --min-slice is longer than --max-slice\n";
    return 2;
  }
  if (o.metrics_job_names && metrics_address.empty()) {
    std::cerr << "mschedd: --metrics-names needs --metrics\n";
    return 2;
  }
  if (!metrics_address.empty()) o.metrics = std::make_shared<MetricsBoard>();
  static std::ofstream log_file;
  if (!log_path.empty()) {
    log_file.open(log_path, std::ios::app);
    if (!log_file) {
      std::cerr << "mschedd: cannot write the log " << log_path << "\n";
      return 1;
    }
  }
  // A log file that stops taking lines (a full disk) must not lose them
  // silently: say so once on stderr and log there from then on.
  std::mutex log_mu;
  std::ostream* log = log_path.empty() ? &std::cerr : &log_file;
  o.log = [&log_mu, &log, &log_path](const std::string& line) {
    const std::time_t t = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    std::lock_guard<std::mutex> lock(log_mu);
    if (g_reopen_log.exchange(false) && log == &log_file) {
      log_file.close();
      log_file.clear();
      log_file.open(log_path, std::ios::app);
    }
    *log << stamp << " mschedd: " << line << std::endl;
    if (log != &std::cerr && !*log) {
      std::cerr << "mschedd: cannot write the log " << log_path << " (" << std::strerror(errno)
                << "); logging to stderr from now on\n";
      log = &std::cerr;
      std::cerr << stamp << " mschedd: " << line << std::endl;  // the line the file lost
    }
  };
  // The GPU's size and clock come from the device, never from a job.
  const DeviceView device = ObserveDevice(gpu.value_or(0));
  o.device_clock = device.clock;
  if (o.policy.hbm_bytes != 0) {
    o.log("GPU memory " + FormatBytes(o.policy.hbm_bytes) + " (--gpu-memory); clock " +
          (device.source.empty() ? std::string("CLOCK_MONOTONIC") : "of " + device.source));
  } else if (device.total_bytes != 0) {
    o.policy.hbm_bytes = device.total_bytes;
    o.log("GPU memory " + FormatBytes(device.total_bytes) + " and clock from " + device.source);
  } else {
    o.log(
        "the GPU's memory is unknown here (no NVML, no simulated GPU in MSIM_DEVICE, no --gpu-memory): the first "
        "job of root or of this coordinator's user tells it, and until then jobs run one at a time");
  }
  RaiseDescriptorLimit();
  Result<std::unique_ptr<CoordServer>> server = CoordServer::Start(o);
  if (!server.ok()) {
    std::cerr << "mschedd: " << server.status().message() << "\n";
    return 1;
  }
  // After the coordinator owns its socket (a second one started by mistake
  // fails there first), and before serving: a port in use stops it cleanly.
  std::unique_ptr<MetricsHttp> metrics_http;
  if (o.metrics) {
    Result<std::unique_ptr<MetricsHttp>> http = MetricsHttp::Start(metrics_address, o.metrics, o.log);
    if (!http.ok()) {
      std::cerr << "mschedd: " << http.status().message() << "\n";
      return 1;
    }
    metrics_http = std::move(*http);
    o.log("serving metrics at http://" + metrics_http->address() + "/metrics");
  }
  g_server = server->get();
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction hup {};
  hup.sa_handler = OnHangup;
  sigaction(SIGHUP, &hup, nullptr);
  signal(SIGPIPE, SIG_IGN);
  (*server)->Run();
  g_server = nullptr;
  o.log("stopped");
  return 0;
}

}  // namespace
}  // namespace msched

int main(int argc, char** argv) { return msched::Main(argc, argv); }

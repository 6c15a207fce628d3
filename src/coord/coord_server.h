// mschedd's engine: one epoll loop over the listening socket, the jobs'
// connections and the CLI's requests, driving the Scheduler and publishing
// each job's gate, slice end and budget in shared memory.
//   - A job's identity is its connection: uid and pid from SO_PEERCRED, a
//     job id the coordinator assigns. A job dies when its socket closes;
//     its memory and budget return at once.
//   - A message that does not decode, or that a job may not send, is
//     logged and its connection dropped; nothing in it is trusted.
//   - pause, resume and priority act only on the requester's own jobs
//     (root may act on any).
//   - What a job says of the GPU and the clock is a claim, not a fact: the
//     GPU's size comes from policy.hbm_bytes, or else from the first job of
//     root or the coordinator's own user, never a guest's; a job's time is
//     checked against device_clock; the link speed a job measures counts
//     only in the answer to a stop, within what a link can be (scheduler.h).
//   - Users other than root and the coordinator's own user ("guests" of a
//     shared coordinator) are bounded: at most `max_jobs_per_user` jobs and
//     a few more connections each, priorities up to `max_guest_priority`,
//     and `msched status` shows them their own jobs in full and others'
//     without name or pid.
//   - No peer can make it hold much: each frame type has a small size cap,
//     a connection must say hello (or ask) within `hello_timeout_ms` and
//     finish any frame it starts within the same time, and at the
//     descriptor limit it stops accepting until a connection closes
//     instead of spinning.
//   - With `trace_path`, it writes its timeline there (coord_trace.h),
//     flushed every tick and never larger than `trace_max_bytes`.
//   - With `metrics`, it publishes a snapshot of its metrics there
//     (coord_metrics.h) after a change, at most once a tick; whoever serves
//     them (mschedd's HTTP server) reads only that board, never the
//     scheduler.
//   - A watchdog passes over a job that leaves a slice end or a stop
//     unanswered for `answer_timeout_ms` of real time, so a hung job never
//     stalls the others.
//   - Each job learns the idle yield (policy.idle_yield_ns) with its welcome,
//     and the one for each turn with its Go (a service's is shorter): a job
//     that holds its turn that long without work while others wait gives it
//     up.
// Run() is single-threaded; Shutdown() may be called from any thread.
// The class is defined across files by concern: the event loop
// (coord_server.cc), registration (coord_server_register.cc), control
// requests (coord_server_control.cc), and the gates and orders
// (coord_server_orders.cc).
// Used by mschedd and by tests and benchmarks that run a coordinator
// in-process.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "coord/coord_metrics.h"
#include "coord/coord_shm.h"
#include "coord/coord_trace.h"
#include "coord/job_wall_clock.h"
#include "coord/metrics.h"
#include "coord/scheduler.h"
#include "coord/unix_socket.h"
#include "msched/status.h"

namespace msched {

// How far a job's time may run ahead of the coordinator's own reading of
// the device clock: the job read its clock before the coordinator read its
// own, but a simulated job may not yet have published its latest time.
inline constexpr uint64_t kClockSlackNs = 1'000'000'000;

struct ServerOptions {
  std::string socket_path;
  SchedulerOptions policy;
  uint64_t answer_timeout_ms = 10000;
  uint64_t idle_exit_ms = 0;  // exit after this long without jobs (0: never)
  uint64_t hello_timeout_ms = 5000;
  uint32_t max_jobs_per_user = 64;  // guests only
  int max_guest_priority = 0;
  std::string trace_path;  // empty: no timeline
  uint64_t trace_max_bytes = uint64_t{256} << 20;
  std::shared_ptr<MetricsBoard> metrics;  // null: no metrics
  bool metrics_job_names = false;         // publish jobs' names in the metrics
  std::function<void(const std::string&)> log = [](const std::string&) {};
  // The device clock as the coordinator reads it itself (mschedd: its
  // DeviceView). A job's time is a claim checked against it: one more than
  // kClockSlackNs ahead is taken as this clock's reading instead, so that no
  // job can carry the coordinator's clock, and every later job's start,
  // into the future. Null: jobs' clocks are taken as they are (tests and
  // the benchmark, whose jobs are their own).
  std::function<uint64_t()> device_clock;
};

class CoordServer {
 public:
  // Binds the socket and creates the shared memory; fails clearly when a
  // coordinator already runs there or the path is unsafe.
  static Result<std::unique_ptr<CoordServer>> Start(ServerOptions options);
  ~CoordServer();

  // Serves until Shutdown() or the idle timeout.
  void Run();
  void Shutdown();

  uint64_t switches() const { return scheduler_.switches(); }
  const std::string& socket_path() const { return options_.socket_path; }

 private:
  // One connection: a job (once it said hello) or a CLI request.
  struct Conn {
    int fd = -1;
    PeerCred peer;
    uint64_t job = 0;  // 0: not (yet) a job; a control connection
    FrameReader reader;
    uint64_t opened_ms = 0;
    uint64_t partial_since_ms = 0;      // when the frame now pending began (0: none)
    std::string writing;                // the unwritten rest of the order being sent
    std::deque<proto::Message> queued;  // orders after it, not yet begun
    bool watching_writable = false;     // EPOLLOUT registered while anything waits
    bool clock_doubted = false;         // a time of its was past the device clock (logged once)
  };
  CoordServer(ServerOptions options, int listen_fd, int wake_fd, int epoll_fd, CoordShm shm,
              std::unique_ptr<CoordTrace> trace);
  void Accept();
  void OnReadable(int fd);
  // Writes what the socket takes of `c`'s waiting orders; false when the
  // connection is broken.
  bool Flush(Conn& c);
  // Sends an order to a job, or queues it behind those its socket has not
  // taken yet (a job that does not read: stopped, suspended, under a
  // debugger); false when the connection is broken or too far behind.
  bool Deliver(Conn& c, proto::Message m, std::atomic<uint64_t>* sent);
  void Close(int fd, const std::string& why);
  void Handle(Conn& c, proto::Message m);
  void HandleHello(Conn& c, const proto::Hello& hello);
  void HandleControl(Conn& c, const proto::Control& m);
  // Job `id` reported its running totals: the scheduler keeps what `status`
  // shows of them, the metrics their sums.
  void Counted(uint64_t id, const proto::JobCounters& counters);
  // Publishes every job's gate for the scheduler's new state, then sends
  // `commands`: whatever a job is told, its gate already agrees.
  void Apply(const Commands& commands);
  void SyncSlots();
  // A line in the log for the switches since the last one, at most a second apart.
  void LogSwitches();
  void Watchdog();
  void ExpireConnections();
  void PauseAccepting(bool paused);
  // Publishes the metrics if they changed and a tick has passed since the last time.
  void PublishMetrics();
  // `claimed`, a time in a message from `c`'s job, as the coordinator takes
  // it: never ahead of its own clock by more than the slack (said once per
  // connection).
  uint64_t CheckedTime(Conn& c, uint64_t claimed);
  // Root and the coordinator's own user; everyone else is a guest.
  bool Privileged(uint32_t uid) const { return uid == 0 || uid == own_uid_; }
  size_t ConnectionsOf(uint32_t uid, bool jobs_only) const;
  void Log(const std::string& line) const { options_.log(line); }
  // How the log names a peer.
  static std::string Who(uint32_t uid, int32_t pid);
  // Wall time (a monotonic clock), in nanoseconds: the waits status shows.
  static uint64_t WallNow();

  ServerOptions options_;
  int listen_fd_;
  int wake_fd_;
  int epoll_fd_;
  CoordShm shm_;
  Scheduler scheduler_;
  std::unique_ptr<CoordTrace> trace_;      // null: no timeline
  std::unique_ptr<CoordMetrics> metrics_;  // null: no metrics
  JobWallClock wall_;                      // the jobs' waits in wall time, for status
  uint64_t switches_logged_ = 0;           // switches the log has told of (LogSwitches)
  uint64_t switch_logged_ms_ = 0;          // when it last did, in wall milliseconds
  uint64_t metrics_published_ms_ = 0;
  std::map<int, std::unique_ptr<Conn>> conns_;  // by fd
  std::map<uint64_t, int> fd_of_job_;
  std::map<uint64_t, uint32_t> slot_of_job_;
  std::map<uint64_t, uint64_t> awaiting_since_ms_;  // real time each awaited answer was first awaited
  uint64_t next_job_ = 1;
  uint64_t idle_since_ms_;
  uint32_t own_uid_;
  bool accept_paused_ = false;  // at the descriptor limit
};

}  // namespace msched

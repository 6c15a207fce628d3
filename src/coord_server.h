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
//   - A watchdog passes over a job that leaves a slice end or a stop
//     unanswered for `answer_timeout_ms` of real time, so a hung job never
//     stalls the others.
// Run() is single-threaded; Shutdown() may be called from any thread.
// Used by mschedd and by tests and benchmarks that run a coordinator
// in-process.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "coord_shm.h"
#include "msched/status.h"
#include "scheduler.h"
#include "unix_socket.h"

namespace msched {

struct ServerOptions {
  std::string socket_path;
  SchedulerOptions policy;
  uint64_t answer_timeout_ms = 10000;
  uint64_t idle_exit_ms = 0;  // exit after this long without jobs (0: never)
  std::function<void(const std::string&)> log = [](const std::string&) {};
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
  struct Conn;
  CoordServer(ServerOptions options, int listen_fd, int wake_fd, int epoll_fd, CoordShm shm);
  void Accept();
  void OnReadable(int fd);
  void Close(int fd, const std::string& why);
  void Handle(Conn& c, proto::Message m);
  void HandleControl(Conn& c, const proto::Control& m);
  void Apply(const Commands& commands);
  void SyncSlots();
  void Watchdog();
  std::string StatusJson() const;
  void Log(const std::string& line) const { options_.log(line); }

  ServerOptions options_;
  int listen_fd_;
  int wake_fd_;
  int epoll_fd_;
  CoordShm shm_;
  Scheduler scheduler_;
  std::map<int, std::unique_ptr<Conn>> conns_;  // by fd
  std::map<uint64_t, int> fd_of_job_;
  std::map<uint64_t, uint32_t> slot_of_job_;
  std::map<uint64_t, uint64_t> awaiting_since_ms_;  // real time each awaited answer was first awaited
  uint64_t next_job_ = 1;
  uint64_t idle_since_ms_;
};

}  // namespace msched

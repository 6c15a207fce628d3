// Starting and waiting for child processes: the one place msched programs
// (msched run/bench, msched-profile) and the multi-process tests spawn
// commands, with extra environment and optional output capture.
// Thread-compatible: a Subprocess is used by the thread that started it.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "msched/status.h"

namespace msched {

struct SpawnOptions {
  std::map<std::string, std::string> env;  // set (or replace) in the child's environment
  std::vector<std::string> unset_env;      // removed from the child's environment
  std::string stdout_path;                 // empty: inherit
  std::string stderr_path;                 // empty: inherit
};

class Subprocess {
 public:
  // Starts argv[0] (searched in PATH) with argv. Fails when it cannot start.
  static Result<Subprocess> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

  pid_t pid() const { return pid_; }
  // Waits for exit. Returns the exit status, or 128 + signal when killed.
  int Wait();
  // Non-blocking: true (and *status set) when the child has exited.
  bool Poll(int* status);
  void Kill(int signal);

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// Every live process below `ancestor` in the process tree (children,
// theirs, and so on; zombies left out), read from /proc. A process that
// changes parents meanwhile may be missed: callers that must find all of
// them make themselves a subreaper (PR_SET_CHILD_SUBREAPER) first and ask
// again until none is left.
std::vector<pid_t> DescendantsOf(pid_t ancestor);

// The directory holding the running executable (from /proc/self/exe).
std::string ExecutableDir();

}  // namespace msched

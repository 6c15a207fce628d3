#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

extern char** environ;

namespace msched {
namespace {

int DecodeStatus(int raw) {
  if (WIFEXITED(raw)) return WEXITSTATUS(raw);
  if (WIFSIGNALED(raw)) return 128 + WTERMSIG(raw);
  return -1;
}

}  // namespace

Result<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("empty command");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool drop = options.env.count(name) != 0;
    for (const std::string& u : options.unset_env) drop = drop || u == name;
    if (!drop) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  if (!options.stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Status::IoError("cannot start " + argv[0] + ": " + std::strerror(rc));
  return Subprocess(pid);
}

int Subprocess::Wait() {
  if (reaped_) return status_;
  int raw = 0;
  while (waitpid(pid_, &raw, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  reaped_ = true;
  status_ = DecodeStatus(raw);
  return status_;
}

bool Subprocess::Poll(int* status) {
  if (!reaped_) {
    int raw = 0;
    const pid_t r = waitpid(pid_, &raw, WNOHANG);
    if (r != pid_) return false;
    reaped_ = true;
    status_ = DecodeStatus(raw);
  }
  *status = status_;
  return true;
}

void Subprocess::Kill(int signal) {
  if (!reaped_) kill(pid_, signal);
}

std::vector<pid_t> DescendantsOf(pid_t ancestor) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    const size_t close = line.rfind(')');
    if (close == std::string::npos || close + 4 >= line.size()) continue;
    const char state = line[close + 2];
    if (state == 'Z' || state == 'X') continue;
    const pid_t ppid = static_cast<pid_t>(std::strtol(line.c_str() + close + 4, nullptr, 10));
    children.emplace(ppid, static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {ancestor};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return out;
}

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string path(buf);
  return path.substr(0, path.rfind('/'));
}

}  // namespace msched

#include "observe/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "job/hook_config.h"
#include "msched/no_destructor.h"

namespace msched::hook {
namespace {

spdlog::level::level_enum ToSpdlog(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::err;
}

std::shared_ptr<spdlog::logger> Make() {
  const Config& c = HookConfig();
  spdlog::sink_ptr sink;
  std::string unusable;  // why MSCHED_LOG could not be used
  if (!c.log_path.empty()) {
    // Opened here first: spdlog's file sink would create missing parent
    // directories, and its exception says less than errno does.
    // Non-blocking and regular files only: a FIFO with no reader would
    // block the job at its first log line, forever.
    const int fd = ::open(c.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st {};
    if (fd < 0) {
      unusable = errno == ENXIO ? "not a regular file" : std::strerror(errno);
    } else if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      unusable = "not a regular file";
    } else {
      ::close(fd);
      try {
        sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(c.log_path, /*truncate=*/false);
      } catch (const std::exception& e) {
        unusable = e.what();
      }
    }
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("msched", sink);
  logger->set_pattern("[msched %P] %l: %v");
  logger->set_level(ToSpdlog(c.log_level));
  logger->flush_on(spdlog::level::trace);
  // Said once, on the fallback sink: otherwise the log is just missing.
  if (!unusable.empty()) logger->error("cannot log to '{}' (MSCHED_LOG): {}; logging to stderr", c.log_path, unusable);
  return logger;
}

}  // namespace

spdlog::logger& Logger() {
  static NoDestructor<std::shared_ptr<spdlog::logger>> logger(Make());
  return **logger;
}

void LogOnce(const std::string& key, spdlog::level::level_enum level, const std::string& message) {
  struct Seen {
    Mutex mu;
    std::set<std::string> keys MSCHED_GUARDED_BY(mu);
  };
  static NoDestructor<Seen> seen;
  {
    MutexLock lock(&seen->mu);
    if (!seen->keys.insert(key).second) return;
  }
  Logger().log(level, "{}", message);
}

}  // namespace msched::hook

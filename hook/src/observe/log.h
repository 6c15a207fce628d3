// Logging from inside the host process: spdlog (a private, hidden copy) to
// stderr or MSCHED_LOG, at MSCHED_LOG_LEVEL (errors only by default), never
// to stdout. LogOnce reports a recurring problem a single time.
// Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace msched::hook {

spdlog::logger& Logger();

template <typename... Args>
void LogError(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().error(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogDebug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().debug(fmt, std::forward<Args>(args)...);
}

// Logs `message` at `level` the first time `key` is seen.
void LogOnce(const std::string& key, spdlog::level::level_enum level, const std::string& message);

}  // namespace msched::hook

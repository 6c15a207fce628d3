#include "tool_paths.h"

#include <cstdlib>
#include <cstring>

#include "msched/config.h"

namespace msched {

namespace {

// A bad value of another variable does not matter here; the job reports it.
Config ConfigFromEnvironment() {
  return ParseConfig([](const char* name) { return std::getenv(name); }).config;
}

}  // namespace

std::string SocketFromEnvironment(int gpu) { return CoordinatorSocket(ConfigFromEnvironment(), gpu); }

std::string GpuSocketFromEnvironment(int gpu) {
  Config config = ConfigFromEnvironment();
  config.socket_path.clear();
  return CoordinatorSocket(config, gpu);
}

std::string DescribeExit(int status) {
  if (status > 128) {
    return "was killed by signal " + std::to_string(status - 128) + " (" + strsignal(status - 128) + ")";
  }
  return "exited with status " + std::to_string(status);
}

}  // namespace msched

#include "base/libmsched_path.h"

#include <unistd.h>

#include <cstdlib>

#include "base/subprocess.h"

namespace msched {

Result<std::string> FindLibmsched() {
  if (const char* env = std::getenv("MSCHED_LIB"); env != nullptr && *env != '\0') {
    if (access(env, R_OK) != 0) return Status::NotFound(std::string("MSCHED_LIB='") + env + "' is not a readable file");
    return std::string(env);
  }
  const std::string dir = ExecutableDir();
  const std::string installed = std::string(MSCHED_LIBDIR_FROM_BINDIR) + "/libmsched.so";
  for (const std::string& candidate : {dir + "/libmsched.so", dir + "/../hook/libmsched.so", dir + "/" + installed}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return Status::NotFound("libmsched.so was not found beside " + dir + " (in ., ../hook or " + installed +
                          "); set MSCHED_LIB");
}

std::string PreloadWith(const std::string& lib) {
  const char* existing = std::getenv("LD_PRELOAD");
  return existing != nullptr && *existing != '\0' ? lib + ":" + existing : lib;
}

}  // namespace msched

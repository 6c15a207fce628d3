// What `--version` prints, the same for every program: its name and the
// project's version (CMake's PROJECT_VERSION, defined for each program by
// tools/CMakeLists.txt), on stdout.
#pragma once

#include <iostream>

#ifndef MSCHED_VERSION
#error "the build defines MSCHED_VERSION (tools/CMakeLists.txt)"
#endif

namespace msched {

inline int PrintVersion(const char* program) {
  std::cout << program << " (msched) " << MSCHED_VERSION << "\n";
  return 0;
}

}  // namespace msched

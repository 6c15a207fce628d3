// Where a program finds libmsched.so, in a build tree or an install
// (MSCHED_LIB overrides), and how it tells a child process to preload it.
// Used by the programs (tools/) and the benchmark suite (bench/), which
// start jobs under libmsched; reads the environment, otherwise stateless:
// thread-compatible.
#pragma once

#include <string>

#include "msched/status.h"

namespace msched {

// MSCHED_LIB if set (it must exist), else libmsched.so beside this program,
// in ../hook (build tree) or, in an install, in <libdir>/msched reached from
// <bindir> (../lib/msched with the default layout; any prefix).
Result<std::string> FindLibmsched();

// The LD_PRELOAD value that loads `lib` first and keeps what the caller's
// environment already preloads.
std::string PreloadWith(const std::string& lib);

}  // namespace msched

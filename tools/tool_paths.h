// Where msched's programs find their companions, in a build tree or an
// install: libmsched.so (MSCHED_LIB overrides), and how a child process is
// told to preload it. Thread-compatible. Used by tools/ only.
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

// The socket of the coordinator for the machine's GPU `gpu`, as a job with
// this environment finds it (CoordinatorSocket: MSCHED_SOCKET,
// MSCHED_SOCKET_DIR, else the default).
std::string SocketFromEnvironment(int gpu = 0);
// The socket of GPU `gpu`'s own coordinator, MSCHED_SOCKET aside: what
// --gpu N names (gpu<N>.sock in MSCHED_SOCKET_DIR, else the default).
std::string GpuSocketFromEnvironment(int gpu);

// "exited with status 3", "was killed by signal 11 (Segmentation fault)",
// for a Subprocess::Wait status.
std::string DescribeExit(int status);

}  // namespace msched

// What msched's programs share about their surroundings: the coordinator
// socket a job would find, and how a child's exit is described. Finding
// libmsched.so is base/libmsched_path.h (the benchmark suite needs it too).
// Thread-compatible. Used by tools/ only.
#pragma once

#include <string>

namespace msched {

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

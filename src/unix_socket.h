// UNIX stream sockets for the coordinator protocol: a listening socket in a
// directory checked for safe ownership and permissions, connecting, the
// peer's kernel-attested credentials (SO_PEERCRED), and whole-frame sends
// and receives. Thread-compatible; each function works on the fd it is given.
// Used by mschedd, the hook's coordinator client and the msched CLI.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "msched/status.h"
#include "protocol.h"

namespace msched {

struct PeerCred {
  uint32_t uid = 0;
  int32_t pid = 0;
};

// Creates the socket's directory if needed (0700, or 0755 for root) and
// refuses one that another user owns or others may write; refuses to start
// when a live coordinator already answers there; removes a stale socket
// file. The socket is 0600, or 0666 when `any_user` (a root daemon serving
// every user; identity then comes from SO_PEERCRED).
Result<int> ListenUnix(const std::string& path, bool any_user);
// Connects (blocking). Unavailable when nothing listens.
Result<int> ConnectUnix(const std::string& path);
Result<PeerCred> PeerOf(int fd);

// Writes the whole frame; never raises SIGPIPE.
Status SendMessage(int fd, const proto::Message& m);
// Reads one whole frame, waiting at most `timeout_ms` (-1: forever) for it
// to begin. DeadlineExceeded-like Unavailable on timeout; IoError on EOF.
Result<proto::Message> ReceiveMessage(int fd, int timeout_ms);

// Assembles frames from a non-blocking socket's bytes.
class FrameReader {
 public:
  void Append(const char* data, size_t n) { buffer_.append(data, n); }
  // The next complete message; nullopt while incomplete; an error for a
  // malformed frame (the connection should then be dropped).
  Result<std::optional<proto::Message>> Next();

 private:
  std::string buffer_;
};

}  // namespace msched

// UNIX stream sockets for the coordinator protocol: a listening socket in a
// directory checked for safe ownership and permissions, connecting to a
// coordinator only when it is one this user can trust, the peer's
// kernel-attested credentials (SO_PEERCRED), and whole-frame sends and
// receives, optionally carrying a descriptor (SCM_RIGHTS).
// Thread-compatible; each function works on the fd it is given.
// Used by mschedd, the hook's coordinator client and the msched CLI.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "msched/protocol.h"
#include "msched/status.h"

namespace msched {

struct PeerCred {
  uint32_t uid = 0;
  int32_t pid = 0;
};

// Creates the socket's directory if needed (0700, or 0755 for root) and
// refuses one that another user owns or others may write; refuses to start
// when a live coordinator already answers there; removes a stale socket
// file, and refuses to replace anything else at `path`. The socket is 0600,
// or 0666 when `any_user` (a root daemon serving every user; identity then
// comes from SO_PEERCRED), from the moment it exists.
// REQUIRES: no other thread creates files meanwhile: the process's umask is
// 0 while the socket is bound.
Result<int> ListenUnix(const std::string& path, bool any_user);
// Connects (blocking). Unavailable when nothing listens.
Result<int> ConnectUnix(const std::string& path);
// Connects to a coordinator this process may trust with its job: the
// socket's directory belongs to this user or root and no one else may write
// it (unless sticky), and the listening process runs as this user or root.
// PermissionDenied, naming the culprit, otherwise: another user could have
// planted the socket to receive this user's jobs.
Result<int> ConnectToCoordinator(const std::string& path);
Result<PeerCred> PeerOf(int fd);

// Writes the whole frame; never raises SIGPIPE. With `pass_fd` >= 0, the
// descriptor travels with the frame's first byte.
Status SendMessage(int fd, const proto::Message& m, int pass_fd = -1);
// Reads one whole frame, waiting at most `timeout_ms` (-1: forever) for it
// to begin. Unavailable on timeout; IoError on EOF. A descriptor that came
// with the frame is stored in `*received_fd` (close-on-exec; the caller
// owns it) or closed when `received_fd` is null; -1 when none came.
Result<proto::Message> ReceiveMessage(int fd, int timeout_ms, int* received_fd = nullptr);

// Assembles frames from a non-blocking socket's bytes.
// Holds at most one frame plus what was appended after it (the coordinator
// parses after every read, and each type's size is capped: see
// proto::MaxPayloadOf).
class FrameReader {
 public:
  void Append(const char* data, size_t n) { buffer_.append(data, n); }
  // Bytes of a frame begun but not complete.
  size_t pending() const { return buffer_.size(); }
  // The next complete message; nullopt while incomplete; an error for a
  // malformed frame (the connection should then be dropped).
  Result<std::optional<proto::Message>> Next();

 private:
  std::string buffer_;
};

}  // namespace msched

#include "coord/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace msched {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Result<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Status::InvalidArgument("socket path '" + path + "' is empty or longer than " +
                                   std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// Whether `dir` (with `st` from stat or lstat) may hold this user's
// coordinator socket: a directory owned by this user or root that no one
// else may write, unless it is sticky (as /tmp: others may add names but
// not rename or remove this user's). Whoever owns it, root included: in a
// directory others may write, anyone can put their own socket in place of
// the coordinator's. Both ends apply it: the coordinator before it listens,
// a job before it connects.
Status TrustDirectory(const std::string& dir, const struct stat& st) {
  const uid_t me = geteuid();
  if (!S_ISDIR(st.st_mode)) return Status::PermissionDenied(dir + " is not a directory (a symlink?); refusing it");
  if (st.st_uid != me && st.st_uid != 0) {
    return Status::PermissionDenied(dir + " belongs to uid " + std::to_string(st.st_uid) + "; refusing it");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return Status::PermissionDenied(dir + " is writable by others and not sticky; refusing it");
  }
  return Status::Ok();
}

Status CheckDirectory(const std::string& dir) {
  const uid_t me = geteuid();
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::IoError(Errno("cannot inspect " + dir));
    if (mkdir(dir.c_str(), me == 0 ? 0755 : 0700) != 0 && errno != EEXIST) {
      return Status::IoError(Errno("cannot create " + dir));
    }
    if (lstat(dir.c_str(), &st) != 0) return Status::IoError(Errno("cannot inspect " + dir));
  }
  return TrustDirectory(dir, st);
}

}  // namespace

Result<int> ListenUnix(const std::string& path, bool any_user) {
  Result<sockaddr_un> addr = Address(path);
  if (!addr.ok()) return addr.status();
  const std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  if (!dir.empty()) MSCHED_RETURN_IF_ERROR(CheckDirectory(dir));
  if (Result<int> live = ConnectUnix(path); live.ok()) {
    const Result<PeerCred> peer = PeerOf(*live);
    ::close(*live);
    return Status::Unavailable("a coordinator already runs at " + path +
                               (peer.ok() ? " (pid " + std::to_string(peer->pid) + ")" : std::string()));
  }
  // Only a stale socket left by a coordinator that died may be replaced:
  // `--socket ./results.csv` must not delete the user's file.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::InvalidArgument(path + " exists and is not a socket; refusing to replace it");
    }
    ::unlink(path.c_str());
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(Errno("socket"));
  // bind creates the socket file with the socket's mode (0777 until
  // fchmod) less the umask, so it has its mode from the start: a chmod by
  // path after bind would follow whatever stands at `path` by then (a
  // symlink swapped in). The umask is the process's, hence set back at once.
  const mode_t mode = any_user ? 0666 : 0600;
  const mode_t umask_before = ::umask(0);
  const bool bound =
      ::fchmod(fd, mode) == 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0;
  ::umask(umask_before);
  if (!bound || ::listen(fd, 128) != 0) {
    const Status s = Status::IoError(Errno("cannot listen at " + path));
    ::close(fd);
    return s;
  }
  return fd;
}

Result<int> ConnectUnix(const std::string& path) {
  Result<sockaddr_un> addr = Address(path);
  if (!addr.ok()) return addr.status();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(Errno("socket"));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    const Status s = Status::Unavailable(Errno("no coordinator at " + path));
    ::close(fd);
    return s;
  }
  return fd;
}

Result<int> ConnectToCoordinator(const std::string& path) {
  const uid_t me = ::geteuid();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (Status s = TrustDirectory(dir, st); !s.ok()) {
      return Status::PermissionDenied("not trusting a coordinator at " + path + ": " + s.message());
    }
  }
  Result<int> fd = ConnectUnix(path);
  if (!fd.ok()) return fd;
  Result<PeerCred> peer = PeerOf(*fd);
  if (!peer.ok() || (peer->uid != me && peer->uid != 0)) {
    ::close(*fd);
    return Status::PermissionDenied(
        "the process listening at " + path +
        (peer.ok() ? " runs as uid " + std::to_string(peer->uid) + ", pid " + std::to_string(peer->pid)
                   : std::string(" cannot be identified")) +
        ", neither this user nor root; not trusting it");
  }
  return fd;
}

Result<PeerCred> PeerOf(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Status::IoError(Errno("SO_PEERCRED"));
  return PeerCred{static_cast<uint32_t>(cred.uid), static_cast<int32_t>(cred.pid)};
}

Status SendMessage(int fd, const proto::Message& m, int pass_fd) {
  const std::string frame = proto::Encode(m);
  if (pass_fd >= 0) {
    // The descriptor rides on a first, one-byte message.
    iovec iov{const_cast<char*>(frame.data()), 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    ssize_t n;
    do {
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != 1) return Status::IoError(Errno("sendmsg"));
  }
  for (size_t done = pass_fd >= 0 ? 1 : 0; done < frame.size();) {
    const ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError(Errno("send"));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

namespace {

// Keeps the first descriptor `msg` carried in *kept (when kept is non-null
// and holds none yet) and closes every other, so a peer cannot leak
// descriptors into this process.
void TakeDescriptors(msghdr& msg, int* kept) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (kept != nullptr && *kept < 0) {
        *kept = fd;
      } else {
        ::close(fd);
      }
    }
  }
}

// Reads exactly n bytes; the first wait honours `timeout_ms`. Descriptors
// that arrive go to TakeDescriptors.
Status ReadExactly(int fd, char* out, size_t n, int timeout_ms, int* kept) {
  for (size_t done = 0; done < n;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, done == 0 ? timeout_ms : 10000);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return Status::Unavailable(done == 0 ? "timed out" : "peer stalled in the middle of a message");
    iovec iov{out + done, n - done};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (got >= 0) TakeDescriptors(msg, kept);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return Status::IoError("connection closed");
    if (got < 0) return Status::IoError(Errno("recv"));
    done += static_cast<size_t>(got);
  }
  return Status::Ok();
}

}  // namespace

Result<proto::Message> ReceiveMessage(int fd, int timeout_ms, int* received_fd) {
  int passed = -1;
  auto fail = [&](Status s) -> Result<proto::Message> {
    if (passed >= 0) ::close(passed);
    return s;
  };
  uint8_t header[proto::kHeaderSize];
  if (Status s = ReadExactly(fd, reinterpret_cast<char*>(header), sizeof header, timeout_ms, &passed); !s.ok()) {
    return fail(s);
  }
  Result<proto::Header> h = proto::DecodeHeader(header);
  if (!h.ok()) return fail(h.status());
  std::string payload(h->size, '\0');
  if (Status s = ReadExactly(fd, payload.data(), payload.size(), -1, &passed); !s.ok()) return fail(s);
  Result<proto::Message> m = proto::DecodePayload(*h, payload);
  if (!m.ok()) return fail(m.status());
  if (received_fd != nullptr) {
    *received_fd = passed;
  } else if (passed >= 0) {
    ::close(passed);
  }
  return m;
}

Result<std::optional<proto::Message>> FrameReader::Next() {
  if (buffer_.size() < proto::kHeaderSize) return std::optional<proto::Message>();
  uint8_t header[proto::kHeaderSize];
  std::memcpy(header, buffer_.data(), sizeof header);
  Result<proto::Header> h = proto::DecodeHeader(header);
  if (!h.ok()) return h.status();
  if (buffer_.size() - proto::kHeaderSize < h->size) return std::optional<proto::Message>();
  Result<proto::Message> m = proto::DecodePayload(*h, buffer_.substr(proto::kHeaderSize, h->size));
  buffer_.erase(0, proto::kHeaderSize + h->size);
  if (!m.ok()) return m.status();
  return std::optional<proto::Message>(std::move(*m));
}

}  // namespace msched

// A plain-socket HTTP client for the metrics tests: one request per
// connection and its answer read to the end, the server closing after it.
// Confined to the calling thread. Shared by mschedd_metrics_test.cc (mschedd
// as a process) and metrics_http_test.cc (its HTTP server in-process).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace msched::testsupport {

struct HttpReply {
  int status = 0;  // 0: no answer
  std::string head, body;
};

// Each read or write on `fd` gives up after `wait` (0: never).
inline void SetTimeouts(int fd, std::chrono::milliseconds wait) {
  const timeval limit{static_cast<time_t>(wait.count() / 1000), static_cast<suseconds_t>(wait.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

// A connection to 127.0.0.1:`port`, or -1. With `wait`, connecting and each
// read or write give up after that long (a full listen queue makes connect
// wait for retries of seconds).
inline int ConnectLoopback(int port, std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  SetTimeouts(fd, wait);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads `fd` to its end, closes it, and parses what came as an answer.
inline HttpReply ReadReply(int fd) {
  HttpReply r;
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const size_t split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.", 0) != 0 || split == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.head = all.substr(0, split);
  r.body = all.substr(split + 4);
  return r;
}

// Sends `request` as is to 127.0.0.1:`port` and reads the answer; with
// `wait`, each read or write gives up after that long (no answer).
inline HttpReply Exchange(int port, const std::string& request,
                          std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
  const int fd = ConnectLoopback(port, wait);
  if (fd < 0) return {};
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return {};
  }
  return ReadReply(fd);
}

// One HTTP/1.0 request for `path`.
inline HttpReply Http(int port, const std::string& method, const std::string& path,
                      std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
  return Exchange(port, method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", wait);
}

// Raises this process's soft limit on descriptors to its hard limit, for
// tests that hold hundreds of connections; returns the limit.
inline size_t RaiseOwnDescriptorLimit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

}  // namespace msched::testsupport

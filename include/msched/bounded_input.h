// File: msched/bounded_input.h
// Reading untrusted input files safely: only regular files, never more than a
// cap, and JSON nesting bounded before any parser or dump() recurses over it.
// Every file msched or the simulator parses (templates, traces, workloads,
// module files, device profiles, bench scenarios) goes through here.
// Stateless free functions; thread-safe.
//
// Header-only on purpose: the simulator (sim/) must not link any msched
// library, yet has to apply the same rules, so both sides include this file
// and no compiled part of msched. Errors come back as text (the simulated
// driver does not use msched::Status); callers wrap them in a Status.
//
// Example:
//   std::string text, error;
//   if (!ReadJsonFileText(path, kMaxConfigFileBytes, &text, &error)) {
//     return Status::InvalidArgument(path + ": " + error);
//   }
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace msched {

// Caps per kind of input. Each is far above any real file of that kind; a
// file past it is a mistake (or an attack), not data.
inline constexpr uint64_t kMaxTemplatesFileBytes = uint64_t{64} << 20;  // thousands of kernels take < 1 MiB
inline constexpr uint64_t kMaxTraceFileBytes = uint64_t{4} << 30;       // a long profiled run, every launch
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;     // workloads, modules, profiles, scenarios
// No msched format nests deeper than about 10 levels (template expressions
// included); 64 leaves room and keeps every recursive walk shallow.
inline constexpr size_t kMaxJsonDepth = 64;

// Reads the whole of `path` into *out if it is a regular file of at most
// `max_bytes`. The open never blocks (O_NONBLOCK: a FIFO or device cannot
// hang it) and the type is checked on the opened descriptor (fstat), so a
// swap after a check cannot slip a device in. Returns false with the reason
// in *error otherwise (without the path: callers put it in their own
// message; when the open itself failed, errno is still open's); *out is then
// unspecified.
[[nodiscard]] inline bool ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string* out,
                                          std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int open_errno = errno;
    *error = std::string("cannot open: ") + std::strerror(open_errno);
    errno = open_errno;  // callers may tell a missing file apart
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    *error = dir ? "is a directory, not a file" : "not a regular file (a device, FIFO or socket?)";
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    *error = "too large (" + std::to_string(st.st_size) + " bytes; the limit is " + std::to_string(max_bytes) + ")";
    return false;
  }
  out->clear();
  out->reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string("read failed: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    // The file may grow after fstat: the cap holds for what is read too.
    if (out->size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      *error = "too large (grew past the limit of " + std::to_string(max_bytes) + " bytes)";
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

// True when no array or object in `text` nests deeper than `max_depth`.
// A linear scan counting brackets outside strings: no recursion, so it is
// safe on any input, valid JSON or not (the parser judges validity later).
[[nodiscard]] inline bool CheckJsonDepth(std::string_view text, size_t max_depth, std::string* error) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        *error = "JSON nested deeper than " + std::to_string(max_depth) + " levels (at byte " + std::to_string(i) + ")";
        return false;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

// The text of a JSON input file of msched's own formats: a regular file of
// at most `max_bytes` that nests no deeper than kMaxJsonDepth, ready for a
// parser. False with the reason in *error (without the path) otherwise.
[[nodiscard]] inline bool ReadJsonFileText(const std::string& path, uint64_t max_bytes, std::string* out,
                                           std::string* error) {
  return ReadRegularFile(path, max_bytes, out, error) && CheckJsonDepth(*out, kMaxJsonDepth, error);
}

}  // namespace msched

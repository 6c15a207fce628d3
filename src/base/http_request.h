// The head of an HTTP/1.x request, as mschedd's metrics server reads it
// (tools/metrics_http.h): whether the bytes received so far hold a whole
// head, and its request line (method, path). Header fields are skipped:
// the one endpoint needs none of them. A pure function, thread-safe.
// Used by tools/ and the tests (unit and fuzz).
#pragma once

#include <cstddef>
#include <string_view>

namespace msched {

// The most bytes a request head may take, its blank line included.
inline constexpr size_t kMaxHttpHeadBytes = 8192;

struct HttpRequestHead {
  enum class State {
    kIncomplete,  // no blank line yet, and fewer than kMaxHttpHeadBytes: read on
    kComplete,    // a whole head; `method` and `path` are set
    kMalformed,   // the request line is not METHOD SP /TARGET SP HTTP/1.x (answer 400)
    kTooLarge,    // no blank line within the first kMaxHttpHeadBytes (answer 431)
  };
  State state = State::kIncomplete;
  // Both view the input. The method is case-sensitive ("GET"); the path is
  // the target up to any '?', unmodified (no percent-decoding).
  std::string_view method;
  std::string_view path;
};

// Reads `received`, the bytes a connection has sent so far, from its first.
// A head is a request line, any header lines, and an empty line; lines end
// in CRLF or a bare LF. The request line is judged as soon as it is whole,
// so a malformed one is answered without waiting for the rest. Bytes after
// the blank line (a body, a pipelined request) are ignored.
// Example: "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n" is kComplete with
// method "GET" and path "/metrics".
HttpRequestHead ParseHttpRequestHead(std::string_view received);

}  // namespace msched

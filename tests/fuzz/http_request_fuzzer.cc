// Fuzzes msched::ParseHttpRequestHead (src/base/http_request.h) as the
// metrics server calls it, on the bytes a connection has sent so far: the
// input, and a prefix of it cut where its first byte says. What a prefix
// settles (a whole head, malformed, too large) the whole input must settle
// the same way, and a whole head's method and path are what they claim.
#include <cstdlib>
#include <string_view>

#include "base/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using State = msched::HttpRequestHead::State;
  if (size < 1) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string_view prefix = all.substr(0, all.size() * data[0] / 255);
  const msched::HttpRequestHead whole = msched::ParseHttpRequestHead(all);
  const msched::HttpRequestHead part = msched::ParseHttpRequestHead(prefix);
  if (part.state != State::kIncomplete &&
      (whole.state != part.state || whole.method != part.method || whole.path != part.path)) {
    std::abort();
  }
  if (whole.state == State::kTooLarge && all.size() < msched::kMaxHttpHeadBytes) std::abort();
  if (whole.state == State::kComplete) {
    const char* const begin = all.data();
    if (whole.method.empty() || whole.method.data() != begin || whole.path.empty() || whole.path[0] != '/' ||
        whole.path.data() != begin + whole.method.size() + 1 || whole.path.find('?') != std::string_view::npos ||
        all.find('\n') == std::string_view::npos) {
      std::abort();
    }
  }
  return 0;
}

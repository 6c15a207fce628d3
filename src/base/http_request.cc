#include "base/http_request.h"

#include <algorithm>
#include <cstring>

namespace msched {
namespace {

// RFC 9110's tchar: what a method (a token) is made of.
bool IsTokenChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

// A request target in origin form: '/', then visible ASCII only.
bool IsOriginForm(std::string_view target) {
  return !target.empty() && target.front() == '/' &&
         std::all_of(target.begin(), target.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// METHOD SP TARGET SP HTTP/1.DIGIT, with single spaces (RFC 9112, 3); the
// absolute form of the target, which only proxies are sent, is refused.
bool ParseRequestLine(std::string_view line, HttpRequestHead* head) {
  const size_t first = line.find(' ');
  const size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos) return false;
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  const std::string_view version = line.substr(second + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), IsTokenChar) || !IsOriginForm(target) ||
      version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' || version[7] > '9') {
    return false;
  }
  head->method = method;
  head->path = target.substr(0, target.find('?'));
  return true;
}

}  // namespace

HttpRequestHead ParseHttpRequestHead(std::string_view received) {
  using State = HttpRequestHead::State;
  const std::string_view window = received.substr(0, kMaxHttpHeadBytes);
  const auto incomplete = [&] {
    return HttpRequestHead{received.size() >= kMaxHttpHeadBytes ? State::kTooLarge : State::kIncomplete, {}, {}};
  };
  const size_t line_end = window.find('\n');
  if (line_end == std::string_view::npos) return incomplete();
  std::string_view line = window.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  HttpRequestHead head;
  if (!ParseRequestLine(line, &head)) return HttpRequestHead{State::kMalformed, {}, {}};
  // The head ends at the first line that is empty: a LF right after a LF, or
  // after a LF and a CR. The request line's own LF counts as the first.
  for (size_t lf = line_end; lf != std::string_view::npos; lf = window.find('\n', lf + 1)) {
    const std::string_view next = window.substr(lf + 1);
    if (next.starts_with('\n') || next.starts_with("\r\n")) {
      head.state = State::kComplete;
      return head;
    }
  }
  return incomplete();
}

}  // namespace msched

// File: msched/leading_int.h
// LeadingInt: std::stoi's reading of a decimal int without its exceptions,
// for parsers that return Status rather than throw (the simulator's module
// files, bench scenarios). Stateless; thread-safe.
//
// Header-only, like msched/json_checked.h: the simulator's module parser
// uses it as well as the bench suite.
//
// Example:
//   std::optional<int> percent = LeadingInt("150");  // 150
#pragma once

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>

namespace msched {

// The int at the start of `text` as std::stoi reads it (leading white
// space and a sign allowed, whatever follows the digits ignored); nullopt
// where std::stoi would throw: no digits, or a value outside int. errno is
// left as it was.
inline std::optional<int> LeadingInt(const std::string& text) {
  const int saved_errno = errno;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  const bool out_of_range = errno == ERANGE || value < INT_MIN || value > INT_MAX;
  errno = saved_errno;
  if (end == text.c_str() || out_of_range) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace msched

// Small text helpers the driver-free core shares when it reads settings and
// system files: blanks trimmed, letters lowered. Thread-safe.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace msched {

// `s` without the blanks around it.
inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `s` in lower case (ASCII).
inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace msched

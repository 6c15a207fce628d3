// Fuzzes msched::ParseConfig (src/base/config.cc) through a fake environment
// built from the input: NAME=VALUE lines. The first definition of a name is
// what the lookup returns; every line is also an environ entry, so the scan
// for unknown MSCHED_* names sees them all. Error texts are formatted too.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "msched/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string, std::less<>> env;
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.find('\0') != std::string::npos) continue;  // cannot be in an environment
    lines.push_back(line);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  std::vector<const char*> environ;
  for (const std::string& l : lines) environ.push_back(l.c_str());
  environ.push_back(nullptr);

  msched::ConfigParse p = msched::ParseConfig(
      [&env](const char* name) -> const char* {
        auto it = env.find(std::string_view(name));
        return it == env.end() ? nullptr : it->second.c_str();
      },
      environ.data());
  for (const msched::ConfigError& e : p.errors) (void)e.ToString();
  return 0;
}

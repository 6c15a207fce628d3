#include "hook_config.h"

#include <cstdlib>

extern char** environ;

namespace msched::hook {

const ConfigParse& HookConfigParse() {
  static const ConfigParse* parse = new ConfigParse(ParseConfig([](const char* name) { return std::getenv(name); }, environ));
  return *parse;
}

}  // namespace msched::hook

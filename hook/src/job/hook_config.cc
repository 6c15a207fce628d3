#include "job/hook_config.h"

#include <cstdlib>

#include "msched/no_destructor.h"

extern char** environ;

namespace msched::hook {

const ConfigParse& HookConfigParse() {
  static NoDestructor<ConfigParse> parse(ParseConfig([](const char* name) { return std::getenv(name); }, environ));
  return *parse;
}

}  // namespace msched::hook

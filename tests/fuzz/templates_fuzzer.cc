// Fuzzes msched::ParseTemplates (src/model/template_json.cc) and, for what
// loads, the SerializeTemplates round trip: serialised templates must read
// back with no problems and serialise to the same text.
#include <cstdlib>
#include <string_view>

#include "msched/templates.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  msched::TemplateLoadResult r = msched::ParseTemplates(text, "fuzz.json");
  for (const msched::TemplateProblem& p : r.problems) (void)p.ToString();
  const std::string once = msched::SerializeTemplates(r.templates);
  msched::TemplateLoadResult again = msched::ParseTemplates(once, "again.json");
  if (!again.problems.empty() || msched::SerializeTemplates(again.templates) != once) std::abort();
  return 0;
}

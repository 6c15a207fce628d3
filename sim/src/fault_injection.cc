// MSIM_FAIL="<entry>:<N>[+]:<error>[,...]": see fault_injection.h and
// docs/simulator.md. Counts are kept for every entry point, not only the
// named ones, so that msimCallCount can tell a test which call to fail.
#include "fault_injection.h"

#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "msched/no_destructor.h"
#include "proc_table.h"

namespace msim {
namespace {

struct Rule {
  std::string base;
  uint64_t nth = 0;
  bool onward = false;  // "N+": every call from the Nth on
  int error = 0;
  bool announced = false;
};

bool IsEntryPoint(std::string_view base) {
  size_t n = 0;
  const ProcEntry* entries = ProcEntries(&n);
  for (size_t i = 0; i < n; ++i) {
    if (base == entries[i].base) return true;
  }
  return false;
}

bool ParseUnsigned(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One "<entry>:<N>[+]:<error>"; on failure `why` says what is wrong.
bool ParseRule(std::string_view spec, Rule* rule, std::string* why) {
  const size_t c1 = spec.find(':');
  const size_t c2 = c1 == std::string_view::npos ? c1 : spec.find(':', c1 + 1);
  if (c2 == std::string_view::npos || spec.find(':', c2 + 1) != std::string_view::npos) {
    *why = "expected <entry point>:<N>[+]:<error>";
    return false;
  }
  const std::string_view name = spec.substr(0, c1);
  std::string_view nth = spec.substr(c1 + 1, c2 - c1 - 1);
  const std::string_view error = spec.substr(c2 + 1);
  rule->base = std::string(BaseName(name));
  if (!IsEntryPoint(rule->base)) {
    *why = "'" + std::string(name) + "' is not a driver entry point";
    return false;
  }
  rule->onward = !nth.empty() && nth.back() == '+';
  if (rule->onward) nth.remove_suffix(1);
  if (!ParseUnsigned(nth, &rule->nth) || rule->nth == 0) {
    *why = "the call number must be a whole number from 1, optionally followed by '+'";
    return false;
  }
  uint64_t code = 0;
  if (ParseUnsigned(error, &code)) {
    if (code == 0 || code > INT_MAX) {
      *why = "the error code must be a CUresult other than 0 (CUDA_SUCCESS)";
      return false;
    }
    rule->error = static_cast<int>(code);
  } else if (!ErrorByName(error, &rule->error) || rule->error == 0) {
    *why = "'" + std::string(error) + "' is not a CUresult name other than CUDA_SUCCESS";
    return false;
  }
  return true;
}

std::vector<Rule> ParseRules(const char* text) {
  std::vector<Rule> rules;
  if (text == nullptr || *text == '\0') return rules;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view spec = rest.substr(0, comma);
    Rule rule;
    std::string why;
    if (!ParseRule(spec, &rule, &why)) {
      // A test tool: say what is wrong, once, and run as if unset rather than
      // half-configured.
      std::fprintf(stderr, "msim: MSIM_FAIL: %s in '%.*s'; no faults are injected\n", why.c_str(),
                   static_cast<int>(spec.size()), spec.data());
      return {};
    }
    rules.push_back(std::move(rule));
    if (comma == std::string_view::npos) return rules;
    rest.remove_prefix(comma + 1);
  }
}

struct Injector {
  std::mutex mu;
  std::vector<Rule> rules = ParseRules(std::getenv("MSIM_FAIL"));
  std::unordered_map<std::string, uint64_t> calls;  // by base name
  // Callers pass the same literal every time: its address finds the counter
  // without taking the name apart again.
  std::unordered_map<const char*, uint64_t*> by_literal;
};

Injector& TheInjector() {
  static msched::NoDestructor<Injector> injector;  // calls may come during exit
  return *injector;
}

}  // namespace

std::string_view BaseName(std::string_view symbol) {
  for (std::string_view flavour : {"_ptsz", "_ptds"}) {
    if (symbol.ends_with(flavour)) symbol.remove_suffix(flavour.size());
  }
  const size_t v = symbol.rfind("_v");
  if (v != std::string_view::npos && v + 2 < symbol.size() &&
      symbol.find_first_not_of("0123456789", v + 2) == std::string_view::npos) {
    symbol = symbol.substr(0, v);
  }
  return symbol;
}

int InjectedFault(const char* entry) noexcept {
  try {
    Injector& in = TheInjector();
    std::lock_guard<std::mutex> lock(in.mu);
    uint64_t*& counter = in.by_literal[entry];
    if (counter == nullptr) counter = &in.calls[std::string(BaseName(entry))];
    const uint64_t n = ++*counter;
    for (Rule& r : in.rules) {
      if (n != r.nth && !(r.onward && n > r.nth)) continue;
      if (r.base != BaseName(entry)) continue;
      if (!r.announced) {
        std::fprintf(stderr, "msim: MSIM_FAIL: %s call %llu fails with %d%s\n", entry,
                     static_cast<unsigned long long>(n), r.error, r.onward ? " (and every later one)" : "");
        r.announced = true;
      }
      return r.error;
    }
  } catch (...) {
    // Out of memory while counting: the call runs uncounted.
  }
  return 0;
}

bool CallCount(const char* name, uint64_t* count) noexcept {
  if (name == nullptr || count == nullptr) return false;
  try {
    const std::string base(BaseName(name));
    if (!IsEntryPoint(base)) return false;
    Injector& in = TheInjector();
    std::lock_guard<std::mutex> lock(in.mu);
    const auto it = in.calls.find(base);
    *count = it == in.calls.end() ? 0 : it->second;
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace msim

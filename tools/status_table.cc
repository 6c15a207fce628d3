#include "status_table.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <vector>

#include "msched/config.h"
#include "msched/no_destructor.h"

namespace msched {
namespace {

using nlohmann::json;

constexpr size_t kGap = 2;             // spaces between columns
constexpr size_t kShortenedName = 16;  // what long names give up first
constexpr size_t kNarrowestName = 6;

// Columns of the terminal a UTF-8 string takes (one per code point).
size_t Columns(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// `s` cut to `width` columns, ending in "…" when something was cut.
std::string Fit(const std::string& s, size_t width) {
  if (Columns(s) <= width) return s;
  if (width == 0) return "";
  std::string out;
  size_t used = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((s[i] & 0xC0) != 0x80 && ++used == width) break;  // the first byte of the code point that does not fit
    out += s[i];
  }
  return out + "…";
}

std::string Pad(const std::string& s, size_t width, bool right) {
  const std::string space(width - std::min(width, Columns(s)), ' ');
  return right ? space + s : s + space;
}

// Fields read without throwing: a coordinator of another version may lack
// one or give it another type, and then the table shows the default.
uint64_t U64(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const json& v = j[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return v.is_number_integer() && v.get<int64_t>() > 0 ? static_cast<uint64_t>(v.get<int64_t>()) : 0;
}
int64_t Int(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}
double Real(const json& j, const char* key, double otherwise) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : otherwise;
}
std::string Text(const json& j, const char* key, const std::string& otherwise) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : otherwise;
}
bool Flag(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

std::string Size(const json& job, const char* key) {
  const uint64_t bytes = U64(job, key);
  return bytes ? FormatBytes(bytes) : "-";
}

// 350 ms, 12.5 s, 3m07s, 2h05m: enough to tell a short wait from a long one.
std::string Duration(uint64_t ns) {
  const uint64_t ms = ns / 1000000;
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%llu ms", static_cast<unsigned long long>(ms));
  } else if (ms < 60000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000);
  } else if (ms < 3600000) {
    std::snprintf(buf, sizeof buf, "%llum%02llus", static_cast<unsigned long long>(ms / 60000),
                  static_cast<unsigned long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(ms / 3600000),
                  static_cast<unsigned long long>(ms / 60000 % 60));
  }
  return buf;
}

struct Column {
  const char* header;
  bool right;  // numbers align right
  std::function<std::string(const json&)> cell;
};

// The job's state as the table shows it: on the GPU ("running"), "waiting",
// "swapped out", "paused" or "finished". A coordinator that sends no
// run_state (an older one) is shown its own state.
std::string StateOf(const json& j) { return Text(j, "run_state", Text(j, "state", "?")); }

// How long the job has been off the GPU, or "-" while it runs. An older
// coordinator sends only the wait before admission.
std::string WaitOf(const json& j) {
  if (j.is_object() && !j.contains("wait_ns")) return Duration(U64(j, "waited_ns"));
  return Flag(j, "on_gpu") || StateOf(j) == "finished" ? "-" : Duration(U64(j, "wait_ns"));
}

// Why the job waits ("turn", "admission"...), or "-".
std::string WhyOf(const json& j) {
  const std::string why = Text(j, "wait_reason", "");
  return why.empty() ? "-" : why;
}

// In display order. A guest sees other users' jobs without name or pid
// (empty and 0 in the document): shown as "-".
const std::vector<Column>& AllColumns() {
  static const NoDestructor<std::vector<Column>> columns(std::vector<Column>{
      {"JOB", true, [](const json& j) { return std::to_string(U64(j, "id")); }},
      {"NAME", false, [](const json& j) { return Text(j, "name", "").empty() ? "-" : Text(j, "name", ""); }},
      {"USER", false, [](const json& j) { return Text(j, "user", std::to_string(U64(j, "uid"))); }},
      {"PID", true, [](const json& j) { return Int(j, "pid") ? std::to_string(Int(j, "pid")) : "-"; }},
      {"STATE", false, StateOf},
      {"WHY", false, WhyOf},
      {"WAITED", true, WaitOf},
      {"SLICES", true, [](const json& j) { return std::to_string(U64(j, "slices")); }},
      {"CLASS", false, [](const json& j) { return Text(j, "class", "-"); }},
      {"PRIO", true, [](const json& j) { return std::to_string(Int(j, "priority")); }},
      {"DECLARED", true, [](const json& j) { return Size(j, "declared_bytes"); }},
      {"ALLOCATED", true, [](const json& j) { return Size(j, "allocated_bytes"); }},
      {"WORKSET", true, [](const json& j) { return Size(j, "working_set_bytes"); }},
      {"RESIDENT", true, [](const json& j) { return Size(j, "resident_bytes"); }},
      {"BUDGET", true, [](const json& j) { return Size(j, "budget_bytes"); }},
      {"OVER", true, [](const json& j) { return Size(j, "peak_over_budget_bytes"); }},
      {"SHARED", true, [](const json& j) { return Size(j, "shared_bytes"); }},
      {"SWAPS", true, [](const json& j) { return std::to_string(U64(j, "swaps_in")); }},
  });
  return *columns;
}

// First left out when narrow; the columns not named here always stay.
constexpr const char* kDropOrder[] = {"SHARED", "SWAPS",     "OVER",     "BUDGET",  "PID",
                                      "CLASS",  "PRIO",      "SLICES",   "WORKSET", "DECLARED",
                                      "USER",   "ALLOCATED", "RESIDENT", "WAITED",  "WHY"};

// Joins `parts` with ", " into lines of at most `width` columns (0: one line).
std::string Wrap(const std::vector<std::string>& parts, size_t width) {
  std::string out, line;
  for (const std::string& raw : parts) {
    const std::string part = width ? Fit(raw, width) : raw;
    if (!line.empty() && width && Columns(line) + 2 + Columns(part) > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + part;
  }
  return out + line + "\n";
}

std::string Summary(const json& c, const json& jobs, size_t width) {
  const uint64_t hbm = U64(c, "hbm_bytes");
  char oversubscribe[32];
  std::snprintf(oversubscribe, sizeof oversubscribe, "oversubscribe %.3g", Real(c, "oversubscribe", 1.0));
  std::map<std::string, int> states;  // "2 jobs (1 running, 1 waiting)"
  for (const json& j : jobs) ++states[StateOf(j)];
  std::string counts = std::to_string(jobs.size()) + (jobs.size() == 1 ? " job" : " jobs");
  const char* separator = " (";
  for (const auto& [state, n] : states) {
    counts += separator + std::to_string(n) + " " + state;
    separator = ", ";
  }
  if (!states.empty()) counts += ")";
  const uint64_t groups = U64(c, "groups");
  return Wrap(
      {"coordinator pid " + std::to_string(Int(c, "pid")), "socket " + Text(c, "socket", "?"),
       hbm ? FormatBytes(hbm) + " HBM" : "HBM not yet known", oversubscribe, counts,
       std::to_string(groups) + (groups == 1 ? " group" : " groups"), std::to_string(U64(c, "switches")) + " switches"},
      width);
}

}  // namespace

std::string RenderStatus(const json& status, size_t width) {
  const bool whole = status.is_object();
  const json coordinator = whole && status.contains("coordinator") ? status["coordinator"] : json::object();
  const json jobs = whole && status.contains("jobs") && status["jobs"].is_array() ? status["jobs"] : json::array();
  std::string out = Summary(coordinator, jobs, width);
  if (jobs.empty()) return out;
  const std::vector<Column>& all = AllColumns();
  std::vector<std::vector<std::string>> cells(all.size());
  std::vector<size_t> widths(all.size());
  size_t name = 0;
  for (size_t c = 0; c < all.size(); ++c) {
    if (std::string(all[c].header) == "NAME") name = c;
    widths[c] = Columns(all[c].header);
    for (const json& j : jobs) {
      cells[c].push_back(all[c].cell(j));
      widths[c] = std::max(widths[c], Columns(cells[c].back()));
    }
  }
  const size_t natural_name = widths[name];
  std::vector<bool> shown(all.size(), true);
  auto total = [&] {
    size_t sum = 0, n = 0;
    for (size_t c = 0; c < all.size(); ++c) {
      if (shown[c]) sum += widths[c], ++n;
    }
    return sum + kGap * (n - 1);
  };
  if (width != 0 && total() > width) {
    widths[name] = std::max(Columns("NAME"), std::min(widths[name], kShortenedName));
    for (const char* drop : kDropOrder) {
      if (total() <= width) break;
      for (size_t c = 0; c < all.size(); ++c) shown[c] = shown[c] && all[c].header != std::string(drop);
    }
    if (total() > width)
      widths[name] = std::max(kNarrowestName, widths[name] - std::min(widths[name], total() - width));
    // Room left after the drops goes back to the names.
    if (total() < width) widths[name] = std::min(natural_name, widths[name] + (width - total()));
  }
  auto row = [&](const std::function<std::string(size_t)>& text) {
    std::string line;
    for (size_t c = 0; c < all.size(); ++c) {
      if (!shown[c]) continue;
      if (!line.empty()) line += std::string(kGap, ' ');
      line += Pad(Fit(text(c), widths[c]), widths[c], all[c].right);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    return line + "\n";
  };
  out += row([&](size_t c) { return std::string(all[c].header); });
  for (size_t r = 0; r < jobs.size(); ++r) out += row([&](size_t c) { return cells[c][r]; });
  return out;
}

size_t OutputWidth(int fd) {
  if (const char* env = std::getenv("COLUMNS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n > 0) return static_cast<size_t>(n);
  }
  winsize ws{};
  if (::isatty(fd) && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

}  // namespace msched

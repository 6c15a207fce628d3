#include "msched/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/text.h"

namespace msched {
namespace {

// Splits "1.5GiB" into 1.5 and "gib". Fails without leading digits.
bool SplitNumber(std::string_view text, double* number, std::string* unit) {
  text = Trim(text);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  const std::string num(text.substr(0, i));
  char* end = nullptr;
  *number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(*number)) return false;
  *unit = Lower(Trim(text.substr(i)));
  return true;
}

// Sets `field` from the value, or returns false to report it. `accepted` is
// the human form shown in the error.
struct VarSpec {
  ConfigVariable doc;
  bool (*apply)(std::string_view value, Config* c);
};

template <typename E, size_t N>
bool PickEnum(std::string_view v, const std::pair<const char*, E> (&choices)[N], E* out) {
  const std::string lv = Lower(Trim(v));
  for (const auto& [name, value] : choices) {
    if (lv == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

constexpr std::pair<const char*, Mode> kModes[] = {{"off", Mode::kOff},
                                                   {"um", Mode::kUm},
                                                   {"alloc", Mode::kAlloc},
                                                   {"msched", Mode::kMsched},
                                                   {"profile", Mode::kProfile}};
constexpr std::pair<const char*, UnknownPolicy> kUnknown[] = {
    {"pointers", UnknownPolicy::kPointers}, {"fault", UnknownPolicy::kFault}, {"alloc", UnknownPolicy::kAlloc}};
constexpr std::pair<const char*, bool> kOnOff[] = {{"on", true}, {"off", false}};
constexpr std::pair<const char*, EvictionPolicy> kEviction[] = {{"opt", EvictionPolicy::kOpt},
                                                                {"lru", EvictionPolicy::kLru}};
constexpr std::pair<const char*, CoordMode> kCoord[] = {
    {"auto", CoordMode::kAuto}, {"off", CoordMode::kOff}, {"required", CoordMode::kRequired}};
constexpr std::pair<const char*, JobClass> kClasses[] = {
    {"short", JobClass::kShort}, {"long", JobClass::kLong}, {"service", JobClass::kService}};
constexpr std::pair<const char*, LogLevel> kLevels[] = {{"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug},
                                                        {"info", LogLevel::kInfo},   {"warn", LogLevel::kWarn},
                                                        {"error", LogLevel::kError}, {"off", LogLevel::kOff}};

bool SetPath(std::string_view v, std::string* out) {
  v = Trim(v);
  if (v.empty() || v.find('\0') != std::string_view::npos) return false;
  *out = std::string(v);
  return true;
}

const VarSpec kVars[] = {
    {{"MSCHED_MODE", "off|um|alloc|msched|profile", "msched",
      "off: pass-through; um: demand paging; alloc: prefetch whole allocations; msched: templates + OPT"},
     [](std::string_view v, Config* c) { return PickEnum(v, kModes, &c->mode); }},
    {{"MSCHED_TEMPLATES", "paths separated by ':' (files or directories)", "(none)",
      "templates files to load after the shipped ones (a kernel's later definition replaces an earlier one)"},
     [](std::string_view v, Config* c) {
       c->template_paths.clear();
       size_t start = 0;
       while (start <= v.size()) {
         size_t colon = v.find(':', start);
         if (colon == std::string_view::npos) colon = v.size();
         std::string_view part = Trim(v.substr(start, colon - start));
         if (!part.empty()) c->template_paths.emplace_back(part);
         start = colon + 1;
       }
       return !c->template_paths.empty();
     }},
    {{"MSCHED_SHIPPED_TEMPLATES", "on|off", "on",
      "load the templates shipped with msched (templates/) before MSCHED_TEMPLATES; off: only one's own, to "
      "measure them"},
     [](std::string_view v, Config* c) { return PickEnum(v, kOnOff, &c->shipped_templates); }},
    {{"MSCHED_PROGRESS", "on|off", "off (msched run: on)",
      "say on stderr, one line each, when the job is queued for admission, admitted, paused, resumed and done"},
     [](std::string_view v, Config* c) { return PickEnum(v, kOnOff, &c->progress); }},
    {{"MSCHED_GPU_MEMORY", "a size such as 8GiB or 512M", "what the device reports",
      "HBM budget msched keeps this job within"},
     [](std::string_view v, Config* c) {
       Result<uint64_t> b = ParseBytes(v);
       if (!b.ok() || *b == 0) return false;
       c->gpu_memory = *b;
       return true;
     }},
    {{"MSCHED_UNKNOWN", "pointers|fault|alloc", "pointers",
      "kernels without a template: prefetch from each pointer argument as far as templates predicted the data "
      "there to reach, else to the end of its allocation, leave to "
      "demand paging (what they reach still counts as the job's), or prefetch whole allocations"},
     [](std::string_view v, Config* c) { return PickEnum(v, kUnknown, &c->unknown); }},
    {{"MSCHED_EVICTION", "opt|lru", "opt",
      "which resident memory a job gives up first: needed furthest in the future, or least recently used "
      "(for comparison)"},
     [](std::string_view v, Config* c) { return PickEnum(v, kEviction, &c->eviction); }},
    {{"MSCHED_STATS", "a regular file's path", "(none)", "write statistics as JSON here at exit"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->stats_path); }},
    {{"MSCHED_LOG", "a regular file's path", "stderr", "where log lines go"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->log_path); }},
    {{"MSCHED_LOG_LEVEL", "trace|debug|info|warn|error|off", "error", "log verbosity (errors only by default)"},
     [](std::string_view v, Config* c) { return PickEnum(v, kLevels, &c->log_level); }},
    {{"MSCHED_REAL_LIBCUDA", "a library name, or a regular file's path", "libcuda.so.1",
      "the driver msched forwards to"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->real_libcuda); }},
    {{"MSCHED_COORD", "auto|off|required", "auto",
      "use the coordinator if one runs; never; or wait for it and fail clearly"},
     [](std::string_view v, Config* c) { return PickEnum(v, kCoord, &c->coord); }},
    {{"MSCHED_SOCKET", "a socket path", "(per GPU: see MSCHED_SOCKET_DIR)",
      "one coordinator's socket, joined whichever GPU the job uses"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->socket_path); }},
    {{"MSCHED_SOCKET_DIR", "a directory",
      "/run/msched for a GPU whose gpu<N>.sock is there, else $XDG_RUNTIME_DIR/msched, else /tmp/msched-<uid>",
      "where the coordinators' sockets are: a job on the machine's GPU N (as nvidia-smi numbers it) joins "
      "gpu<N>.sock there"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->socket_dir); }},
    {{"MSCHED_COORD_WAIT", "a duration such as 30s", "30s",
      "how long to wait for the coordinator and its answer with MSCHED_COORD=required (then allocations fail); "
      "auto waits at most 5 s for an answer, then runs alone"},
     [](std::string_view v, Config* c) {
       Result<uint64_t> d = ParseDurationNs(v);
       if (!d.ok()) return false;
       c->coord_wait_ns = *d;
       return true;
     }},
    {{"MSCHED_MEM", "a size such as 20G", "measured from the first allocations", "memory this job needs (admission)"},
     [](std::string_view v, Config* c) {
       Result<uint64_t> b = ParseBytes(v);
       if (!b.ok() || *b == 0) return false;
       c->job_memory = *b;
       return true;
     }},
    {{"MSCHED_CLASS", "short|long|service", "(estimated)",
      "short jobs pass long ones; a service (a server answering requests) never shares a turn with another "
      "service, and gives its turn up to waiting jobs after mschedd's --serving-idle-yield without work"},
     [](std::string_view v, Config* c) { return PickEnum(v, kClasses, &c->job_class); }},
    {{"MSCHED_PRIORITY", "an integer from -100 to 100", "0", "higher runs first and may preempt"},
     [](std::string_view v, Config* c) {
       Result<int64_t> p = ParseInteger(Trim(v), kMinPriority, kMaxPriority);
       if (!p.ok()) return false;
       c->priority = static_cast<int>(*p);
       return true;
     }},
    // Any length: the hook fits the name to the protocol when it sends it
    // (proto::SanitizeName), the one place that cuts and mends names.
    {{"MSCHED_JOB_NAME", "any non-empty text (cut to 63 bytes, on a character boundary)", "the program name",
      "how the job shows in msched status"},
     [](std::string_view v, Config* c) {
       v = Trim(v);
       if (v.empty()) return false;
       c->job_name = std::string(v);
       return true;
     }},
    {{"MSCHED_PROFILE_TRACE", "a file path", "(set by msched-profile)", "profile mode: where the launch trace goes"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->profile_trace); }},
    {{"MSCHED_TRACE", "a directory", "(none)",
      "write this job's side of the timeline at exit as DIR/job-<pid>.json (docs/tracing.md)"},
     [](std::string_view v, Config* c) { return SetPath(v, &c->trace_dir); }},
};

}  // namespace

const char* ModeName(Mode m) {
  for (const auto& [name, value] : kModes) {
    if (value == m) return name;
  }
  return "?";
}

const char* JobClassName(JobClass c) {
  for (const auto& [name, value] : kClasses) {
    if (value == c) return name;
  }
  return "unset";
}

std::optional<JobClass> JobClassNamed(std::string_view name) {
  for (const auto& [n, value] : kClasses) {
    if (name == n) return value;
  }
  return std::nullopt;
}

std::string ConfigError::ToString() const { return variable + "='" + value + "' is not valid: expected " + accepted; }

namespace {

// A GPU's coordinator socket in any directory: "/gpu<gpu>.sock".
std::string SocketName(int gpu) { return "/gpu" + std::to_string(gpu) + ".sock"; }

}  // namespace

std::string DefaultSocketPath(int gpu) {
  const std::string name = SocketName(gpu);
  const std::string system = "/run/msched" + name;  // a coordinator serving every user
  if (access(system.c_str(), F_OK) == 0) return system;
  // The user's runtime directory is private by construction (systemd makes
  // it 0700, owned by the user); /tmp is shared, so a directory there is
  // checked by both ends (unix_socket.h) before it is trusted.
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
    struct stat st;
    if (stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0) {
      return std::string(xdg) + "/msched" + name;
    }
  }
  return "/tmp/msched-" + std::to_string(getuid()) + name;
}

std::string CoordinatorSocket(const Config& config, int gpu) {
  if (!config.socket_path.empty()) return config.socket_path;
  if (!config.socket_dir.empty()) return config.socket_dir + SocketName(gpu);
  return DefaultSocketPath(gpu);
}

ConfigParse ParseConfig(const EnvLookup& lookup, const char* const* environ) {
  ConfigParse out;
  for (const VarSpec& var : kVars) {
    const char* value = lookup(var.doc.name);
    if (value == nullptr) continue;
    Config trial = out.config;
    if (var.apply(value, &trial)) {
      out.config = std::move(trial);
    } else {
      out.errors.push_back({var.doc.name, value, var.doc.accepted});
    }
  }
  for (const char* const* e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.rfind("MSCHED_", 0) != 0) continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    // Read by the programs, not by a job: in a job's environment they are
    // inherited from the shell that ran `msched`, not misspelt settings.
    static constexpr std::string_view kToolVariables[] = {"MSCHED_LIB", "MSCHED_SIM_DIR"};
    bool known = false;
    for (const VarSpec& var : kVars) known = known || name == var.doc.name;
    for (std::string_view tool : kToolVariables) known = known || name == tool;
    if (!known) out.unknown_variables.emplace_back(name);
  }
  return out;
}

Result<uint64_t> ParseBytes(std::string_view text) {
  double number = 0;
  std::string unit;
  if (!SplitNumber(text, &number, &unit)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a size such as 4096, 512M or 8GiB");
  }
  struct Unit {
    const char* name;
    double factor;
  };
  static const Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0},
      {"kib", 1024.0},
      {"kb", 1e3},
      {"m", 1048576.0},
      {"mib", 1048576.0},
      {"mb", 1e6},
      {"g", 1073741824.0},
      {"gib", 1073741824.0},
      {"gb", 1e9},
      {"t", 1099511627776.0},
      {"tib", 1099511627776.0},
      {"tb", 1e12},
  };
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = number * u.factor;
    if (bytes >= 18446744073709549568.0) return Status::OutOfRange("'" + std::string(text) + "' is too large");
    return static_cast<uint64_t>(std::llround(bytes));
  }
  return Status::InvalidArgument("'" + std::string(text) + "': unknown size unit '" + unit +
                                 "' (use B, K, M, G, T, KiB..TiB or KB..TB)");
}

Result<int64_t> ParseInteger(std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not an integer from " + std::to_string(lo) + " to " +
                                   std::to_string(hi));
  }
  return v;
}

Result<uint64_t> ParseDurationNs(std::string_view text) {
  double number = 0;
  std::string unit;
  if (!SplitNumber(text, &number, &unit)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a duration such as 250ms or 2s");
  }
  struct Unit {
    const char* name;
    double ns;
  };
  static const Unit kUnits[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"min", 60e9}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double ns = number * u.ns;
    if (ns >= 9.2e18) return Status::OutOfRange("'" + std::string(text) + "' is too long");
    return static_cast<uint64_t>(std::llround(ns));
  }
  return Status::InvalidArgument("'" + std::string(text) + "': a duration needs a unit: ns, us, ms, s or min");
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= 1024.0 && i < 4) {
    v /= 1024.0;
    ++i;
  }
  char buf[32];
  if (i == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kNames[i]);
  return buf;
}

const std::vector<ConfigVariable>& ConfigVariables() {
  static const std::vector<ConfigVariable>* docs = [] {
    auto* v = new std::vector<ConfigVariable>();
    for (const VarSpec& var : kVars) v->push_back(var.doc);
    return v;
  }();
  return *docs;
}

}  // namespace msched

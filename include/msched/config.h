// File: msched/config.h
// Every MSCHED_* environment variable, parsed in one place, once, with units
// ("8GiB", "512M", "250ms"). A bad value yields one error naming the variable
// and the accepted form, and the default stays in force, so a typo never
// takes a job down. Value types; ParseConfig is thread-safe.
// Included by src/, hook/ and the programs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msched/status.h"

namespace msched {

enum class Mode : uint8_t {
  kOff,      // full pass-through
  kUm,       // allocations made managed, no prediction: demand paging
  kAlloc,    // prefetch whole allocations of pointer arguments (the naive baseline)
  kMsched,   // templates + OPT placement
  kProfile,  // record launches and touched memory for msched-profile
};
enum class UnknownPolicy : uint8_t { kPointers, kFault, kAlloc };
enum class EvictionPolicy : uint8_t { kOpt, kLru };
enum class CoordMode : uint8_t { kAuto, kOff, kRequired };
// As a job declares itself (MSCHED_CLASS): short jobs pass long ones at
// admission; a service answers requests that come at random, and is treated
// as one from its first turn rather than once its idleness shows it.
enum class JobClass : uint8_t { kUnset, kShort, kLong, kService };
enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };

const char* ModeName(Mode m);
const char* JobClassName(JobClass c);
// The class JobClassName calls `name` (exactly), if any.
std::optional<JobClass> JobClassNamed(std::string_view name);

inline constexpr int kMinPriority = -100;
inline constexpr int kMaxPriority = 100;

struct Config {
  Mode mode = Mode::kMsched;
  std::vector<std::string> template_paths;  // files or directories
  bool shipped_templates = true;            // load the templates shipped with msched first
  bool progress = false;                    // say on stderr when the job queues, is admitted, paused, resumed
  std::optional<uint64_t> gpu_memory;       // budget; unset = what the device reports
  UnknownPolicy unknown = UnknownPolicy::kPointers;
  EvictionPolicy eviction = EvictionPolicy::kOpt;
  std::string stats_path;  // empty: no statistics file
  std::string log_path;    // empty: stderr
  LogLevel log_level = LogLevel::kError;
  std::string real_libcuda = "libcuda.so.1";
  CoordMode coord = CoordMode::kAuto;
  std::string socket_path;                              // one coordinator for whatever GPU; empty: per GPU
  std::string socket_dir;                               // where the per-GPU sockets are; empty: the default
  uint64_t coord_wait_ns = 30ull * 1000 * 1000 * 1000;  // MSCHED_COORD=required: how long to wait
  std::optional<uint64_t> job_memory;                   // declared need, for admission
  JobClass job_class = JobClass::kUnset;
  int priority = 0;  // higher runs first
  std::string job_name;
  std::string profile_trace;  // profile mode: where the trace goes
  std::string trace_dir;      // empty: no timeline of this job
};

// One rejected value.
struct ConfigError {
  std::string variable;
  std::string value;
  std::string accepted;
  // "MSCHED_MODE='fast' is not valid: expected off|um|alloc|msched|profile";
  // the caller says what follows (the library keeps the default, msched run
  // refuses to start the job).
  std::string ToString() const;
};

struct ConfigParse {
  Config config;
  std::vector<ConfigError> errors;
  std::vector<std::string> unknown_variables;  // MSCHED_* names nobody reads (typos)
};

// Looks a variable up; returns nullptr when unset. getenv in production.
using EnvLookup = std::function<const char*(const char*)>;

// Parses every variable of ConfigVariables() through `lookup`. `environ`
// (optional, NAME=VALUE strings) is scanned for unknown MSCHED_* names.
ConfigParse ParseConfig(const EnvLookup& lookup, const char* const* environ = nullptr);

// The default socket of the coordinator for the machine's GPU `gpu`
// (machine_gpu.h): a system-wide coordinator's (/run/msched/gpu<gpu>.sock)
// when one exists, else this user's own.
std::string DefaultSocketPath(int gpu = 0);

// The socket of the coordinator a job on the machine's GPU `gpu` joins:
// MSCHED_SOCKET when set (one coordinator, whatever the GPU), else
// gpu<gpu>.sock in MSCHED_SOCKET_DIR when set, else DefaultSocketPath(gpu).
std::string CoordinatorSocket(const Config& config, int gpu);

// "4096", "512M", "8GiB", "1.5G", "10GB": K/M/G/T and KiB.. are powers of
// 1024; KB/MB/GB/TB are powers of 1000. Case-insensitive.
Result<uint64_t> ParseBytes(std::string_view text);
// "250ms", "2s", "100us", "500ns", "1.5s", "2min"; a unit is required.
Result<uint64_t> ParseDurationNs(std::string_view text);
// A decimal integer from `lo` to `hi`, nothing before or after it.
Result<int64_t> ParseInteger(std::string_view text, int64_t lo, int64_t hi);
// "8.0 GiB", "512.0 MiB", "4.0 KiB", "17 B": for messages and reports.
std::string FormatBytes(uint64_t bytes);

// The documented variables, for the README and `msched help`.
struct ConfigVariable {
  const char* name;
  const char* accepted;
  const char* default_value;
  const char* meaning;
};
const std::vector<ConfigVariable>& ConfigVariables();

}  // namespace msched

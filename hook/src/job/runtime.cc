#include "job/runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "interpose/driver_functions.h"
#include "job/hook_config.h"
#include "msched/no_destructor.h"
#include "observe/job_trace.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

void WriteStatsAtExit() {
  Runtime& rt = Runtime::Get();
  const std::string& path = rt.config().stats_path;
  if (path.empty()) return;
  // Every write and the close are checked: a full disk must not leave a
  // short or empty file without a word.
  auto fail = [&path](int err) {
    LogError("cannot write statistics to '{}' (MSCHED_STATS): {}", path, std::strerror(err));
  };
  // Non-blocking, and truncated only once known to be a regular file: a
  // FIFO with no reader would hold the program at its exit forever (and a
  // kill then loses its buffered output), and a device is no place for them.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno == ENXIO ? ENOTSUP : errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return LogError("cannot write statistics to '{}' (MSCHED_STATS): not a regular file", path);
  }
  if (::ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(err);
  }
  const std::string text = rt.StatsJson();
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      return fail(err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(errno);
}

}  // namespace

Runtime& Runtime::Get() {
  static NoDestructor<Runtime> rt;
  return *rt;
}

const Config& Runtime::config() const { return HookConfig(); }

Runtime::Runtime() : job_(HookConfig().eviction) {
  hot_.mode = HookConfig().mode;
  hot_.unknown = HookConfig().unknown;
  for (size_t i = 0; i < kEntryCount; ++i) {
    c_.calls[i] = stats_.GetCounter(std::string("calls.") + Info(static_cast<Entry>(i)).symbol);
  }
  c_.lookups_dlsym = stats_.GetCounter("lookups.dlsym_substituted");
  c_.lookups_proc_address = stats_.GetCounter("lookups.get_proc_address");
  c_.lookups_proc_address_hooked = stats_.GetCounter("lookups.get_proc_address_substituted");
  c_.alloc_count = stats_.GetCounter("allocations.count");
  c_.alloc_bytes = stats_.GetCounter("allocations.bytes");
  c_.alloc_converted = stats_.GetCounter("allocations.converted");
  c_.alloc_converted_bytes = stats_.GetCounter("allocations.converted_bytes");
  c_.alloc_pinned = stats_.GetCounter("allocations.pinned");
  c_.alloc_pinned_bytes = stats_.GetCounter("allocations.pinned_bytes");
  c_.alloc_failed = stats_.GetCounter("allocations.failed");
  c_.pool_chunks = stats_.GetCounter("pool.chunks");
  c_.pool_chunk_bytes = stats_.GetCounter("pool.chunk_bytes");
  c_.pool_chunks_released = stats_.GetCounter("pool.chunks_released");
  c_.pool_stream_waits = stats_.GetCounter("pool.stream_waits");
  c_.pool_retired = stats_.GetCounter("pool.retired");
  c_.launches_total = stats_.GetCounter("launches.total");
  c_.launches_predicted = stats_.GetCounter("launches.predicted");
  c_.launches_unknown = stats_.GetCounter("launches.unknown");
  c_.launches_fallback = stats_.GetCounter("launches.fallback");
  c_.launches_whole_allocation = stats_.GetCounter("launches.whole_allocation");
  c_.launches_in_capture = stats_.GetCounter("launches.in_capture");
  c_.launches_graph = stats_.GetCounter("launches.graph");
  c_.graphs_planned = stats_.GetCounter("graphs.planned");
  c_.graph_nodes_predicted = stats_.GetCounter("graphs.nodes_predicted");
  c_.graph_nodes_unpredicted = stats_.GetCounter("graphs.nodes_unpredicted");
  c_.graph_launches_split = stats_.GetCounter("graphs.launches_split");
  c_.graph_segments = stats_.GetCounter("graphs.segments");
  c_.copies_predicted = stats_.GetCounter("copies.predicted");
  c_.bytes_predicted = stats_.GetCounter("bytes.predicted");
  c_.bytes_prefetched = stats_.GetCounter("bytes.prefetched");
  c_.bytes_evicted = stats_.GetCounter("bytes.evicted");
  c_.bytes_unserved = stats_.GetCounter("bytes.unserved");
  c_.peak_over_budget = stats_.GetCounter("bytes.peak_over_budget");
  c_.prefetch_errors = stats_.GetCounter("errors.prefetch");
  c_.eval_failures = stats_.GetCounter("errors.template_evaluation");
  c_.templates_loaded = stats_.GetCounter("templates.loaded");
  c_.template_problems = stats_.GetCounter("templates.problems");
  c_.internal_failures = stats_.GetCounter("errors.internal");
  c_.coord_wait_ns = stats_.GetCounter("coordinator.wait_ns");
  c_.coord_stops = stats_.GetCounter("coordinator.stops");
  c_.coord_stop_ns = stats_.GetCounter("coordinator.stop_ns");
  c_.coord_loaded_bytes = stats_.GetCounter("coordinator.loaded_bytes");
  c_.shared_bytes = stats_.GetCounter("bytes.shared");
  c_.unpaged_bytes = stats_.GetCounter("bytes.unpaged");
  c_.ipc_export_refused = stats_.GetCounter("ipc.export_refused");
  c_.vmm_moved_out_bytes = stats_.GetCounter("vmm.moved_out_bytes");
  c_.vmm_moved_back_bytes = stats_.GetCounter("vmm.moved_back_bytes");
  c_.hook_latency_ns = stats_.GetHistogram("hook.launch_latency_ns");

  const ConfigParse& parse = HookConfigParse();
  for (const ConfigError& e : parse.errors) LogError("{} (the default stays in force)", e.ToString());
  for (const std::string& name : parse.unknown_variables) {
    // Error level, so the default level shows it: a misspelt name silently
    // leaves the setting at its default.
    LogError("{} is not an msched variable (misspelt?); ignored", name);
  }
  if (config().mode == Mode::kProfile && config().profile_trace.empty()) {
    LogWarn("MSCHED_MODE=profile without MSCHED_PROFILE_TRACE records nothing; run the program under msched-profile");
  }
  job_.SetConfigured(config().gpu_memory.value_or(0));
  if (config().mode != Mode::kOff) LoadTemplates();
  if (!config().stats_path.empty()) std::atexit(WriteStatsAtExit);
  JobTrace::Start(config(), c_);
  LogInfo("mode {}, {} kernel templates loaded", ModeName(config().mode), templates_.size());
}

void Runtime::LoadTemplates() {
  // An installed library finds the shipped templates relative to its own
  // file (<libdir>/msched -> <datadir>/msched/templates, the same path under
  // any prefix); a library in a build tree has none there and uses the
  // source tree's. A library copied elsewhere may have neither: no shipped
  // templates is no error (MSCHED_TEMPLATES still loads).
  auto is_dir = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  std::vector<std::string> paths;
  static const char kInThisLibrary = 0;
  Dl_info self{};
  std::string installed;
  if (dladdr(&kInThisLibrary, &self) != 0 && self.dli_fname != nullptr && std::strchr(self.dli_fname, '/')) {
    const std::string lib = self.dli_fname;
    installed = lib.substr(0, lib.rfind('/') + 1) + MSCHED_TEMPLATES_FROM_LIBDIR;
  }
  if (!config().shipped_templates) {
    // MSCHED_SHIPPED_TEMPLATES=off: only the user's own.
  } else if (!installed.empty() && is_dir(installed)) {
    paths.push_back(installed);
  } else if (is_dir(MSCHED_SHIPPED_TEMPLATES_DIR)) {
    paths.push_back(MSCHED_SHIPPED_TEMPLATES_DIR);
  }
  paths.insert(paths.end(), config().template_paths.begin(), config().template_paths.end());
  std::vector<TemplateProblem> problems;
  templates_.LoadPaths(paths, &problems);
  // Error level (shown by default): a templates file that cannot be read or
  // has broken entries silently costs the predictions it was meant to give.
  for (const TemplateProblem& p : problems) LogError("templates: {}", p.ToString());
  c_.templates_loaded->Set(templates_.size());
  c_.template_problems->Set(problems.size());
}

void Runtime::Fail(const std::string& where, const std::string& why) {
  c_.internal_failures->Add();
  hot_.passthrough.store(true, std::memory_order_relaxed);
  LogOnce("fail:" + where, spdlog::level::err,
          "internal failure in " + where + ": " + why + "; msched passes every call through from now on");
}

void Runtime::LearnDeviceMemory() {
  if (job_.budget().device != 0) return;
  size_t free = 0, total = 0;
  const auto info = RealDriver().cuMemGetInfo_v2;
  if (info != nullptr && info(&free, &total) == CUDA_SUCCESS) job_.SetDevice(total);
}

void Runtime::CaptureBegan(CUstream stream) {
  capturing_streams_.insert(stream);
  hot_.capturing.store(static_cast<int>(capturing_streams_.size()));
}

void Runtime::CaptureEnded(CUstream stream) {
  capturing_streams_.erase(stream);
  hot_.capturing.store(static_cast<int>(capturing_streams_.size()));
}

bool Runtime::SynchronizedAll(CUstream stream, bool whole_context) {
  const bool everything = whole_context || streams_since_sync_.empty() ||
                          (streams_since_sync_.size() == 1 && *streams_since_sync_.begin() == stream);
  if (everything) streams_since_sync_.clear();
  return everything;
}

void Runtime::CountUnpaged() {
  c_.shared_bytes->Set(job_.shared_bytes());
  c_.unpaged_bytes->Set(job_.unpaged_bytes());
}

void Runtime::AddShared(int64_t delta) {
  job_.AddShared(delta);
  CountUnpaged();
  if (delta > 0) {
    c_.alloc_pinned->Add();
    c_.alloc_pinned_bytes->Add(static_cast<uint64_t>(delta));
  }
}

std::string Runtime::StatsJson() {
  nlohmann::json j = nlohmann::json::parse(stats_.ToJson());
  j["pid"] = getpid();
  j["mode"] = ModeName(config().mode);
  {
    MutexLock lock(&pool_mu_);
    j["pool"]["reserved_bytes"] = pool_.reserved_bytes();
    j["pool"]["in_use_bytes"] = pool_.in_use_bytes();
  }
  {
    MutexLock lock(&mu_);
    const JobBudget& b = job_.budget();
    j["memory"] = {{"budget", b.Total()},
                   {"budget_configured", b.configured},
                   {"budget_device", b.device},
                   {"budget_granted", b.granted},
                   {"pinned", b.pinned},
                   {"managed", job_.manager().managed_bytes()},
                   {"resident_estimate", job_.manager().resident_bytes()}};
  }
  return j.dump(2) + "\n";
}

}  // namespace msched::hook

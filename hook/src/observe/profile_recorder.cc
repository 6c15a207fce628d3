#include "observe/profile_recorder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>

#include "base/mutex.h"
#include "base/thread_annotations.h"

#include "interpose/driver_functions.h"
#include "job/cuda_device_ops.h"
#include "job/device_env.h"
#include "observe/cupti_faults.h"
#include "observe/log.h"
#include "profile/touched_modes.h"
#include "profile/trace.h"

namespace msched::hook {
namespace {

std::string ProgramName() {
  std::ifstream in("/proc/self/cmdline");
  std::string argv0;
  std::getline(in, argv0, '\0');
  return argv0;
}

}  // namespace

struct ProfileRecorder::State {
  std::once_flag opened;
  int fd = -1;  // -1: not recording
  CuptiFaults* cupti = nullptr;
  Mutex launch_mu;                               // serialises profiled launches
  Mutex io_mu MSCHED_ACQUIRED_AFTER(launch_mu);  // one line at a time; taken last
  uint64_t seq MSCHED_GUARDED_BY(launch_mu) = 0;
  uint64_t last_return_ns MSCHED_GUARDED_BY(launch_mu) = 0;  // the device clock as the last recorded launch returned
  std::set<std::string> noted MSCHED_GUARDED_BY(launch_mu);

  void Write(const std::string& line) MSCHED_EXCLUDES(io_mu) {
    MutexLock lock(&io_mu);
    std::string text = line + "\n";
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        LogOnce("trace-write", spdlog::level::err,
                std::string("cannot write the profile trace: ") + std::strerror(errno));
        return;
      }
      done += static_cast<size_t>(n);
    }
  }

  void Open(const Config& config) {
    HookScope scope;  // CUPTI may call the driver: straight through
    // A new file only, private to the user: an existing file or symlink (in
    // a shared /tmp, perhaps another user's) must never receive the trace.
    auto create = [](const std::string& path) {
      return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    };
    std::string path = config.profile_trace;
    fd = create(path);
    if (fd < 0 && errno == EEXIST) {
      // Another process of the program (a launcher's workers, each with CUDA
      // of its own) holds the trace: this one records beside it, at
      // TRACE.<pid>, which msched-profile reads and fits with the others
      // (TraceOfProcess in profile/trace.h).
      path = TraceOfProcess(config.profile_trace, static_cast<uint64_t>(::getpid()));
      fd = create(path);
      if (fd >= 0) LogInfo("the profile trace '{}' is taken; this process records to '{}'", config.profile_trace, path);
    }
    if (fd < 0 && errno == EEXIST) {
      LogError(
          "the profile trace '{}' already exists; msched writes a trace only to a new file and never through a "
          "symlink (remove it or name another path); nothing is recorded",
          path);
      return;
    }
    if (fd < 0) {
      LogError("cannot create the profile trace '{}': {}", path, std::strerror(errno));
      return;
    }
    // Held until the process ends: msched-profile waits for every writer's
    // lock to go before it reads, so a process that outlives the program
    // is not read half-written.
    (void)::flock(fd, LOCK_SH);
    // A driver that reports exactly what each launch touched (the
    // simulator) needs no CUPTI.
    const bool exact = DeviceEnv::Get().LastLaunchAccesses().has_value();
    std::string why;
    if (!exact) cupti = CuptiFaults::Start(&why);
    const char* source = exact ? "simulator" : cupti ? "cupti" : "none";
    Write(TraceHeaderLine(source, exact ? 1 : CuptiFaults::kPrecision, ProgramName()));
    if (!exact && cupti == nullptr) {
      Write(TraceNoteLine("no source of touched memory: " + why + "; launches are recorded without it"));
    } else if (cupti != nullptr) {
      Write(
          TraceNoteLine("managed memory was moved to the host and advised read-mostly before each launch, so "
                        "latencies include fault servicing, and writes fault as writes: a range is written "
                        "where a write fault fell in it"));
    }
  }
};

ProfileRecorder* ProfileRecorder::Get(Runtime& rt) {
  if (rt.config().mode != Mode::kProfile || rt.config().profile_trace.empty()) return nullptr;
  static NoDestructor<State> state;  // never destroyed: launches may run during exit
  static NoDestructor<ProfileRecorder> recorder(state.get());
  std::call_once(state->opened, [&] { state->Open(rt.config()); });
  return state->fd < 0 ? nullptr : recorder.get();
}

void ProfileRecorder::Alloc(uint64_t base, uint64_t size) { s_->Write(TraceAllocLine(base, size)); }

void ProfileRecorder::Free(uint64_t base) { s_->Write(TraceFreeLine(base)); }

CUresult ProfileRecorder::Launch(Runtime& rt, const KernelInfo& kernel, const ArgView& args, const LaunchDims& dims,
                                 const std::function<CUresult()>& launch) {
  State& s = *s_;
  MutexLock serial(&s.launch_mu);
  if (!kernel.layout_known || args.layout() == nullptr) {
    if (s.noted.insert(kernel.name).second) {
      s.Write(TraceNoteLine("kernel '" + kernel.name +
                            "': the driver does not report its parameters (or their form is unreadable), "
                            "so its launches cannot be fitted"));
    }
    return launch();
  }
  const DriverFunctions& real = RealDriver();
  DeviceEnv& env = DeviceEnv::Get();
  const uint64_t entered = env.Now();
  const uint64_t host_ns = s.last_return_ns != 0 && entered > s.last_return_ns ? entered - s.last_return_ns : 0;
  auto synchronize = real.cuCtxSynchronize;
  if (synchronize) synchronize();  // earlier work done: the latency is this kernel's alone
  // Everything managed goes to the host, so the kernel's first touches
  // fault, and is advised read-mostly, so that its writes fault as writes
  // (src/profile/touched_modes.h says why); the advice comes off after.
  std::vector<ByteRange> managed;
  std::optional<CudaDeviceOps> ops;
  bool writes_fault = false;
  if (s.cupti != nullptr) {
    {
      MutexLock lock(&rt.mu());
      rt.allocs().ForEach([&](const Allocation& a) {
        if (IsManaged(a.kind)) managed.push_back(a.range());
      });
    }
    if (Result<CudaDeviceOps> made = CudaDeviceOps::ForCurrentContext(); made.ok()) {
      ops.emplace(std::move(*made));
      writes_fault = true;
      for (const ByteRange& r : managed) {
        (void)ops->Prefetch(r, /*to_device=*/false);
        writes_fault = ops->SetReadMostly(r, true).ok() && writes_fault;
      }
      (void)ops->SynchronizeTransfers();
    }
  }
  const uint64_t cupti_t0 = s.cupti ? s.cupti->Now() : 0;
  const uint64_t device_t0 = env.Now();  // the device clock: virtual time on the simulator

  const CUresult r = launch();
  if (r != CUDA_SUCCESS) return r;

  TraceLaunch l;
  std::optional<std::vector<TouchedRange>> exact = env.LastLaunchAccesses();
  if (exact) l.touched = std::move(*exact);
  if (synchronize) synchronize();
  l.latency_ns = env.Now() - device_t0;
  if (s.cupti) {
    l.touched = TouchedByMode(s.cupti->Collect(cupti_t0, s.cupti->Now()), writes_fault);
    if (ops) {
      for (const ByteRange& range : managed) (void)ops->SetReadMostly(range, false);
    }
  }

  l.seq = ++s.seq;
  l.kernel = kernel.name;
  l.layout = kernel.layout;
  for (size_t i = 0; i < l.layout.size(); ++i) {
    const uint8_t* bytes = args.ParamBytes(i);
    l.args.emplace_back(bytes, bytes + (bytes ? l.layout[i].size : 0));
  }
  l.dims = dims;
  l.host_ns = host_ns;
  s.Write(TraceLaunchLine(l));
  s.last_return_ns = env.Now();
  return r;
}

}  // namespace msched::hook

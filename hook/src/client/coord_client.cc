#include "client/coord_client.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "coord/unix_socket.h"
#include "interpose/driver_functions.h"
#include "interpose/entry_table.h"
#include "job/machine_gpu_of_context.h"
#include "job/residency.h"
#include "msched/no_destructor.h"
#include "observe/job_trace.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

constexpr auto kRetryEvery = std::chrono::milliseconds(200);
// MSCHED_COORD=auto: the longest a job waits for a coordinator's answer
// before running alone.
constexpr auto kAutoAnswerWait = std::chrono::seconds(5);
constexpr auto kJoinLaterEvery = std::chrono::seconds(1);

std::string ProgramName() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name.empty() ? "job" : name.substr(0, proto::kMaxName);
}

}  // namespace

std::atomic<CoordClient*> CoordClient::active_{nullptr};

CoordClient* CoordClient::Get(Runtime& rt) {
  const Config& config = rt.config();
  if (config.coord == CoordMode::kOff || !rt.converting() || config.mode == Mode::kProfile) return nullptr;
  static NoDestructor<CoordClient> client(rt, config);  // its thread outlives main
  return client.get();
}

Status CoordClient::Register(Runtime& rt, uint64_t bytes) {
  MutexLock once(&register_mu_);
  if (registered_) return refusal_;
  Result<std::string> socket = ChooseSocket();
  // An allocation with no current context fails in the driver; the job
  // registers at its first allocation that has one.
  if (!socket.ok() && socket.status().code() == StatusCode::kUnavailable) return Status::Ok();
  registered_ = true;
  if (!socket.ok()) return JoinNone(socket.status().message(), "", spdlog::level::err);
  socket_ = *socket;
  {
    // The hello carries the device's size. Asked here, before the turn: a
    // driver call between the turn and the hello moves this job's clock on,
    // and a peer behind it then registered first in some runs (in about one
    // micro run in three, jobs were numbered in another order).
    MutexLock lock(&rt.mu());
    rt.LearnDeviceMemory();
  }
  // The job's context, for the idle timer of a real GPU (RunConnection).
  CUcontext ctx = nullptr;
  if (auto current = RealDriver().cuCtxGetCurrent; current != nullptr && !env_.lockstep()) current(&ctx);
  // Simulator: jobs register in virtual-time order (then the order the
  // coordinator numbers and groups them in is the same in every run); this
  // one holds its place on the clock until its welcome comes. Nothing from
  // here to the hello may make a driver call.
  lockstep_->WaitForTurn();
  Result<int> fd = Connect(bytes);
  if (!fd.ok()) {
    // A coordinator this job does not trust is an error to report; none
    // running is the normal case of a job without one.
    const bool untrusted = fd.status().code() == StatusCode::kPermissionDenied;
    const Status alone =
        JoinNone(fd.status().message(), " after waiting " + std::to_string(config_.coord_wait_ns / 1000000000) + " s",
                 untrusted ? spdlog::level::err : spdlog::level::info);
    if (alone.ok() && !untrusted) {
      LogInfo("looking for a coordinator at {} every {} s: this job joins one when it starts", socket_,
              kJoinLaterEvery.count());
      std::thread(&CoordClient::JoinWhenOneAppears, this, ctx).detach();
    }
    return alone;
  }
  connection_.Use(*fd);
  RunConnection(ctx, /*here=*/false);
  const bool required = config_.coord == CoordMode::kRequired;
  const auto answer_wait =
      required ? std::chrono::nanoseconds(config_.coord_wait_ns)
               : std::min<std::chrono::nanoseconds>(kAutoAnswerWait, std::chrono::nanoseconds(config_.coord_wait_ns));
  {
    MutexLock lock(&side_.mu());
    connection_.mu().AssertHeld();
    const auto deadline = std::chrono::steady_clock::now() + answer_wait;
    bool answered = side_.welcomed() || !connection_.refused().empty() || side_.dropped();
    for (auto now = std::chrono::steady_clock::now(); !answered && now < deadline;
         now = std::chrono::steady_clock::now()) {
      changed_.WaitFor(&side_.mu(), deadline - now);
      answered = side_.welcomed() || !connection_.refused().empty() || side_.dropped();
    }
    if (!answered || side_.dropped()) {
      const std::string what =
          "the coordinator at " + socket_ +
          (side_.dropped() ? " closed the connection without welcoming this job (see its log)"
                           : " did not answer within " + std::to_string(answer_wait.count() / 1000000) + " ms");
      if (required) {
        refusal_ = Status::Unavailable("MSCHED_COORD=required, but " + what);
        LogError("{}; this job's allocations fail", refusal_.message());
        connection_.GiveUp();
        return refusal_;
      }
      // Alone for now; the reader thread keeps the connection (or retries),
      // so the job joins if the coordinator answers later.
      LogError("{}; running alone", what);
      return Status::Ok();
    }
  }
  std::atexit(SayGoodbye);
  WaitTurn(rt);  // queued jobs wait here for admission; refusals arrive here
  MutexLock lock(&side_.mu());
  connection_.mu().AssertHeld();
  if (!connection_.refused().empty()) {
    refusal_ = Status::ResourceExhausted("the coordinator refused this job: " + connection_.refused());
    LogError("{}; its allocations fail with CUDA_ERROR_OUT_OF_MEMORY", refusal_.message());
  }
  return refusal_;
}

Status CoordClient::JoinNone(const std::string& why, const std::string& waited, spdlog::level::level_enum alone_level) {
  if (config_.coord == CoordMode::kRequired) {
    refusal_ = Status::Unavailable("MSCHED_COORD=required, but " + why + waited);
    LogError("{}; this job's allocations fail", refusal_.message());
    return refusal_;
  }
  Logger().log(alone_level, "{}; running alone", why);
  return Status::Ok();
}

std::string CoordClient::JobName(const Config& config) {
  return config.job_name.empty() ? ProgramName() : config.job_name;
}

Result<std::string> CoordClient::ChooseSocket() const {
  if (!config_.socket_path.empty()) return config_.socket_path;
  // The first allocation's context is the job's: its GPU's coordinator.
  Result<int> gpu = MachineGpuOfCurrentContext();
  if (!gpu.ok() && gpu.status().code() == StatusCode::kUnavailable) return gpu.status();
  if (!gpu.ok()) {
    // Joining another GPU's coordinator would hold that GPU's jobs back for
    // memory this job does not take there.
    return Status::NotFound("cannot tell which of the machine's GPUs this job uses (" + gpu.status().message() +
                            "), so not which coordinator to join; set MSCHED_SOCKET");
  }
  std::string socket = CoordinatorSocket(config_, *gpu);
  LogInfo("this job is on the machine's GPU {}: its coordinator is at {}", *gpu, socket);
  return socket;
}

Result<int> CoordClient::Connect(uint64_t allocated) {
  const auto give_up = std::chrono::steady_clock::now() + (config_.coord == CoordMode::kRequired
                                                               ? std::chrono::nanoseconds(config_.coord_wait_ns)
                                                               : std::chrono::nanoseconds(0));
  Result<int> fd = ConnectToCoordinator(socket_);
  while (!fd.ok() && fd.status().code() != StatusCode::kPermissionDenied &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(kRetryEvery);
    fd = ConnectToCoordinator(socket_);
  }
  if (!fd.ok()) return fd.status();
  proto::Hello h;
  h.declared_mem = config_.job_memory.value_or(0);
  h.allocated = side_.Hello(allocated);
  {
    MutexLock lock(&rt_.mu());
    h.device_total = rt_.job().budget().device;  // learnt in Register
  }
  h.now_ns = env_.Now();
  h.priority = config_.priority;
  h.job_class = config_.job_class;
  const std::string name = JobName(config_);
  h.name = proto::SanitizeName(name);
  if (name.compare(0, h.name.size(), h.name) != 0) {
    LogOnce("job-name", spdlog::level::err,
            "the job name '" + h.name +
                "' (MSCHED_JOB_NAME) had bytes that are not printable UTF-8; those were "
                "replaced by '?'" +
                (h.name.size() < name.size() ? " and it was cut" : ""));
  } else if (h.name.size() < name.size()) {
    // Documented (msched help), so not an error: said for whoever reads the job's log.
    LogOnce("job-name", spdlog::level::info,
            "the job name (MSCHED_JOB_NAME) is longer than " + std::to_string(proto::kMaxName) +
                " bytes; it shows as '" + h.name + "'");
  }
  if (Status s = SendMessage(*fd, h); !s.ok()) {
    ::close(*fd);
    return s;
  }
  return fd;
}

void CoordClient::RunConnection(void* ctx, bool here) {
  // On a real GPU nothing else sees an idle job's time pass (on the
  // simulator, its idle alarm does, in virtual time): the timer thread
  // carries out a yield in the job's context.
  if (!env_.lockstep()) {
    std::thread([this, ctx] {
      if (auto set = RealDriver().cuCtxSetCurrent; set != nullptr && ctx != nullptr) set(static_cast<CUcontext>(ctx));
      idle_timer_.Run();
    }).detach();
  }
  if (here) {
    connection_.ReadLoop();
  } else {
    std::thread(&CoordConnection::ReadLoop, &connection_).detach();
  }
}

void CoordClient::JoinWhenOneAppears(void* ctx) {
  Result<int> fd = Status::Unavailable("not yet");
  while (!fd.ok() && fd.status().code() != StatusCode::kPermissionDenied) {
    std::this_thread::sleep_for(kJoinLaterEvery);
    fd = Connect(0);  // what the job holds now (JobSide::Hello)
  }
  if (!fd.ok()) {
    LogWarn("cannot join the coordinator at {} ({}); running alone", socket_, fd.status().message());
    return;
  }
  LogWarn("a coordinator started at {}: this job, running alone until now, joins it", socket_);
  std::atexit(SayGoodbye);  // the welcome makes this job Active(); its goodbye frees its place
  connection_.Use(*fd);
  RunConnection(ctx, /*here=*/true);
}

void CoordClient::Welcomed(const proto::Welcome& w) {
  side_.OnWelcome(w);
  progress_.Welcomed(w.job, w.admitted);
  env_.SetIdleAlarm(w.idle_yield_ns, &CoordClient::OnIdleAlarm);
  active_.store(this, std::memory_order_release);
  LogInfo("registered with the coordinator as job {}{}", w.job, w.admitted ? "" : " (queued)");
}

void CoordClient::Refused() { active_.store(nullptr, std::memory_order_release); }

bool CoordClient::Lost(const std::string& why) {
  if (active_.exchange(nullptr) != nullptr) LogWarn("{}; running alone until a coordinator returns", why);
  const bool welcomed = side_.ConnectionLost();
  MutexLock lock(&side_.mu());
  orders_.mu().AssertHeld();
  orders_.Clear();
  changed_.NotifyAll();
  return welcomed;
}

Result<int> CoordClient::Reconnect() {
  Result<int> fd = Connect(0);  // what the job holds (JobSide::Hello)
  if (fd.ok()) LogWarn("connected again to a coordinator at {}", socket_);
  return fd;
}

void CoordClient::ReportUsage(uint64_t coming) {
  MutexLock order(&side_.usage_mu());
  uint64_t bytes = coming;
  {
    MutexLock lock(&rt_.mu());
    bytes += rt_.allocs().total_bytes();
  }
  side_.ReportUsage(bytes, Active() != nullptr);
}

// The faults only a driver that counts them reports (0 on a GPU, whose
// faults only CUPTI sees).
proto::JobCounters CoordClient::Counters() {
  const HookCounters& c = rt_.counters();
  return {env_.Faults().value_or(0), c.bytes_prefetched->value(), c.peak_over_budget->value(), c.shared_bytes->value(),
          c.unpaged_bytes->value() + creating_unpaged_.load()};
}

void CoordClient::Send(const proto::Message& m) {
  // Simulator: said at the job's turn, when no other job is behind it on
  // the clock, so that no job sees a decision dated after its own moment
  // (a stop's reply follows a synchronisation that moved the clock on).
  lockstep_->WaitForTurn();
  connection_.Send(m);
}

void CoordClient::HoldUntilHeard() {
  MutexLock lock(&side_.mu());
  lockstep_->HoldWhile(&Lockstep::Unheard, &side_.mu(), &changed_);
}

void CoordClient::SayGoodbye() {
  CoordClient* c = Active();
  if (c == nullptr) return;
  c->progress_.Done();
  c->Send(proto::Goodbye{c->env_.Now(), c->Counters()});
  // The goodbye may wake waiting jobs at this moment of the clock; leaving
  // the simulator first would let the running ones pass them.
  c->HoldUntilHeard();
}

GatePass CoordClient::WaitAtGate(Runtime& rt) {
  for (;;) {
    WaitTurn(rt);
    if (Active() != this) return {};  // alone now: no gate
    if (gate_.Enter()) return GatePass(&gate_);
  }
}

}  // namespace msched::hook

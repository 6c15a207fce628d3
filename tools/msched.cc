// msched: the command line.
//   msched run [OPTIONS] -- CMD [ARGS...]   run a job under libmsched (starting a coordinator if none runs)
//   msched status [--json]                  the coordinator's jobs
//   msched pause|resume [--no-wait] [--timeout D] JOB
//                                           stop a job and evict its memory / bring it back,
//                                           returning once it is done (or --no-wait: once asked)
//   msched priority JOB N                   change a job's priority (-100..100)
//   msched bench [SCENARIO...] [OPTIONS]     the benchmark suite (see msched bench --help)
//   msched help                             this text and every MSCHED_* variable
// JOB is a job id or a job's name. Exit status: 0 done; 1 the request
// failed; 2 usage. Any command takes --gpu N (the coordinator of the
// machine's GPU N) or --socket PATH (one coordinator's socket); with
// neither, MSCHED_SOCKET, else GPU 0's.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/libmsched_path.h"
#include "base/machine_gpu.h"
#include "base/subprocess.h"
#include "coord/unix_socket.h"
#include "msched/config.h"
#include "msched/protocol.h"
#include "status_table.h"
#include "suite/bench_command.h"
#include "tool_paths.h"
#include "trace_merge.h"
#include "version.h"

namespace msched {
namespace {

using nlohmann::json;

// How long pause and resume wait for the job by default.
constexpr uint64_t kDefaultControlWait = 60'000'000'000;

constexpr char kUsage[] =
    "usage: msched run [--gpu N] [--mem SIZE] [--class short|long|service] [--priority N] [--name NAME] [--mode MODE]\n"
    "                  [--gpu-memory SIZE] [--templates PATHS] [--coord auto|required|off] [--] CMD [ARGS...]\n"
    "       msched status [--json]\n"
    "       msched pause|resume [--no-wait] [--timeout DURATION] JOB | msched priority JOB N\n"
    "       msched bench [SCENARIO...] [--device PROFILE] [--quick] [--out DIR]   (msched bench --help)\n"
    "       msched trace merge OUT FILE...   (one timeline from mschedd --trace's and the jobs' MSCHED_TRACE files)\n"
    "       msched help | --version\n"
    "JOB is a job's id, as msched status shows it, or its name. pause returns once the job's launches are held\n"
    "and its memory is on the host, resume once it runs again (at most --timeout, default 60s; --no-wait: at once).\n"
    "Every command takes --gpu N, the coordinator of the machine's GPU N (gpu<N>.sock in MSCHED_SOCKET_DIR or\n"
    "the default directory), or --socket PATH; with neither, MSCHED_SOCKET, else GPU 0's.\n"
    "msched run --gpu N runs the job on GPU N alone (CUDA_VISIBLE_DEVICES=N, CUDA_DEVICE_ORDER=PCI_BUS_ID);\n"
    "without it, the job joins the coordinator of each GPU it uses, and msched run starts those of the GPUs\n"
    "in CUDA_VISIBLE_DEVICES, read as the driver reads it (it ends at the first index the machine has no GPU\n"
    "for), else GPU 0's.\n";

int Usage() {
  std::cerr << kUsage;
  return 2;
}

Result<proto::ControlReply> Ask(const std::string& socket, const proto::Control& request) {
  Result<int> fd = ConnectToCoordinator(socket);
  if (!fd.ok() && fd.status().code() == StatusCode::kPermissionDenied) return fd.status();
  if (!fd.ok()) return Status::Unavailable(fd.status().message() + " (is mschedd running?)");
  Status s = SendMessage(*fd, request);
  Result<proto::Message> reply = s.ok() ? ReceiveMessage(*fd, 10000) : Result<proto::Message>(s);
  ::close(*fd);
  if (!reply.ok()) return reply.status();
  if (auto* r = std::get_if<proto::ControlReply>(&*reply)) return *r;
  return Status::Corruption("the coordinator answered with something else");
}

int ShowStatus(const std::string& socket, bool as_json) {
  Result<proto::ControlReply> r = Ask(socket, proto::Control{});
  if (!r.ok()) {
    std::cerr << "msched: " << r.status().message() << "\n";
    return 1;
  }
  // --json passes the coordinator's document through unchanged: its fields
  // are the stable interface (docs/operate.md), the table is for people.
  if (as_json) {
    std::cout << r->text << "\n";
    return 0;
  }
  const json j = json::parse(r->text, nullptr, false);
  if (!j.is_object()) {
    std::cerr << "msched: the coordinator's status is not a JSON object\n";
    return 1;
  }
  std::cout << RenderStatus(j, OutputWidth(STDOUT_FILENO));
  return 0;
}

// JOB as typed: a job id (digits only), or else a job's name. Nothing, a
// sign (a negative id, or an option) and an id too large for one are usage
// errors (InvalidArgument): strtoull would read "-1" as 2^64-1.
Result<std::optional<uint64_t>> ParseJobSpec(const std::string& spec) {
  if (spec.empty() || spec[0] == '-' || spec[0] == '+') {
    return Status::InvalidArgument("'" + spec + "' is not a job: give a job id (1, 2, ...) or a job's name");
  }
  if (spec.find_first_not_of("0123456789") != std::string::npos) return std::optional<uint64_t>();
  uint64_t id = 0;
  if (std::from_chars(spec.data(), spec.data() + spec.size(), id).ec != std::errc()) {
    return Status::InvalidArgument("job id " + spec + " is too large");
  }
  return std::optional<uint64_t>(id);
}

// The coordinator's status document; not an object when it is malformed.
Result<json> StatusDocument(const std::string& socket) {
  Result<proto::ControlReply> r = Ask(socket, proto::Control{});
  if (!r.ok()) return r.status();
  return json::parse(r->text, nullptr, false);
}

// The id of the one live job named `name`.
Result<uint64_t> JobNamed(const std::string& socket, const std::string& name) {
  const Result<json> j = StatusDocument(socket);
  if (!j.ok()) return j.status();
  std::vector<uint64_t> found;
  if (j->is_object()) {
    for (const json& job : (*j)["jobs"]) {
      if (job.value("name", std::string()) == name && job.value("state", std::string()) != "finished") {
        found.push_back(job.value("id", uint64_t{0}));
      }
    }
  }
  if (found.size() == 1) return found[0];
  return Status::NotFound(found.empty() ? "no live job named '" + name + "'"
                                        : std::to_string(found.size()) + " jobs are named '" + name + "'; give its id");
}

// The job's entry in a status document, or null when it has none.
json JobIn(const json& status, uint64_t id) {
  if (!status.is_object() || !status.contains("jobs") || !status["jobs"].is_array()) return nullptr;
  for (const json& job : status["jobs"]) {
    if (job.is_object() && job.value("id", uint64_t{0}) == id) return job;
  }
  return nullptr;
}

// After the coordinator accepted a pause or a resume of job `id`: waits,
// reading its status, until the job has done it. A pause is done once the
// job answered its stop (its launches are held, its evictions complete);
// a resume once the job is on the GPU again, or queued for admission. 0
// when done; 1 when the job did not answer a pause within `timeout` (its
// memory may still be on the GPU). A resumed job that waits for its turn
// behind others is resumed: said, and 0.
int AwaitControl(const std::string& socket, proto::ControlOp op, uint64_t id, uint64_t timeout_ns) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
  const std::string job = "job " + std::to_string(id);
  const char* what = op == proto::ControlOp::kPause ? "pause" : "resume";
  json last;
  for (;;) {
    // A coordinator that is gone took the pause (or resume) with it: the job
    // runs on as it was, and saying it was done would be false.
    const Result<json> doc = StatusDocument(socket);
    if (!doc.ok()) {
      std::cerr << "msched: the coordinator at " << socket << " stopped answering while " << job << "'s " << what
                << " was under way (" << doc.status().message() << "); the " << what
                << " is lost with it, and the job runs on as it was\n";
      return 1;
    }
    const json j = JobIn(*doc, id);
    if (!j.is_object()) {
      std::cerr << "msched: " << job << " is gone from the coordinator at " << socket << " before its " << what
                << " was done\n";
      return 1;
    }
    last = j;
    const std::string state = last.value("state", std::string());
    if (state == "finished") {
      std::cout << job << " finished\n";
      return 0;
    }
    if (op == proto::ControlOp::kPause && state == "paused" && !last.value("pausing", false)) {
      std::cout << job << " paused: its launches are held and its memory is on the host ("
                << FormatBytes(last.value("resident_bytes", uint64_t{0})) << " on the GPU)\n";
      return 0;
    }
    if (op == proto::ControlOp::kResume && (last.value("on_gpu", false) || state == "waiting")) {
      std::cout << job << (state == "waiting" ? " resumed, queued for admission\n" : " resumed: it runs\n");
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.3g s", static_cast<double>(timeout_ns) / 1e9);
  if (op == proto::ControlOp::kPause) {
    std::cerr << "msched: " << job << " is paused, but has not answered in " << waited
              << ": its launches are held once it does; its memory may still be on the GPU\n";
    return 1;
  }
  std::cout << job << " resumed; not on the GPU after " << waited << ": it waits for its turn ("
            << (last.is_object() ? last.value("wait_reason", std::string()) : std::string()) << ")\n";
  return 0;
}

// Asks the coordinator for `op` on the job `spec` names; with `wait_ns` > 0,
// waits at most that long for the job to have done it (AwaitControl).
int SendControl(const std::string& socket, proto::ControlOp op, const std::string& spec, int priority,
                uint64_t wait_ns = 0) {
  const Result<std::optional<uint64_t>> id = ParseJobSpec(spec);
  if (!id.ok()) {
    std::cerr << "msched: " << id.status().message() << "\n";
    return 2;
  }
  const Result<uint64_t> job = *id ? Result<uint64_t>(**id) : JobNamed(socket, spec);
  if (!job.ok()) {
    std::cerr << "msched: " << job.status().message() << "\n";
    return 1;
  }
  proto::Control request;
  request.op = op;
  request.job = *job;
  request.priority = priority;
  Result<proto::ControlReply> r = Ask(socket, request);
  if (!r.ok() || !r->ok) {
    std::cerr << "msched: " << (r.ok() ? r->text : r.status().message()) << "\n";
    return 1;
  }
  if (wait_ns == 0) std::cout << r->text << "\n";
  return wait_ns == 0 ? 0 : AwaitControl(socket, op, *job, wait_ns);
}

// Starts mschedd detached (its own session, reparented to init), logging
// beside its socket under the socket's name (gpu1.sock: mschedd-gpu1.log),
// and waits for it to answer.
Status StartCoordinator(const std::string& socket) {
  const std::string daemon = ExecutableDir() + "/mschedd";
  if (access(daemon.c_str(), X_OK) != 0) return Status::NotFound("mschedd is not beside msched (" + daemon + ")");
  const size_t slash = socket.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : socket.substr(0, slash);
  std::string name = slash == std::string::npos ? socket : socket.substr(slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".sock") == 0) name.resize(name.size() - 5);
  const std::string log = dir + "/mschedd-" + name + ".log";
  // The log opens before mschedd makes its socket's directory: on a first
  // run ($XDG_RUNTIME_DIR/msched, /tmp/msched-<uid>) make it here, private
  // as mschedd would; mschedd still checks whom it belongs to.
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  const pid_t child = fork();
  if (child < 0) return Status::IoError("fork failed");
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    execl(daemon.c_str(), "mschedd", "--socket", socket.c_str(), "--idle-exit", "60s", "--log", log.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 100; ++i) {
    if (Result<int> fd = ConnectToCoordinator(socket); fd.ok()) {
      ::close(*fd);
      std::cerr << "msched: no coordinator ran at " << socket
                << ": started one for this job (it exits a minute after its last job; log " << log << ")\n";
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("mschedd did not come up at " + socket + " (see " + log + ")");
}

// argv[argc] is null. Options come first, as `--opt VALUE` or `--opt=VALUE`;
// the command starts after `--` or at the first argument that is not an option.
// PyTorch's expandable segments map memory through VMM (cuMemCreate,
// cuMemMap), which msched cannot make managed: it moves it whole between
// turns (docs/design.md, "VMM memory") but cannot page it, so such a job's
// budget must hold all of it. The user's choice stands; `msched run` says
// what it costs when the user asks for expandable segments (PyTorch's
// default, fixed segments, is the allocator msched can page).
void NoteTorchAllocator() {
  const char* chosen = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (chosen != nullptr && std::strstr(chosen, "expandable_segments:True") != nullptr) {
    std::cerr << "msched: PYTORCH_CUDA_ALLOC_CONF asks for expandable segments: msched moves that memory whole "
                 "between turns but cannot page it, so the job's budget must hold all of it\n";
  }
}

// Where a command finds its coordinator: --socket; else --gpu's, whatever
// MSCHED_SOCKET says; else as a job on GPU 0 finds it.
struct Target {
  std::optional<std::string> socket;  // --socket
  std::optional<int> gpu;             // --gpu
  // The socket of GPU `gpu_index`'s coordinator, which a job there joins.
  std::string SocketOf(int gpu_index) const {
    return socket ? *socket : gpu ? GpuSocketFromEnvironment(gpu_index) : SocketFromEnvironment(gpu_index);
  }
  std::string Socket() const { return SocketOf(gpu.value_or(0)); }
  // Both --socket and --gpu: refused (said on stderr).
  bool Ambiguous() const {
    if (!socket || !gpu) return false;
    std::cerr << "msched: --gpu and --socket both say which coordinator; give one\n";
    return true;
  }
};

// --gpu's value: a machine GPU index.
std::optional<int> ParseGpu(const std::string& v) {
  Result<int64_t> n = ParseInteger(v, 0, kMaxGpuIndex);
  if (!n.ok()) {
    std::cerr << "msched: --gpu '" << v << "' is not a GPU index from 0 to " << kMaxGpuIndex << "\n";
    return std::nullopt;
  }
  return static_cast<int>(*n);
}

// Makes sure a coordinator answers at `socket`, starting one when none does;
// false when the job may not run (MSCHED_COORD=required and none came up).
bool EnsureCoordinator(const std::string& socket, CoordMode coord) {
  Result<int> fd = ConnectToCoordinator(socket);
  if (fd.ok()) {
    ::close(*fd);
    return true;
  }
  const Status s = fd.status().code() == StatusCode::kPermissionDenied ? fd.status() : StartCoordinator(socket);
  if (s.ok()) return true;
  std::cerr << "msched: cannot start a coordinator: " << s.message()
            << (coord == CoordMode::kRequired ? "" : "; the job runs alone") << "\n";
  return coord != CoordMode::kRequired;
}

int Run(Target target, int argc, char** argv) {
  // Options become the job's MSCHED_* variables, checked by the same parser the library uses.
  static const std::map<std::string, std::string> kOptionVariable = {{"--mem", "MSCHED_MEM"},
                                                                     {"--class", "MSCHED_CLASS"},
                                                                     {"--priority", "MSCHED_PRIORITY"},
                                                                     {"--name", "MSCHED_JOB_NAME"},
                                                                     {"--mode", "MSCHED_MODE"},
                                                                     {"--gpu-memory", "MSCHED_GPU_MEMORY"},
                                                                     {"--templates", "MSCHED_TEMPLATES"},
                                                                     {"--coord", "MSCHED_COORD"}};
  std::map<std::string, std::string> env;
  int i = 0;
  while (i < argc) {
    std::string option = argv[i];
    if (option == "--") {
      ++i;
      break;
    }
    if (option.rfind("--", 0) != 0) break;  // the command
    std::string value;
    if (const size_t eq = option.find('='); eq != std::string::npos) {
      value = option.substr(eq + 1);
      option.resize(eq);
      ++i;
    } else if (i + 1 < argc) {
      value = argv[i + 1];
      i += 2;
    } else {
      std::cerr << "msched: " << option << " needs a value\n";
      return Usage();
    }
    if (option == "--socket") {
      target.socket = value;
      continue;
    }
    if (option == "--gpu") {
      target.gpu = ParseGpu(value);
      if (!target.gpu) return 2;
      continue;
    }
    auto it = kOptionVariable.find(option);
    if (it == kOptionVariable.end()) {
      std::cerr << "msched: unknown run option " << option << "\n";
      return Usage();
    }
    // A size typed on the command line names its unit: "--mem 8" meant 8
    // GiB far more often than 8 bytes. (The variables take bare bytes, as
    // scripts and the Slurm TaskProlog write them.)
    const bool is_size = option == "--mem" || option == "--gpu-memory";
    if (is_size && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
      std::cerr << "msched: " << option << " " << value << ": give the size with its unit, such as " << value
                << "GiB or " << value << "MiB (a bare number would be bytes)\n";
      return 2;
    }
    env[it->second] = value;
  }
  if (i >= argc) {
    std::cerr << "msched: run needs a command\n";
    return Usage();
  }
  if (target.Ambiguous()) return 2;
  // The job finds each GPU's coordinator itself (CoordinatorSocket) unless
  // told one socket; --gpu confines it to that GPU, whose coordinator it
  // then finds whatever MSCHED_SOCKET says.
  if (target.socket) env["MSCHED_SOCKET"] = *target.socket;
  // CUDA reads the index in its own order, fastest GPU first, unless told
  // to use nvidia-smi's, PCI bus order, which --gpu means.
  if (target.gpu) {
    env["CUDA_VISIBLE_DEVICES"] = std::to_string(*target.gpu);
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    ::unsetenv("MSCHED_SOCKET");
  }
  const ConfigParse parse = ParseConfig([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it != env.end() ? it->second.c_str() : std::getenv(name);
  });
  if (!parse.errors.empty()) {
    for (const ConfigError& e : parse.errors) std::cerr << "msched: " << e.ToString() << "\n";
    std::cerr << "msched: the job was not started\n";
    return 2;
  }
  Result<std::string> lib = FindLibmsched();
  if (!lib.ok()) {
    std::cerr << "msched: " << lib.status().message() << "\n";
    return 1;
  }
  env["LD_PRELOAD"] = PreloadWith(*lib);
  if (parse.config.mode != Mode::kOff) NoteTorchAllocator();
  // A user who started the job here hears of its waits (MSCHED_PROGRESS).
  if (std::getenv("MSCHED_PROGRESS") == nullptr) env.emplace("MSCHED_PROGRESS", "on");
  const CoordMode coord = parse.config.coord;
  if (coord != CoordMode::kOff && parse.config.mode != Mode::kOff) {
    // The coordinators of the machine's GPUs the job may use: those its
    // CUDA_VISIBLE_DEVICES (--gpu's, or the user's) gives it by index, as
    // the driver reads the list, which ends at the first index the machine
    // has no GPU for; else, with the variable unset, GPU 0's. A job on
    // another GPU runs alone unless its coordinator runs (docs/operate.md).
    const char* visible = target.gpu ? env["CUDA_VISIBLE_DEVICES"].c_str() : std::getenv("CUDA_VISIBLE_DEVICES");
    const Result<std::vector<int>> gpus =
        VisibleGpuIndices(visible, MachineGpuCount(std::getenv(kSimulatedGpusVariable)));
    std::set<std::string> sockets;
    for (int gpu : gpus.ok() ? *gpus : std::vector<int>{0}) sockets.insert(target.SocketOf(gpu));
    for (const std::string& socket : sockets) {
      if (!EnsureCoordinator(socket, coord)) return 1;
    }
  }
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  execvp(argv[i], argv + i);
  std::cerr << "msched: cannot run " << argv[i] << ": " << std::strerror(errno) << "\n";
  return errno == ENOENT ? 127 : 126;
}

// msched trace merge OUT FILE...
int TraceCommand(int argc, char** argv) {
  if (argc < 3 || std::string(argv[0]) != "merge") return Usage();
  const std::vector<std::string> inputs(argv + 2, argv + argc);
  const Result<size_t> events = MergeTraces(inputs, argv[1]);
  if (!events.ok()) {
    std::cerr << "msched trace merge: " << events.status().message() << "\n";
    return 1;
  }
  std::cout << "wrote " << *events << " events from " << inputs.size() << " files to " << argv[1] << "\n";
  return 0;
}

int Help() {
  std::cout << kUsage
            << "\nPyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) are VMM memory,"
               "\nwhich msched moves whole between turns but cannot page: the job's budget must hold all of it.\n"
            << "\nPer-job settings (environment variables, or msched run options):\n";
  for (const ConfigVariable& v : ConfigVariables()) {
    std::cout << "  " << v.name << "\n      " << v.meaning << "\n      accepted: " << v.accepted
              << "; default: " << v.default_value << "\n";
  }
  std::cout << "\nThe documentation is in share/doc/msched/ where msched is installed (docs/ in its source tree):\n"
               "quickstart.md first, then operate.md.\n";
  return 0;
}

int Main(int argc, char** argv) {
  // argv[argc] is the null that execvp needs after a job's arguments; the
  // copy keeps it, and `n` below never counts it.
  std::vector<char*> args(argv + 1, argv + argc + 1);
  Target target;
  // --socket and --gpu may come before the command, and anywhere after a
  // command other than run (whose options end where the job's begin).
  for (size_t i = 0; i + 2 < args.size();) {
    const std::string option = args[i];
    if (option == "run" && i == 0) break;
    if (option != "--socket" && option != "--gpu") {
      ++i;
      continue;
    }
    if (option == "--socket") {
      target.socket = args[i + 1];
    } else if (target.gpu = ParseGpu(args[i + 1]); !target.gpu) {
      return 2;
    }
    args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
  }
  if (args.size() == 1) return Usage();
  const std::string cmd = args[0];
  const int n = static_cast<int>(args.size()) - 2;
  char** rest = args.data() + 1;
  if (cmd == "help" || cmd == "--help" || cmd == "-h") return Help();
  if (cmd == "--version") return PrintVersion("msched");
  if (cmd == "run") return Run(target, n, rest);
  if (cmd == "trace") return TraceCommand(n, rest);
  if (target.Ambiguous()) return 2;
  const std::string socket = target.Socket();
  if (cmd == "bench") return bench::BenchMain(n + 1, args.data());
  if (cmd == "status") {
    if (n > 1 || (n == 1 && std::string(rest[0]) != "--json")) return Usage();
    return ShowStatus(socket, n == 1);
  }
  if (cmd == "pause" || cmd == "resume") {
    uint64_t wait_ns = kDefaultControlWait;
    std::vector<std::string> jobs;
    for (int i = 0; i < n; ++i) {
      const std::string a = rest[i];
      if (a == "--no-wait") {
        wait_ns = 0;
      } else if (a == "--timeout" && i + 1 < n) {
        const Result<uint64_t> d = ParseDurationNs(rest[++i]);
        if (!d.ok() || *d == 0) {
          std::cerr << "msched: --timeout '" << rest[i] << "' is not a positive duration (such as 30s or 2min)\n";
          return 2;
        }
        if (wait_ns != 0) wait_ns = *d;
      } else {
        jobs.push_back(a);
      }
    }
    if (jobs.size() != 1) return Usage();
    return SendControl(socket, cmd == "pause" ? proto::ControlOp::kPause : proto::ControlOp::kResume, jobs[0], 0,
                       wait_ns);
  }
  if (cmd == "priority" && n == 2) {
    int p = 0;
    const std::string v = rest[1];
    char* end = nullptr;
    const long parsed = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || parsed < kMinPriority || parsed > kMaxPriority) {
      std::cerr << "msched: priority '" << v << "' is not an integer from -100 to 100\n";
      return 2;
    }
    p = static_cast<int>(parsed);
    return SendControl(socket, proto::ControlOp::kPriority, rest[0], p);
  }
  return Usage();
}

}  // namespace
}  // namespace msched

int main(int argc, char** argv) { return msched::Main(argc, argv); }

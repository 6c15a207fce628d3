// msched-profile: learns each kernel's working-set template from one run.
//
//   msched-profile [-o OUT.templates.json] [--trace TRACE [--force]] [--report REPORT.md] -- PROGRAM [ARGS...]
//       runs PROGRAM under libmsched in profile mode, then analyses the trace;
//       TRACE (and TRACE.<digits>) may be replaced only where they hold
//       traces msched-profile wrote (--force: any regular file);
//   msched-profile analyze TRACE [TRACE...] [-o OUT.templates.json] [--report REPORT.md]
//       analyses traces saved earlier with --trace; several traces (runs of
//       one program at different sizes) are fitted together;
//   msched-profile check TEMPLATES TRACE [--report REPORT.md] [--json OUT.json]
//       measures how well templates (fitted at small sizes) predict what a
//       traced run (at full size) touched.
// The report (per-kernel template kind and held-out accuracy, in the form of
// the MSched paper's Table 1) goes to stdout; messages to stderr.
// A program of several CUDA processes leaves one trace per process (the
// first at TRACE, the others at TRACE.<pid>); they are fitted together, once
// every writer has finished (each holds a lock on its trace while it runs).
// Exit status: 0 done; 1 the program failed, a process of it was still
// writing its trace 10 s after the program ended, or nothing could be
// analysed (what was recorded is still analysed and written); 2 usage; 128+N
// stopped by signal N (SIGTERM, SIGINT or SIGHUP) while the program ran:
// the program gets the signal too, as do all its processes (msched-profile
// is their subreaper), and they are waited for; nothing is analysed.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/libmsched_path.h"
#include "base/subprocess.h"
#include "msched/bounded_input.h"
#include "profile/profile_report.h"
#include "profile/trace.h"
#include "tool_paths.h"
#include "version.h"

namespace msched {
namespace {

constexpr char kUsage[] =
    "usage: msched-profile [-o OUT.templates.json] [--trace TRACE [--force]] [--report REPORT.md] -- PROGRAM "
    "[ARGS...]\n"
    "       msched-profile analyze TRACE [TRACE...] [-o OUT.templates.json] [--report REPORT.md]\n"
    "       msched-profile check TEMPLATES TRACE [--report REPORT.md] [--json OUT.json]\n"
    "       msched-profile --help | --version\n"
    "Fit templates at two sizes of the program (two --trace runs, then analyze both): one size cannot tell\n"
    "which argument a region's size follows. See operate.md in the documentation (share/doc/msched/ where\n"
    "msched is installed, docs/ in its source tree).\n";

struct Options {
  std::string out, trace, report;
  std::vector<std::string> more_traces;  // analyze mode: the traces after the first
  std::vector<std::string> program;      // record mode
  bool analyze_only = false;
  bool force = false;           // --force: --trace may replace files that are not traces
  std::string check_templates;  // check mode: the templates to check on `trace`
  std::string check_json;       // check mode: the figures as JSON
};

void Say(const std::string& message) { std::cerr << "msched-profile: " << message << "\n"; }

bool ParseOptions(int argc, char** argv, Options* o) {
  int i = 1;
  if (i < argc && std::string(argv[i]) == "check") {
    if (argc < 4 || argv[2][0] == '-' || argv[3][0] == '-') return false;
    o->check_templates = argv[2];
    o->trace = argv[3];
    for (i = 4; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--report")
        o->report = argv[i + 1];
      else if (a == "--json")
        o->check_json = argv[i + 1];
      else
        return false;
    }
    return i == argc;
  }
  if (i < argc && std::string(argv[i]) == "analyze") {
    o->analyze_only = true;
    if (++i >= argc || argv[i][0] == '-') return false;
    o->trace = argv[i++];
    for (; i < argc && argv[i][0] != '-'; ++i) o->more_traces.push_back(argv[i]);
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--" && !o->analyze_only) {
      o->program.assign(argv + i + 1, argv + argc);
      return !o->program.empty();
    }
    if (a == "--force" && !o->analyze_only) {
      o->force = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    if (a == "-o" || a == "--output") {
      o->out = argv[++i];
    } else if (a == "--trace" && !o->analyze_only) {
      o->trace = argv[++i];
    } else if (a == "--report") {
      o->report = argv[++i];
    } else {
      return false;
    }
  }
  return o->analyze_only;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    Say("cannot write " + path);
    return false;
  }
  return true;
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The signals that stop msched-profile while the program runs. Each is
// passed on to the program, which is waited for: msched-profile must not
// exit and leave it running on alone, reparented to init. Handler and Main
// share lock-free atomics only.
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};
std::atomic<pid_t> g_program{0};    // the program while it runs; 0 before and after
std::atomic<int> g_stop_signal{0};  // the stop signal received, 0 if none

void PassOnToProgram(int signal, siginfo_t* info, void* /*context*/) {
  const int interrupted_errno = errno;  // kill may set it under the interrupted code's feet
  g_stop_signal.store(signal);
  // What the terminal sends (Ctrl-C, a hangup) is sent by the kernel to the
  // whole foreground process group, the program's included: once is enough.
  const pid_t program = g_program.load();
  if (program > 0 && info->si_code != SI_KERNEL) ::kill(program, signal);
  errno = interrupted_errno;
}

// Catches the stop signals for as long as it lives, but not one the caller
// of msched-profile has ignored (nohup's SIGHUP), which the program then
// ignores too.
class StopSignalsPassedOn {
 public:
  StopSignalsPassedOn() {
    struct sigaction pass_on {};
    pass_on.sa_sigaction = &PassOnToProgram;
    pass_on.sa_flags = SA_SIGINFO;
    sigemptyset(&pass_on.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i) {
      ::sigaction(kStopSignals[i], nullptr, &before_[i]);
      if (before_[i].sa_handler != SIG_IGN) ::sigaction(kStopSignals[i], &pass_on, nullptr);
    }
  }
  ~StopSignalsPassedOn() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &before_[i], nullptr);
  }
  StopSignalsPassedOn(const StopSignalsPassedOn&) = delete;
  StopSignalsPassedOn& operator=(const StopSignalsPassedOn&) = delete;

 private:
  struct sigaction before_[std::size(kStopSignals)];
};

// After a stop signal: the program's other processes (workers it started,
// reparented here once their parent exited) get it too and are waited for;
// those still alive after 5 s are killed. Without this, killing
// msched-profile left a multi-process program's CUDA workers running on,
// writing their traces.
void StopDescendants(int signal) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto reap = [] {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  };
  for (int sig = signal;;) {
    reap();
    const std::vector<pid_t> left = DescendantsOf(::getpid());
    if (left.empty()) return reap();  // those that died since the last look
    if (std::chrono::steady_clock::now() >= deadline && sig != SIGKILL) {
      Say(std::to_string(left.size()) + " processes of the program outlived the signal by 5 s; killing them");
      sig = SIGKILL;
    }
    for (pid_t pid : left) ::kill(pid, sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Makes room for this run's traces: `trace` and its siblings
// (SiblingTraces) are removed, so stale traces cannot pass for this run's,
// but only where they are traces msched-profile wrote (or empty files).
// Anything else at those paths (a device, a FIFO, a directory, a numbered
// backup, a rotated log) is the user's: refused, or with --force replaced
// when it is a regular file. Nothing that is not a regular file is ever
// removed.
bool ClearOldTraces(const Options& o) {
  std::vector<std::string> paths = {o.trace};
  for (std::string& sibling : SiblingTraces(o.trace)) paths.push_back(std::move(sibling));
  for (const std::string& path : paths) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // nothing there
    if (!S_ISREG(st.st_mode)) {
      Say(path +
          " exists and is not a regular file; msched-profile writes traces only to new files or to traces "
          "it wrote: choose another --trace");
      return false;
    }
    if (!o.force && !IsReplaceableTrace(path)) {
      Say(path +
          " exists and is not a trace msched-profile wrote; choose another --trace, or pass --force to "
          "replace it");
      return false;
    }
  }
  for (const std::string& path : paths) ::unlink(path.c_str());
  return true;
}

// Runs the program under the hook in profile mode. Returns its exit status
// (or -1 when it could not start). A stop signal meanwhile is passed on to
// it (g_stop_signal says which).
int Record(const Options& o) {
  Result<std::string> lib = FindLibmsched();
  if (!lib.ok()) {
    Say(lib.status().message());
    return -1;
  }
  SpawnOptions spawn;
  spawn.env = {{"LD_PRELOAD", PreloadWith(*lib)},
               {"MSCHED_MODE", "profile"},
               {"MSCHED_PROFILE_TRACE", o.trace},
               {"MSCHED_COORD", "off"}};
  // Workers of a multi-process program whose parent exits are reparented
  // here, not to init, so that a stop signal can still reach them all.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const StopSignalsPassedOn passed_on;
  Result<Subprocess> child = Subprocess::Spawn(o.program, spawn);
  if (!child.ok()) {
    Say("cannot start " + o.program[0] + ": " + child.status().message());
    return -1;
  }
  g_program.store(child->pid());
  // A signal that came while the program was being started found no program.
  if (const int signal = g_stop_signal.load(); signal != 0) child->Kill(signal);
  const int status = child->Wait();
  g_program.store(0);
  if (const int signal = g_stop_signal.load(); signal != 0) StopDescendants(signal);
  return status;
}

// Reads one trace, saying what was skipped; nullopt when nothing is usable.
std::optional<Trace> Load(const std::string& path, bool recorded_now) {
  TraceReadResult read = ReadTrace(path);
  if (!read.status.ok()) {
    if (access(path.c_str(), F_OK) != 0 && recorded_now) {
      Say("no trace was written: the program never allocated or launched through the CUDA driver, or libmsched "
          "was not loaded into it (a statically linked or setuid program ignores LD_PRELOAD)");
    } else {
      Say(read.status.message());
    }
    return std::nullopt;
  }
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < read.problems.size() && i < kShown; ++i) Say("skipped " + read.problems[i]);
  if (read.problems.size() > kShown) {
    Say("... and " + std::to_string(read.problems.size() - kShown) + " more lines skipped");
  }
  return std::move(read.trace);
}

// Waits until no process of the program holds a lock on any of `paths`
// (each writer holds one until it exits), for at most `seconds`. Says which
// are still being written then; false if any is.
bool WaitForWriters(const std::vector<std::string>& paths, int seconds) {
  bool all_done = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (const std::string& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;  // Load says why
    bool free = false;
    for (;;) {
      free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      if (free || (errno != EWOULDBLOCK && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() >= deadline || g_stop_signal.load() != 0) break;
      if (errno == EWOULDBLOCK) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::close(fd);
    if (!free) {
      Say("a process of the program is still writing " + path +
          " (it outlived the program); its launches so far "
          "are analysed, the rest are lost");
      all_done = false;
    }
  }
  return all_done;
}

int Analyse(const Options& o, std::vector<std::string> paths, bool program_failed) {
  std::vector<Trace> traces;
  paths.insert(paths.end(), o.more_traces.begin(), o.more_traces.end());
  for (const std::string& path : paths) {
    std::optional<Trace> t = Load(path, !o.analyze_only);
    if (!t) return 1;
    traces.push_back(std::move(*t));
  }
  Result<Trace> merged = MergeTraces(std::move(traces));
  if (!merged.ok()) {
    Say(merged.status().message());
    return 1;
  }
  const Trace& trace = *merged;
  if (trace.source == "none") {
    for (const std::string& n : trace.notes) Say(n);
    Say("the trace has no touched memory to fit (see above)");
    return 1;
  }
  if (trace.launches.empty()) {
    Say("the trace holds no kernel launches" +
        std::string(program_failed ? " (the program ended before its first launch)" : ""));
    return 1;
  }
  const ProfileReport report = Analyze(trace);
  const std::string text = FormatReport(report, trace, BaseName(o.trace));
  std::cout << text;
  if (!WriteFile(o.out, SerializeTemplates(report.templates))) return 1;
  if (!o.report.empty() && !WriteFile(o.report, text)) return 1;
  Say("wrote " + std::to_string(report.templates.kernels.size()) + " templates (" +
      std::to_string(report.templates.unpredictable.size()) + " kernels unpredictable) to " + o.out);
  if (report.one_size_kernels > 0) {
    Say("warning: " + std::to_string(report.one_size_kernels) +
        (report.one_size_kernels == 1 ? " kernel" : " kernels") +
        " ran at one size only (the same arguments in every call), so nothing pins how their regions grow "
        "with a size; run the program at a second size and fit both traces: msched-profile --trace b.trace -- "
        "PROGRAM (at the other size), then msched-profile analyze a.trace b.trace -o " +
        o.out);
  }
  return program_failed ? 1 : 0;
}

int Check(const Options& o) {
  std::optional<Trace> trace = Load(o.trace, false);
  if (!trace) return 1;
  std::string text, error;
  if (!ReadRegularFile(o.check_templates, kMaxTemplatesFileBytes, &text, &error)) {
    Say(error);
    return 1;
  }
  const TemplateLoadResult loaded = ParseTemplates(text, o.check_templates);
  for (const TemplateProblem& p : loaded.problems) Say(p.ToString());
  if (loaded.templates.kernels.empty()) {
    Say(o.check_templates + " holds no usable template");
    return 1;
  }
  const TemplateCheck check = CheckTemplates(loaded.templates, *trace);
  const std::string report = FormatCheck(check, *trace, BaseName(o.check_templates), BaseName(o.trace));
  std::cout << report;
  if (!o.report.empty() && !WriteFile(o.report, report)) return 1;
  return o.check_json.empty() || WriteFile(o.check_json, CheckJson(check)) ? 0 : 1;
}

int Main(int argc, char** argv) {
  Options o;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--version") return PrintVersion("msched-profile");
  if (!ParseOptions(argc, argv, &o)) {
    std::cerr << kUsage;
    return 2;
  }
  if (!o.check_templates.empty()) return Check(o);
  if (o.out.empty()) {
    o.out = (o.analyze_only ? BaseName(o.trace) : BaseName(o.program[0])) + ".templates.json";
  }
  if (o.analyze_only) return Analyse(o, {o.trace}, false);

  const bool keep_trace = !o.trace.empty();
  std::string private_dir;
  if (!keep_trace) {
    // A directory of our own (mkdtemp, mode 0700): in a shared /tmp a
    // predictable file name could be pre-created or a symlink by another user.
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/msched-profile-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      Say("cannot create a private directory for the trace (" + dir + "): " + std::strerror(errno));
      return 1;
    }
    private_dir = dir;
    o.trace = private_dir + "/trace.jsonl";
  }
  if (keep_trace && !ClearOldTraces(o)) return 1;
  const int status = Record(o);
  int result = 1;
  if (const int signal = g_stop_signal.load(); signal != 0) {
    Say(std::string("stopped by SIG") + sigabbrev_np(signal) + "; " + o.program[0] +
        (status >= 0 ? " got it too and " + DescribeExit(status) : std::string(" did not start")) +
        "; nothing analysed");
    result = 128 + signal;
  } else if (status >= 0) {
    const bool failed = status != 0;
    if (failed) Say(o.program[0] + " " + DescribeExit(status) + "; analysing what it recorded before it ended");
    std::vector<std::string> recorded = {o.trace};
    for (std::string& sibling : SiblingTraces(o.trace)) recorded.push_back(std::move(sibling));
    constexpr int kWriterWaitSeconds = 10;
    const bool finished = WaitForWriters(recorded, kWriterWaitSeconds);
    if (recorded.size() > 1) {
      std::string list;
      for (const std::string& path : recorded) list += (list.empty() ? "" : ", ") + path;
      Say("recorded " + std::to_string(recorded.size()) + " processes of the program, fitted together: " + list);
    }
    result = Analyse(o, recorded, failed || !finished);
  }
  if (!keep_trace) {
    for (const std::string& sibling : SiblingTraces(o.trace)) ::unlink(sibling.c_str());
    ::unlink(o.trace.c_str());
    ::rmdir(private_dir.c_str());
  }
  return result;
}

}  // namespace
}  // namespace msched

int main(int argc, char** argv) { return msched::Main(argc, argv); }

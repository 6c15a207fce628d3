// pause_bench: a long job without templates is paused for an urgent one and
// resumed, on the simulated GPU, under an in-process coordinator; set beside
// the same jobs alone, and beside a checkpoint-style pause that copies the
// long job's memory out and back at the rates NVIDIA's checkpoint API reached
// for a PyTorch trainer on an H200 (2369 MiB out in 1.34 s, 1.85 GB/s, and
// back in 0.57 s, 4.3 GB/s).
//
// Method (printed with the results): every time is the simulated device's
// virtual time. L and U are the long and the urgent job alone on a fresh GPU
// (their runs from arrival to end). In the paused run the long job starts
// alone; after about a third of the real time its run alone took it is
// paused (msched pause, waiting for its answer), the urgent job then runs,
// and the long job is resumed when the urgent one has finished.
//   urgent time        = the pause's own time (the long job's drain and
//                        evictions, its hook's coordinator.stop_ns) + the
//                        urgent job's run from its first kernel; against U
//                        (the same span alone), and against checkpoint out + U;
//   long job's loss    = its run - L - the urgent job's run from its first
//                        kernel: what pausing and resuming cost it; against
//                        checkpoint out + back.
// Where in the long job's run the pause lands depends on real time (it is
// asked for once the job has started, plus a third of the real time its run
// alone took); what it costs depends on what the job holds then, which is
// all of it from its first task on.
// The run fails (exit 1) when a job fails, a checksum differs from the job's
// alone (quick form), the paused job still holds memory, or the urgent job
// had to evict anything (the driver's own evictions, which the paused job's
// leftovers would cause).
//
// With --vmm the long job maps its memory itself through the VMM API
// (msim-run --vmm, as vLLM's and SGLang's allocators do): the pause copies
// it to the host and releases it, the resume makes it again and copies it
// back; set beside vLLM's own sleep and wake (level 1), as published.
//
// Usage: pause_bench [--quick] [--profile NAME] [--unknown pointers|fault] [--vmm] [--out FILE]
// (--unknown: MSCHED_UNKNOWN for both jobs, which have no templates.)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "coord/coord_server.h"
#include "coord/unix_socket.h"
#include "msched/config.h"
#include "msched/json_checked.h"
#include "msched/protocol.h"
#include "suite/json_file.h"
#include "suite/runner.h"

namespace msched::bench {
namespace {

using nlohmann::json;

constexpr double kCheckpointOutBytesPerS = 1.85e9;
constexpr double kCheckpointBackBytesPerS = 4.3e9;

// A run's statistics; discarded when missing or unreadable.
json ReadJson(const std::string& path) {
  std::string error;
  return ReadJsonFile(path, &error);
}

struct Form {
  std::string profile = "h100-sxm-measured";
  uint64_t hbm = 0;
  bool checksums = true;
  int long_tasks = 0, urgent_tasks = 0;
  std::string unknown = "pointers";  // MSCHED_UNKNOWN: how the jobs' kernels, without templates, are handled
  bool vmm = false;                  // the long job's memory is VMM memory
};

// One vector-add job of `foot` bytes, its files named `name`, and what it left.
struct JobRun {
  std::string name;
  uint64_t foot = 0;
  int tasks = 0;
  bool vmm = false;  // msim-run --vmm
  json run, sim, hook;
  // From its arrival, and from its first kernel, to its end.
  uint64_t Span() const { return JsonU64(run, {"virtual_time_ns"}) - JsonU64(run, {"arrival_ns"}); }
  uint64_t GpuSpan() const { return JsonU64(run, {"virtual_time_ns"}) - JsonU64(run, {"first_launch_ns"}); }
};

class PauseBench {
 public:
  PauseBench(const Form& form, const BenchPaths& paths, std::string dir)
      : form_(form), paths_(paths), dir_(std::move(dir)) {}

  Result<Subprocess> Start(JobRun& job, const std::string& device, bool coordinated) const {
    std::vector<std::string> argv = {paths_.msim_run, paths_.workloads_dir + "/micro_vadd.json",
                                     "--json",        File(job, "json"),
                                     "--set",         "FOOT=" + std::to_string(job.foot),
                                     "--set",         "TASKS=" + std::to_string(job.tasks),
                                     "--set",         "WARMUP=0"};
    // Timing only: the inputs are not written either (the suite's full form).
    if (!form_.checksums) argv.insert(argv.end(), {"--no-checksum", "--set", "INIT=0"});
    if (job.vmm) argv.push_back("--vmm");
    SpawnOptions s;
    s.env = {{"LD_LIBRARY_PATH", paths_.sim_lib_dir},
             {"MSIM_DEVICE", device},
             {"MSIM_PROFILE", form_.profile},
             {"MSIM_HBM_BYTES", std::to_string(form_.hbm)},
             {"MSIM_STATS", File(job, "sim.json")},
             {"LD_PRELOAD", paths_.libmsched},
             {"MSCHED_MODE", coordinated ? "msched" : "off"},
             {"MSCHED_STATS", File(job, "hook.json")},
             {"MSCHED_JOB_NAME", job.name},
             {"MSCHED_COORD", coordinated ? "required" : "off"},
             {"MSCHED_SOCKET", Socket()},
             {"MSCHED_UNKNOWN", form_.unknown}};
    if (!form_.checksums) s.env["MSIM_HOST_KERNELS"] = "off";
    // No templates, and the shipped ones do not know the simulator's kernels.
    s.unset_env = {"MSCHED_TEMPLATES", "MSCHED_GPU_MEMORY", "MSCHED_LOG", "MSCHED_TRACE"};
    s.stdout_path = File(job, "out");
    s.stderr_path = File(job, "err");
    return Subprocess::Spawn(argv, s);
  }

  Status Finish(JobRun& job, Subprocess& p) const {
    const int status = p.Wait();
    job.run = ReadJson(File(job, "json"));
    job.sim = ReadJson(File(job, "sim.json"));
    job.hook = ReadJson(File(job, "hook.json"));
    if (status != 0)
      return Status::Internal(job.name + " failed (status " + std::to_string(status) + "), see " + File(job, "err"));
    return Status::Ok();
  }

  // The job alone on a fresh GPU, uncoordinated.
  Status Alone(JobRun& job) const {
    ScratchDevice device("pausebench");
    Result<Subprocess> p = Start(job, device.name(), /*coordinated=*/false);
    if (!p.ok()) return p.status();
    return Finish(job, *p);
  }

  std::string Socket() const { return dir_ + "/coord.sock"; }
  std::string File(const JobRun& job, const char* ext) const { return dir_ + "/" + job.name + "." + ext; }

 private:
  const Form& form_;
  const BenchPaths& paths_;
  std::string dir_;
};

Result<json> Control(const std::string& socket, proto::ControlOp op, uint64_t job) {
  Result<int> fd = ConnectToCoordinator(socket);
  if (!fd.ok()) return fd.status();
  proto::Control c;
  c.op = op;
  c.job = job;
  Status s = SendMessage(*fd, c);
  Result<proto::Message> reply = s.ok() ? ReceiveMessage(*fd, 10000) : Result<proto::Message>(s);
  ::close(*fd);
  if (!reply.ok()) return reply.status();
  const auto* r = std::get_if<proto::ControlReply>(&*reply);
  if (r == nullptr || !r->ok) return Status::Internal(r ? r->text : "unexpected answer");
  return op == proto::ControlOp::kStatus ? json::parse(r->text, nullptr, false) : json::object();
}

// The job named `name` in the coordinator's status (null when absent).
json JobStatus(const std::string& socket, const std::string& name) {
  Result<json> s = Control(socket, proto::ControlOp::kStatus, 0);
  if (!s.ok() || !s->is_object()) return nullptr;
  for (const json& j : (*s)["jobs"]) {
    if (j.value("name", std::string()) == name) return j;
  }
  return nullptr;
}

template <typename Pred>
bool WaitFor(Pred pred, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

int Run(int argc, char** argv) {
  Form form;
  bool quick = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--profile" && i + 1 < argc)
      form.profile = argv[++i];
    else if (a == "--out" && i + 1 < argc)
      out = argv[++i];
    else if (a == "--unknown" && i + 1 < argc)
      form.unknown = argv[++i];
    else if (a == "--vmm")
      form.vmm = true;
    else {
      std::cerr << "usage: pause_bench [--quick] [--profile NAME] [--unknown pointers|fault] [--vmm] [--out FILE]\n";
      return 2;
    }
  }
  // Quick: 64 MiB with results computed and checked; full: 4 GiB, timing only.
  form.hbm = quick ? uint64_t{64} << 20 : uint64_t{4} << 30;
  form.checksums = quick;
  form.long_tasks = quick ? 300 : 2000;
  form.urgent_tasks = quick ? 20 : 8;
  Result<BenchPaths> paths = BenchPaths::Locate();
  if (!paths.ok()) {
    std::cerr << "pause_bench: " << paths.status().message() << "\n";
    return 1;
  }
  char tmpl[] = "/tmp/pause_bench.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  PauseBench bench(form, *paths, dir);
  const uint64_t mib = 1 << 20;
  auto job = [&](const std::string& name, double share, int tasks) {
    JobRun j;
    j.name = name;
    j.vmm = form.vmm && name.rfind("long", 0) == 0;
    j.foot = static_cast<uint64_t>(static_cast<double>(form.hbm) * share) / mib * mib;
    j.tasks = tasks;
    return j;
  };
  JobRun long_alone = job("long-alone", 0.70, form.long_tasks),
         urgent_alone = job("urgent-alone", 0.50, form.urgent_tasks);
  auto fail = [&](const std::string& why) {
    std::cerr << "pause_bench: " << why << " (files in " << dir << ")\n";
    return 1;
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = bench.Alone(long_alone); !s.ok()) return fail(s.message());
  const auto long_wall = std::chrono::steady_clock::now() - t0;
  if (Status s = bench.Alone(urgent_alone); !s.ok()) return fail(s.message());

  // The paused run, under a coordinator of its own.
  ScratchDevice device("pausebench");
  ServerOptions so;
  so.socket_path = bench.Socket();
  so.policy.hbm_bytes = form.hbm;
  so.policy.oversubscribe = 2.0;
  Result<std::unique_ptr<CoordServer>> server = CoordServer::Start(so);
  if (!server.ok()) return fail(server.status().message());
  std::thread loop([&] { (*server)->Run(); });
  JobRun long_job = job("long", 0.70, form.long_tasks), urgent = job("urgent", 0.50, form.urgent_tasks);
  const std::string problem = [&]() -> std::string {
    Result<Subprocess> lp = bench.Start(long_job, device.name(), true);
    if (!lp.ok()) return lp.status().message();
    uint64_t id = 0;
    const bool ran = WaitFor(
        [&] {
          const json j = JobStatus(bench.Socket(), "long");
          id = j.is_object() ? j.value("id", uint64_t{0}) : 0;
          return j.is_object() && j.value("on_gpu", false);
        },
        60);
    if (!ran) return lp->Kill(9), lp->Wait(), "the long job never ran";
    // About a third of its run, in the real time its run alone took.
    std::this_thread::sleep_for(long_wall / 3);
    if (Result<json> r = Control(bench.Socket(), proto::ControlOp::kPause, id); !r.ok()) {
      return lp->Kill(9), lp->Wait(), "pause: " + r.status().message();
    }
    json paused;
    const bool done = WaitFor(
        [&] {
          paused = JobStatus(bench.Socket(), "long");
          return paused.is_object() &&
                 (paused.value("state", std::string()) == "finished" ||
                  (paused.value("state", std::string()) == "paused" && !paused.value("pausing", true)));
        },
        60);
    if (!done || paused.value("state", std::string()) != "paused") {
      return lp->Kill(9), lp->Wait(), "the long job was not paused (it finished first, or never answered)";
    }
    if (const uint64_t held = paused.value("resident_bytes", uint64_t{0}); held != 0) {
      return lp->Kill(9), lp->Wait(), "the paused job still holds " + FormatBytes(held);
    }
    Result<Subprocess> up = bench.Start(urgent, device.name(), true);
    if (!up.ok()) return lp->Kill(9), lp->Wait(), up.status().message();
    if (Status s = bench.Finish(urgent, *up); !s.ok()) return lp->Kill(9), lp->Wait(), s.message();
    if (Result<json> r = Control(bench.Socket(), proto::ControlOp::kResume, id); !r.ok()) {
      return lp->Kill(9), lp->Wait(), "resume: " + r.status().message();
    }
    if (Status s = bench.Finish(long_job, *lp); !s.ok()) return s.message();
    return "";
  }();
  (*server)->Shutdown();
  loop.join();
  if (!problem.empty()) return fail(problem);
  if (form.checksums && (long_job.run["checksums"] != long_alone.run["checksums"] ||
                         urgent.run["checksums"] != urgent_alone.run["checksums"])) {
    return fail("a job's results differ from its run alone");
  }
  if (const uint64_t evicted = JsonU64(urgent.sim, {"bytes", "d2h", "eviction"}); evicted != 0) {
    return fail("the urgent job had to evict " + FormatBytes(evicted) + " of the paused job's memory");
  }

  const double ms = 1e6;
  const double L = static_cast<double>(long_alone.Span()) / ms, U = static_cast<double>(urgent_alone.GpuSpan()) / ms;
  const double pause = static_cast<double>(JsonU64(long_job.hook, {"coordinator", "stop_ns"})) / ms;
  const double urgent_run = static_cast<double>(urgent.GpuSpan()) / ms;
  const double urgent_time = pause + urgent_run;
  const double lost = static_cast<double>(long_job.Span()) / ms - L - urgent_run;
  const double bytes = static_cast<double>(long_job.foot);
  const double out_ms = bytes / kCheckpointOutBytesPerS * 1e3, back_ms = bytes / kCheckpointBackBytesPerS * 1e3;
  std::ostringstream r;
  char line[512];
  r << "# Pausing a long job for an urgent one (" << (quick ? "quick" : "full") << " form)\n\n"
    << "Simulated " << form.profile << ", " << FormatBytes(form.hbm) << " of HBM" << (quick ? "" : ", timing only")
    << "; a long vector-add job of " << FormatBytes(long_job.foot)
    << (form.vmm ? " of VMM memory (msim-run --vmm)" : "") << " without templates (MSCHED_UNKNOWN=" << form.unknown
    << "), paused after about a third"
    << " of its run for an urgent one of " << FormatBytes(urgent.foot) << ", resumed when that ends.\n\n"
    << "Method: virtual device time. Urgent time = the pause (the long job's drain and evictions) + the urgent job's"
    << " run from its first kernel. Long job's loss = its run - its run alone - the urgent job's run from its first"
    << " kernel. Checkpoint-style pause: the long job's"
    << " memory copied out at 1.85 GB/s and back at 4.3 GB/s (NVIDIA's checkpoint API on an H200, 2369 MiB in 1.34 s"
    << " and 0.57 s; issue 34's measurement).\n\n"
    << "| | msched pause | checkpoint-style | alone |\n|---|---:|---:|---:|\n";
  std::snprintf(line, sizeof line, "| urgent job, ms | %.2f (%.2fx alone) | %.2f (%.2fx alone) | %.2f |\n", urgent_time,
                urgent_time / U, out_ms + U, (out_ms + U) / U, U);
  r << line;
  std::snprintf(line, sizeof line, "| the pause itself, ms | %.2f | %.2f | |\n", pause, out_ms);
  r << line;
  std::snprintf(line, sizeof line, "| long job's loss, ms | %.2f | %.2f | (its run alone: %.2f) |\n", lost,
                out_ms + back_ms, L);
  r << line;
  if (form.vmm) {
    // As published (anchors.md): an A100, a model of another size; set
    // beside, not scaled.
    r << "| vLLM sleep level 1 (Qwen3-8B, A100, 47.40 GiB freed), ms | | sleep 10570, wake 2190 | |\n";
  }
  // Managed memory moves by prefetches; VMM memory by copies through
  // msched's own mapping (the hook counts those).
  const uint64_t moved_out = form.vmm ? JsonU64(long_job.hook, {"vmm", "moved_out_bytes"})
                                      : JsonU64(long_job.sim, {"bytes", "d2h", "prefetch"});
  const uint64_t moved_back = form.vmm ? JsonU64(long_job.hook, {"vmm", "moved_back_bytes"})
                                       : JsonU64(long_job.sim, {"bytes", "h2d", "prefetch"});
  std::snprintf(line, sizeof line,
                "\nThe paused job held 0 bytes on the GPU; the urgent job evicted nothing; the long job moved %s out"
                " and %s back in in all.%s\n",
                FormatBytes(moved_out).c_str(), FormatBytes(moved_back).c_str(),
                form.checksums ? " Both jobs' checksums match their runs alone." : "");
  r << line;
  std::cout << r.str();
  if (!out.empty()) std::ofstream(out) << r.str();
  std::error_code ec;
  if (std::getenv("PAUSE_BENCH_KEEP") == nullptr) std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace msched::bench

int main(int argc, char** argv) { return msched::bench::Run(argc, argv); }

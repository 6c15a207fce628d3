// msim-run: executes a workload file (see docs/simulator.md) through the
// driver API, then prints its checksums and virtual time. Run it on the
// simulated driver, alone or under LD_PRELOAD=libmsched.so.
//
//   msim-run WORKLOAD.json [--set VAR=VALUE]... [--json OUT.json]
//            [--managed | --vmm | --expandable] [--no-checksum] [--arrive-ns T]
//            [--attempts N] [--retry-delay-ns D]
//   msim-run --replay TRACE [--host-ns-per-launch N] [the same options but --set]
//
// --replay runs a real program's profile trace (trace_replay.h) in place
// of a workload file, and says first how its kernels and its host time
// between launches are timed. --host-ns-per-launch: the host time before
// each launch whose trace records none (docs/simulator.md gives it for the
// shared traces, with the measurement it comes from).
// --managed allocates every device buffer as managed memory, as a
// unified-memory program does (demand paging without msched); --vmm maps
// every one through the VMM API (cuMemCreate, cuMemMap), as vLLM's and
// SGLang's allocators do; --expandable places them in one range grown in
// 2 MiB VMM pieces, as PyTorch's expandable segments do.
// --no-checksum skips reading the checksum buffers back (benchmark scale).
// --arrive-ns submits the job at virtual time T: it allocates nothing
// before every process sharing the device has reached T.
// --attempts runs the program again from the start, D nanoseconds after an
// attempt ran out of device memory, up to N runs in all (a crashed job
// resubmitted); the JSON counts the OOMs and the device time they lost.
// Exit status: 0 success, 1 the workload failed, 2 bad usage or file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "msim/msim.h"
#include "trace_replay.h"
#include "workload_parse.h"
#include "workload_run.h"

namespace {

constexpr char kUsage[] =
    "usage: msim-run WORKLOAD.json [--set VAR=VALUE]... [--json OUT.json] [--managed | --vmm | --expandable] "
    "[--no-checksum]\n"
    "                [--arrive-ns T] [--attempts N] [--retry-delay-ns D]\n"
    "       msim-run --replay TRACE [--host-ns-per-launch N] [--json OUT.json] [--managed | --vmm | --expandable] "
    "[--no-checksum]\n"
    "                [--arrive-ns T] [--attempts N] [--retry-delay-ns D]\n";

int Usage(const char* why) {
  std::fprintf(stderr, "msim-run: %s\n%s", why, kUsage);
  return 2;
}

// --help: what each option does and the environment that picks the
// simulated GPU, on stdout.
int Help() {
  std::printf(
      "%s"
      "Runs a workload file (docs/workloads.md) or a real program's trace through the CUDA driver API on the\n"
      "simulated GPU, then prints its checksums and virtual time. Run it with the simulated libcuda on the\n"
      "library path, alone or under LD_PRELOAD=libmsched.so.\n"
      "  --set VAR=VALUE         override a workload variable (an integer expression)\n"
      "  --json OUT.json         write the result (times, checksums, counters) as JSON\n"
      "  --managed               allocate every buffer as managed memory (demand paging without msched)\n"
      "  --vmm                   map every device buffer through the VMM API (cuMemCreate, cuMemMap), as a\n"
      "                          serving engine's allocator does\n"
      "  --expandable            place every device buffer in an expandable segment (one reserved range grown\n"
      "                          in 2 MiB VMM pieces), as PyTorch's expandable_segments:True does\n"
      "  --no-checksum           do not read the checksum buffers back (benchmark scale)\n"
      "  --arrive-ns T           start at virtual time T, after every process sharing the device reaches it\n"
      "  --attempts N            run again from the start after running out of device memory, N runs in all\n"
      "  --retry-delay-ns D      wait D virtual nanoseconds before each new attempt\n"
      "  --replay TRACE          replay a trace written by msched-profile --trace (docs/simulator.md)\n"
      "  --host-ns-per-launch N  host time before each replayed launch whose trace records none\n"
      "Environment:\n"
      "  MSIM_DEVICE=NAME        share one simulated GPU, /dev/shm/msim-NAME, among processes (jobs compete only\n"
      "                          on a shared device; without it each process has a private GPU)\n"
      "  MSIM_HBM_BYTES=SIZE     the GPU's memory, such as 64MiB or 16GiB (a shared device keeps the size it was\n"
      "                          made with until /dev/shm/msim-NAME is removed)\n"
      "  MSIM_PROFILE=NAME       device profile (templates/devices/NAME.json; default rtx5080-pcie5)\n"
      "Exit status: 0 success, 1 the workload failed, 2 bad usage or file.\n",
      kUsage);
  return 0;
}

// Says how a replay will run (on stdout, before it does: which timing its
// kernels get, and what the trace could not say), and returns it as JSON.
nlohmann::json ReplaySummary(const msim::ReplayedTrace& r) {
  const uint64_t modelled = r.launches - r.clean_durations;
  std::printf(
      "replay %s: %llu launches, %llu allocations; kernel times: %llu from the trace's clean durations, "
      "%llu modelled (the device's kernel launch time plus the bytes touched at its HBM bandwidth)\n",
      r.workload.name.c_str(), static_cast<unsigned long long>(r.launches),
      static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r.clean_durations),
      static_cast<unsigned long long>(modelled));
  std::printf(
      "replay %s: host time before a launch: %llu from the trace's host_ns, %llu at --host-ns-per-launch, %llu "
      "none\n",
      r.workload.name.c_str(), static_cast<unsigned long long>(r.recorded_host),
      static_cast<unsigned long long>(r.stated_host),
      static_cast<unsigned long long>(r.launches - r.recorded_host - r.stated_host));
  const std::pair<const char*, uint64_t> skipped[] = {
      {"launches the driver would refuse skipped", r.skipped_launches},
      {"touched ranges outside every allocation dropped", r.dropped_ranges},
      {"frees of unknown addresses ignored", r.unknown_frees},
      {"allocations overlapped by a later one taken as freed", r.replaced_allocations},
      {"allocations no GPU could make (past 256 TiB or the address space) skipped", r.skipped_allocations},
      {"durations past an hour modelled instead", r.implausible_durations},
      {"trace lines unreadable", r.problems.size()}};
  for (const auto& [what, n] : skipped) {
    if (n != 0) std::fprintf(stderr, "msim-run: replay: %llu %s\n", static_cast<unsigned long long>(n), what);
  }
  for (size_t i = 0; i < r.problems.size() && i < 5; ++i) std::fprintf(stderr, "msim-run: %s\n", r.problems[i].c_str());
  return {{"launches", r.launches},
          {"allocations", r.allocations},
          {"clean_durations", r.clean_durations},
          {"modelled_durations", modelled},
          {"skipped_launches", r.skipped_launches},
          {"dropped_ranges", r.dropped_ranges},
          {"unknown_frees", r.unknown_frees},
          {"replaced_allocations", r.replaced_allocations},
          {"skipped_allocations", r.skipped_allocations},
          {"implausible_durations", r.implausible_durations},
          {"recorded_host", r.recorded_host},
          {"stated_host", r.stated_host},
          {"unreadable_lines", r.problems.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, json_out;
  bool replay = false;
  uint64_t host_ns_per_launch = 0;
  std::map<std::string, int64_t> overrides;
  msim::RunOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return Help();
    if (a == "--set" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const size_t eq = kv.find('=');
      std::string err;
      msim::ExprPtr e = eq == std::string::npos ? nullptr : msim::Expr::Parse(kv.substr(eq + 1), &err);
      int64_t v = 0;
      if (!e || !e->Eval(msim::ExprContext(), &v)) return Usage(("--set " + kv + ": expected VAR=<integer>").c_str());
      overrides[kv.substr(0, eq)] = v;
    } else if (a == "--managed") {
      options.force_managed = true;
    } else if (a == "--vmm") {
      options.force_vmm = true;
    } else if (a == "--expandable") {
      options.force_expandable = true;
    } else if (a == "--no-checksum") {
      options.checksums = false;
    } else if ((a == "--arrive-ns" || a == "--attempts" || a == "--retry-delay-ns" || a == "--host-ns-per-launch") &&
               i + 1 < argc) {
      char* end = nullptr;
      const char* text = argv[++i];
      const unsigned long long v = std::strtoull(text, &end, 10);
      if (*text < '0' || *text > '9' || *end != '\0' || (a == "--attempts" && (v < 1 || v > 100)) ||
          (a == "--host-ns-per-launch" && v > MSIM_MAX_KERNEL_NS)) {
        return Usage(
            (a + " " + text + ": expected " + (a == "--attempts" ? "a count from 1 to 100" : "nanoseconds")).c_str());
      }
      if (a == "--arrive-ns")
        options.arrival_ns = v;
      else if (a == "--host-ns-per-launch")
        host_ns_per_launch = v;
      else if (a == "--attempts")
        options.max_attempts = static_cast<int>(v);
      else
        options.retry_delay_ns = v;
    } else if (a == "--replay" && i + 1 < argc && path.empty()) {
      path = argv[++i];
      replay = true;
    } else if (a == "--json" && i + 1 < argc) {
      json_out = argv[++i];
    } else if (!a.empty() && a[0] != '-' && path.empty()) {
      path = a;
    } else {
      return Usage(("unexpected argument '" + a + "'").c_str());
    }
  }
  if (path.empty()) return Usage("no workload given");
  if (options.force_managed + options.force_vmm + options.force_expandable > 1) {
    return Usage("--managed, --vmm and --expandable exclude each other");
  }
  if (replay && !overrides.empty()) return Usage("--set does not apply to a replay");
  if (!replay && host_ns_per_launch != 0) return Usage("--host-ns-per-launch applies to a replay only");
  msched::Result<msim::Workload> loaded = msched::Status::Ok();
  nlohmann::json replay_json;
  if (replay) {
    msched::Result<msim::ReplayedTrace> replayed = msim::ReplayTrace(path, host_ns_per_launch);
    if (!replayed.ok()) {
      std::fprintf(stderr, "msim-run: %s\n", replayed.status().message().c_str());
      return 2;
    }
    replay_json = ReplaySummary(*replayed);
    loaded = std::move(replayed->workload);
  } else {
    loaded = msim::LoadWorkload(path, overrides);
  }
  if (!loaded.ok()) {
    std::fprintf(stderr, "msim-run: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const msim::Workload& w = *loaded;
  const msim::RunResult r = msim::RunWorkload(w, options);
  nlohmann::json j = {{"workload", w.name},
                      {"launches", r.launches},
                      {"started_ns", r.started_ns},
                      {"first_launch_ns", r.first_launch_ns},
                      {"virtual_time_ns", r.virtual_ns},
                      {"arrival_ns", r.arrival_ns},
                      {"attempts", r.attempts},
                      {"ooms", r.ooms},
                      {"lost_ns", r.lost_ns}};
  for (const auto& [name, sum] : r.checksums) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(sum));
    j["checksums"][name] = hex;
    std::printf("checksum %s %s\n", name.c_str(), hex);
  }
  for (const auto& [name, t] : r.marks) j["marks"][name] = t;
  if (!r.latencies_ns.empty()) j["latency_ns"] = r.latencies_ns;
  if (r.free_bytes) j["free_bytes"] = *r.free_bytes;
  if (!r.error.empty()) j["error"] = r.error;
  if (replay) j["replay"] = replay_json;
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  if (!r.error.empty()) {
    std::fprintf(stderr, "msim-run: %s: %s\n", w.name.c_str(), r.error.c_str());
    return 1;
  }
  // The run's own time: a shared device's clock carries on from the
  // processes before it, so its readings are given beside, not instead.
  std::printf("workload %s: %llu launches, %.3f ms virtual time", w.name.c_str(),
              static_cast<unsigned long long>(r.launches), static_cast<double>(r.virtual_ns - r.started_ns) / 1e6);
  if (r.started_ns != 0) {
    std::printf(" (the device's clock from %.3f to %.3f ms)", static_cast<double>(r.started_ns) / 1e6,
                static_cast<double>(r.virtual_ns) / 1e6);
  }
  std::printf("\n");
  return 0;
}

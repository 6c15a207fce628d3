#include "suite/bench_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "msched/config.h"
#include "suite/gantt.h"
#include "suite/report.h"
#include "suite/suite.h"

namespace msched::bench {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: msched bench [SCENARIO...] [--device PROFILE] [--hbm SIZE] [--quick] [--policies P,...] [--out DIR]\n"
    "                    [--trace DIR] [--scenarios DIR]\n"
    "       msched bench --list [--scenarios DIR]\n"
    "Runs the benchmark suite on the simulated GPU: every scenario (or those named) at each footprint\n"
    "under each policy, side by side, with the ideal the device allows. Prints the tables and writes\n"
    "report.md, results.csv and PNG plots (a Gantt plot of each scenario among them) into DIR\n"
    "(default: ./msched-bench).\n"
    "  --device PROFILE  simulated device profile (default rtx5080-pcie5; see templates/devices)\n"
    "  --hbm SIZE        the device's memory, a share of the profile's (such as --device h200-measured\n"
    "                    --hbm 16GiB: the H200's link and costs with the paper's 16 GiB)\n"
    "  --quick           small footprints with computed results checked against a reference run\n"
    "                    (minutes); without it, the profile's full HBM with time modelled only\n"
    "  --policies P,...  run only these of each scenario's policies (such as msched,exclusive); a scenario\n"
    "                    with none of them is left out\n"
    "  --trace DIR       write every run's timeline into DIR as SCENARIO-PERCENT-POLICY.json, the simulated\n"
    "                    device's engines included (open it at ui.perfetto.dev or chrome://tracing;\n"
    "                    docs/tracing.md; scripts/device-engines.py sums the engines' work)\n"
    "  --scenarios DIR   read the scenarios from DIR instead of the suite's own (bench/scenarios); their\n"
    "                    workloads still come from the suite's bench/workloads\n";

struct Options {
  std::vector<std::string> scenarios;
  std::string device = "rtx5080-pcie5";
  std::string out = "msched-bench";
  std::string trace;
  std::string scenarios_dir;          // empty: the suite's own
  uint64_t hbm_bytes = 0;             // --hbm (0: the profile's)
  std::vector<std::string> policies;  // empty: each scenario's own
  bool quick = false, list = false, help = false;
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o->help = true;
    } else if (a == "--quick") {
      o->quick = true;
    } else if (a == "--list") {
      o->list = true;
    } else if (a == "--policies" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) o->policies.push_back(name);
      if (o->policies.empty()) return false;
    } else if (a == "--hbm" && i + 1 < argc) {
      Result<uint64_t> bytes = ParseBytes(argv[++i]);
      if (!bytes.ok() || *bytes == 0) return false;
      o->hbm_bytes = *bytes;
    } else if ((a == "--device" || a == "--out" || a == "--trace" || a == "--scenarios") && i + 1 < argc) {
      (a == "--device" ? o->device : a == "--out" ? o->out : a == "--trace" ? o->trace : o->scenarios_dir) = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      o->scenarios.push_back(a);
    } else {
      return false;
    }
  }
  return true;
}

// The commit of the source tree the suite was built from, or "unknown".
std::string Commit(const std::string& work_dir) {
  SpawnOptions so;
  so.stdout_path = work_dir + "/commit";
  so.stderr_path = "/dev/null";
  Result<Subprocess> p = Subprocess::Spawn({"git", "-C", MSCHED_BENCH_DIR, "rev-parse", "--short", "HEAD"}, so);
  std::string commit;
  if (p.ok() && p->Wait() == 0) std::getline(std::ifstream(so.stdout_path), commit);
  return commit.empty() ? "unknown" : commit;
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string Method(const DeviceFacts& d, bool quick) {
  std::ostringstream m;
  m << "Every number here is simulated: msim, msched's simulated CUDA driver, models the " << d.name << " profile ("
    << (d.hbm_bytes >> 20) << " MiB HBM"
    << (d.hbm_bytes != d.card_hbm_bytes
            ? ", a share of the card's " + std::to_string(d.card_hbm_bytes >> 20) +
                  " MiB so that footprints and run times are those of the paper's 16 GiB card"
            : std::string())
    << ", " << d.h2d_gbps << " GB/s host to device, " << d.d2h_gbps
    << " GB/s back, and the other link rates and fault costs its profile measured: docs/simulator.md) on a virtual "
       "clock; no GPU ran these. Each job is its own "
    << "process running a workload from bench/workloads through the real libmsched hook; msched policies add an "
    << "in-process coordinator (the mschedd server). Templates come from msched-profile (two profiling runs per "
    << "workload at different sizes, fitted together). At each point every policy runs the same jobs on a fresh "
    << "device; jobs submitted together start together (a start barrier), and a job with an arrival time waits "
    << "for it on the device clock; time is the last job's end on the device clock. "
    << (quick ? "Quick form: footprints scaled down to the scenario's small HBM, kernels computed, and every job's "
                "checksums compared with a reference run (exclusive or off). "
              : "Full form: the profile's HBM, kernel results not computed (time is modelled from each kernel's "
                "declared bytes and flops), inputs not written. ")
    << "Policies: um = demand paging (all allocations managed, no prefetch); alloc = prefetch whole allocations "
    << "before each kernel; msched = templates + OPT eviction + coordinator time slices; exclusive = one job at a "
    << "time in arrival order in plain device memory (a GPU per job, as a Slurm gres gives); nocheck = every job on "
    << "arrival in plain device memory with no memory check (plain CUDA or MPS sharing): a job that runs out of "
    << "memory crashes, loses its work and is submitted again after the scenario's retry delay, up to "
    << RunOptions{}.max_attempts << " runs; "
    << "swap = one model-swapping server answering every service request (at most two models loaded, the least "
    << "recently used unloaded to load another from host memory). "
    << "Ideal = the longer of all jobs' kernel work back to back and the host-to-device bytes no placement can "
    << "avoid crossing the link at its speed (transfers wholly hidden under kernels): Belady's minimum for the "
    << "jobs' accesses, each job with all of HBM, replayed from the simulator's log of the msched run (OPT "
    << "eviction over 64 KiB units, a unit's first touch free as nothing is written before the jobs start); "
    << "without an msched run, the bytes beyond HBM once (per work unit in E and E-train): no policy on one GPU "
    << "can finish sooner. Paging H2D x Belady = msched's prefetched and faulted bytes over that minimum. "
    << "An msched row short of 90% of ideal or of the paper has a note, which adds what OPT moves when each "
    << "operation's units must be resident together, as a kernel that runs without faulting needs them (victims "
    << "by furthest next use: OPT's choice at that granularity, not a bound), on all of HBM and on the "
    << "coordinator's working-set budget for a job alone, and the ideal with those bytes. "
    << "x um = um's time / the policy's time, same jobs, same run of the suite; x exclusive likewise with "
    << "exclusive's (above 1: faster than running the jobs one at a time).";
  return m.str();
}

}  // namespace

int BenchMain(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    std::cerr << kUsage;
    return 2;
  }
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  Result<BenchPaths> paths = BenchPaths::Locate();
  if (!paths.ok()) {
    std::cerr << "msched bench: " << paths.status().message() << "\n";
    return 1;
  }
  Result<std::vector<Scenario>> all = LoadScenarios(o.scenarios_dir.empty() ? paths->scenarios_dir : o.scenarios_dir);
  if (!all.ok()) {
    std::cerr << "msched bench: " << all.status().message() << "\n";
    return 1;
  }
  if (o.list) {
    for (const Scenario& s : *all) std::cout << s.name << "\t" << s.title << "\n";
    return 0;
  }
  for (const std::string& name : o.scenarios) {
    if (std::none_of(all->begin(), all->end(), [&](const Scenario& s) { return s.name == name; })) {
      std::cerr << "msched bench: no scenario '" << name << "' (msched bench --list names them)\n";
      return 2;
    }
  }
  for (const std::string& name : o.policies) {
    const bool known = std::any_of(all->begin(), all->end(), [&](const Scenario& s) {
      return std::any_of(s.policies.begin(), s.policies.end(), [&](const PolicyVariant& v) { return v.name == name; });
    });
    if (!known) {
      std::cerr << "msched bench: no scenario has a policy '" << name << "'\n";
      return 2;
    }
  }
  std::vector<const Scenario*> chosen;
  for (Scenario& s : *all) {
    if (!o.scenarios.empty() && std::find(o.scenarios.begin(), o.scenarios.end(), s.name) == o.scenarios.end())
      continue;
    if (!o.policies.empty()) {
      std::erase_if(s.policies, [&](const PolicyVariant& v) {
        return std::find(o.policies.begin(), o.policies.end(), v.name) == o.policies.end();
      });
      if (s.policies.empty()) continue;
    }
    chosen.push_back(&s);
  }
  Result<DeviceFacts> device = LoadDeviceFacts(o.device, *paths);
  if (!device.ok()) {
    std::cerr << "msched bench: " << device.status().message() << "\n";
    return 2;
  }
  if (o.hbm_bytes > device->card_hbm_bytes) {
    std::cerr << "msched bench: --hbm " << FormatBytes(o.hbm_bytes) << " is more than " << device->name << "'s "
              << FormatBytes(device->card_hbm_bytes) << "\n";
    return 2;
  }
  if (o.hbm_bytes != 0) device->hbm_bytes = o.hbm_bytes;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  const std::string out_dir = fs::absolute(o.out).string();
  const std::string work_dir = out_dir + "/work";
  fs::create_directories(work_dir, ec);
  if (ec) {
    std::cerr << "msched bench: cannot create " << work_dir << ": " << ec.message() << "\n";
    return 1;
  }
  SuiteOptions so;
  so.device_profile = o.device;
  so.quick = o.quick;
  so.work_dir = work_dir;
  if (!o.trace.empty()) so.trace_dir = fs::absolute(o.trace).string();
  const auto start = std::chrono::steady_clock::now();
  so.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%6.1f s] %s\n", s, line.c_str());
  };
  Result<Prepared> prepared = Prepare(chosen, *paths, so);
  if (!prepared.ok()) {
    std::cerr << "msched bench: " << prepared.status().message() << "\n";
    return 1;
  }
  std::vector<ScenarioResult> results;
  std::string sections;
  bool all_ok = true;
  for (const Scenario* s : chosen) {
    results.push_back(RunScenario(*s, *device, *prepared, *paths, so));
    const std::string section = ScenarioSection(results.back(), *device);
    std::cout << "\n" << section << std::flush;
    sections += section + "\n";
    if (Status plot = WritePlot(results.back(), out_dir); !plot.ok()) {
      std::cerr << "msched bench: no plot for " << s->name << ": " << plot.message() << "\n";
    } else if (fs::exists(out_dir + "/" + s->name + ".png")) {
      sections += "![" + s->name + "](" + s->name + ".png)\n\n";
    }
    if (Status gantt = WriteGantt(results.back(), out_dir); !gantt.ok()) {
      std::cerr << "msched bench: no Gantt plot for " << s->name << ": " << gantt.message() << "\n";
    } else if (fs::exists(out_dir + "/" + s->name + "-gantt.png")) {
      sections += "![" + s->name + ": who held the GPU](" + s->name + "-gantt.png)\n\n";
    }
    for (const PointResult& p : results.back().points) {
      for (const PolicyResult& r : p.policies) all_ok = all_ok && (r.ok() || r.cannot_run || r.out_of_memory);
    }
  }
  const std::string headline = HeadlineTable(results), sharing = MultiuserHeadline(results);
  const std::string commit = Commit(work_dir);
  const double real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream report;
  report << "# msched benchmark report (simulated)\n\n"
         << "Date " << Today() << ", device profile " << device->name << ", commit " << commit << ", "
         << (o.quick ? "quick" : "full") << " form, " << static_cast<int>(real_s) << " s of real time.\n\n"
         << "## Method\n\n"
         << Method(*device, o.quick) << "\n\n"
         << "## Headline: msched over demand paging, beside the paper\n\n"
         << headline << (sharing.empty() ? "" : "\n## Headline: sharing as users feel it\n\n" + sharing)
         << "\n## Scenarios\n\n"
         << sections;
  std::ofstream(out_dir + "/report.md") << report.str();
  std::ofstream(out_dir + "/results.csv") << Csv(results);
  std::cout << "\nHeadline (simulated " << device->name << "; the paper measured a real RTX 5080):\n\n"
            << headline << (sharing.empty() ? "" : "\n" + sharing) << "\nWrote " << out_dir
            << "/report.md, results.csv and plots.\n";
  if (!all_ok) std::cerr << "msched bench: some runs failed or gave wrong results (see the status columns)\n";
  return all_ok ? 0 : 1;
}

}  // namespace msched::bench

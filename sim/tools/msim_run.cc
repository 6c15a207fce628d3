// msim-run: executes a workload file (see docs/simulator.md) through the
// driver API, then prints its checksums and virtual time. Run it on the
// simulated driver, alone or under LD_PRELOAD=libmsched.so.
//
//   msim-run WORKLOAD.json [--set VAR=VALUE]... [--json OUT.json]
//            [--managed] [--no-checksum] [--arrive-ns T]
//            [--attempts N] [--retry-delay-ns D]
//
// --managed allocates every device buffer as managed memory, as a
// unified-memory program does (demand paging without msched).
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

#include "workload_parse.h"
#include "workload_run.h"

namespace {

int Usage(const char* why) {
  std::fprintf(stderr, "msim-run: %s\nusage: msim-run WORKLOAD.json [--set VAR=VALUE]... [--json OUT.json] [--managed] [--no-checksum]\n"
               "                [--arrive-ns T] [--attempts N] [--retry-delay-ns D]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, json_out;
  std::map<std::string, int64_t> overrides;
  msim::RunOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
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
    } else if (a == "--no-checksum") {
      options.checksums = false;
    } else if ((a == "--arrive-ns" || a == "--attempts" || a == "--retry-delay-ns") && i + 1 < argc) {
      char* end = nullptr;
      const char* text = argv[++i];
      const unsigned long long v = std::strtoull(text, &end, 10);
      if (*text < '0' || *text > '9' || *end != '\0' || (a == "--attempts" && (v < 1 || v > 100))) {
        return Usage((a + " " + text + ": expected " + (a == "--attempts" ? "a count from 1 to 100" : "nanoseconds")).c_str());
      }
      if (a == "--arrive-ns") options.arrival_ns = v;
      else if (a == "--attempts") options.max_attempts = static_cast<int>(v);
      else options.retry_delay_ns = v;
    } else if (a == "--json" && i + 1 < argc) {
      json_out = argv[++i];
    } else if (!a.empty() && a[0] != '-' && path.empty()) {
      path = a;
    } else {
      return Usage(("unexpected argument '" + a + "'").c_str());
    }
  }
  if (path.empty()) return Usage("no workload given");
  msched::Result<msim::Workload> loaded = msim::LoadWorkload(path, overrides);
  if (!loaded.ok()) {
    std::fprintf(stderr, "msim-run: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const msim::Workload& w = *loaded;
  const msim::RunResult r = msim::RunWorkload(w, options);
  nlohmann::json j = {{"workload", w.name},
                      {"launches", r.launches},
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
  if (!r.error.empty()) j["error"] = r.error;
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  if (!r.error.empty()) {
    std::fprintf(stderr, "msim-run: %s: %s\n", w.name.c_str(), r.error.c_str());
    return 1;
  }
  std::printf("workload %s: %llu launches, %.3f ms virtual time\n", w.name.c_str(),
              static_cast<unsigned long long>(r.launches), static_cast<double>(r.virtual_ns) / 1e6);
  return 0;
}

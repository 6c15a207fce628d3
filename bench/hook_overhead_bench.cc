// Launch overhead of libmsched: a driver-API program launches N tiny kernels
// whose data stays resident (the hook's common path), and the wall time per
// launch is compared side by side in one run, the program re-executing
// itself under each setting:
//   no hook        the simulated driver alone
//   hook, off      libmsched preloaded in pass-through mode
//   hook, msched   a predicted kernel (template evaluated, residency checked)
//   hook, unknown  a kernel without a template (MSCHED_UNKNOWN=fault)
// Method: best of 5 runs of N launches each, after a warm-up; wall time on
// the host (the simulated driver's own cost is the baseline subtracted).
//   hook_overhead_bench [--launches N]
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/subprocess.h"

namespace {

const char* kModule = R"({"format":"msim-module","version":1,"kernels":[
  {"name":"tiny","params":[8,8],"accesses":[{"arg":"p0","mode":"readwrite","extent":"4*p1"}],"cost":{"bytes":"4*p1"}},
  {"name":"tiny_unknown","params":[8,8],"accesses":[{"arg":"p0","mode":"readwrite","extent":"4*p1"}],"cost":{"bytes":"4*p1"}}]})";

const char* kTemplates = R"({"format":"msched-templates","version":1,"kernels":[
  {"name":"tiny","params":[[0,8],[8,8]],"regions":[
    {"base":"p0","kind":"linear","mode":"readwrite","extent":{"coef":4,"factors":["p1"]}}]}]})";

// The child: launches `n` kernels `reps` times; prints the best ns per launch.
int Child(const char* kernel, long n) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
      cuModuleLoadData(&m, kModule) || cuModuleGetFunction(&f, m, kernel) || cuMemAlloc(&p, 1 << 20)) {
    std::fprintf(stderr, "hook_overhead_bench: setup failed\n");
    return 1;
  }
  uint64_t elems = 1024;
  void* params[] = {&p, &elems};
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {  // the first repetition is the warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    cuCtxSynchronize();
    if (rep > 0) best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  }
  std::printf("%.1f\n", best);
  return 0;
}

double Measure(const std::string& self, const char* kernel, long n, const std::map<std::string, std::string>& env) {
  msched::SpawnOptions o;
  o.env = env;
  o.unset_env = {"MSIM_DEVICE", "MSCHED_STATS", "MSIM_STATS"};
  if (!env.count("LD_PRELOAD")) o.unset_env.push_back("LD_PRELOAD");
  const std::string out = "/tmp/hook_overhead_" + std::to_string(getpid()) + ".out";
  o.stdout_path = out;
  auto p = msched::Subprocess::Spawn({self, "--child", kernel, std::to_string(n)}, o);
  if (!p.ok() || p->Wait() != 0) return -1;
  double v = -1;
  std::ifstream(out) >> v;
  unlink(out.c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return Child(argv[2], std::atol(argv[3]));
  long n = 200000;
  if (argc == 3 && std::strcmp(argv[1], "--launches") == 0) n = std::atol(argv[2]);
  const std::string self = msched::ExecutableDir() + "/hook_overhead_bench";
  const std::string templates = "/tmp/hook_overhead_" + std::to_string(getpid()) + ".templates.json";
  std::ofstream(templates) << kTemplates;
  const std::string lib = LIBMSCHED;
  const double base = Measure(self, "tiny", n, {});
  struct Row {
    const char* name;
    const char* kernel;
    std::map<std::string, std::string> env;
  } rows[] = {
      {"hook, off", "tiny", {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "off"}}},
      {"hook, msched, predicted kernel", "tiny", {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}}},
      {"hook, msched, unknown kernel", "tiny_unknown", {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}}},
  };
  std::printf("launch overhead of libmsched on the simulated driver (%ld launches, best of 5, wall time)\n", n);
  std::printf("%-34s %12s %14s\n", "setting", "ns/launch", "added ns");
  std::printf("%-34s %12.1f %14s\n", "no hook (simulated driver alone)", base, "-");
  int status = base > 0 ? 0 : 1;
  for (const Row& r : rows) {
    const double v = Measure(self, r.kernel, n, r.env);
    if (v < 0) status = 1;
    std::printf("%-34s %12.1f %14.1f\n", r.name, v, v - base);
  }
  unlink(templates.c_str());
  return status;
}

// Launch overhead of libmsched: a driver-API program launches N tiny kernels
// whose data stays resident (the hook's common path), and the wall time per
// launch is compared side by side in one run, the program re-executing
// itself under each setting:
//   no hook        the simulated driver alone
//   hook, off      libmsched preloaded in pass-through mode
//   hook, msched   a predicted kernel (template evaluated, residency checked)
//   hook, unknown  a kernel without a template: the pointer fallback (the
//                  default, MSCHED_UNKNOWN=pointers: its pointer argument to
//                  the end of its allocation), and demand paging (fault)
//   hook, wide     a predicted kernel of 6 regions of 64 MiB (192 chunks),
//                  as a training step's matrix and optimizer kernels, against
//                  the same kernel in um mode (its memory managed, nothing
//                  predicted: the simulated driver's own cost for managed
//                  memory, which the rows above do not pay)
// Method: best of 5 runs of N launches each, after a warm-up; wall time on
// the host (the simulated driver's own cost is the baseline subtracted).
// With --threads T (a comma-separated list runs each count in turn), T
// threads share the context and the N launches (N/T each), started together
// each run: the table gives the ns per launch each thread sees and the
// launches per second of all threads together (best run of 5 by wall time).
// With --between BYTES, each thread writes BYTES of its own memory before
// each launch, as a program's own work between launches does, and each
// launch is timed alone (the writes are not timed): what the hook costs
// when its state is no longer in the caches. ns/launch is then the median
// of every launch timed in the five runs (a cold launch's time varies by
// microseconds with what the machine does meanwhile, so a mean would carry
// the outliers), and launches/s, of the run fastest by wall time, counts the
// writes too.
//   hook_overhead_bench [--launches N] [--threads T[,T...]] [--between BYTES]
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"

namespace {

const char* kModule = R"({"format":"msim-module","version":1,"kernels":[
  {"name":"tiny","params":[8,8],"accesses":[{"arg":"p0","mode":"readwrite","extent":"4*p1"}],"cost":{"bytes":"4*p1"}},
  {"name":"tiny_unknown","params":[8,8],"accesses":[{"arg":"p0","mode":"readwrite","extent":"4*p1"}],"cost":{"bytes":"4*p1"}},
  {"name":"wide","params":[8,8,8,8,8,8,8],"accesses":[
    {"arg":"p0","mode":"read","extent":"4*p6"},{"arg":"p1","mode":"read","extent":"4*p6"},
    {"arg":"p2","mode":"read","extent":"4*p6"},{"arg":"p3","mode":"read","extent":"4*p6"},
    {"arg":"p4","mode":"read","extent":"4*p6"},{"arg":"p5","mode":"readwrite","extent":"4*p6"}],
   "cost":{"bytes":"24*p6"}}]})";

const char* kTemplates = R"({"format":"msched-templates","version":1,"kernels":[
  {"name":"tiny","params":[[0,8],[8,8]],"regions":[
    {"base":"p0","kind":"linear","mode":"readwrite","extent":{"coef":4,"factors":["p1"]}}]},
  {"name":"wide","params":[[0,8],[8,8],[16,8],[24,8],[32,8],[40,8],[48,8]],"regions":[
    {"base":"p0","kind":"linear","mode":"read","extent":{"coef":4,"factors":["p6"]}},
    {"base":"p1","kind":"linear","mode":"read","extent":{"coef":4,"factors":["p6"]}},
    {"base":"p2","kind":"linear","mode":"read","extent":{"coef":4,"factors":["p6"]}},
    {"base":"p3","kind":"linear","mode":"read","extent":{"coef":4,"factors":["p6"]}},
    {"base":"p4","kind":"linear","mode":"read","extent":{"coef":4,"factors":["p6"]}},
    {"base":"p5","kind":"linear","mode":"readwrite","extent":{"coef":4,"factors":["p6"]}}]}]})";

constexpr uint64_t kWideElems = 16ull << 20;  // 64 MiB of floats per region

// One setting's result: ns per launch as each thread sees it (the mean over
// threads; with `between`, the median of every launch timed) and launches
// per second of all threads together.
struct Sample {
  double ns_per_launch = -1;
  double launches_per_s = -1;
};

// The child: `threads` threads make the current context theirs and launch
// `n / threads` kernels each, `reps` times, each thread writing `between`
// bytes of its own before each launch; prints the best run's Sample (with
// `between`, its ns per launch the median over all runs).
int Child(const char* kernel, long n, int threads, size_t between) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  const bool wide = std::strcmp(kernel, "wide") == 0;
  CUdeviceptr p[6] = {};
  bool set_up = cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
                cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
                cuModuleLoadData(&m, kModule) == CUDA_SUCCESS && cuModuleGetFunction(&f, m, kernel) == CUDA_SUCCESS;
  for (int i = 0; set_up && i < (wide ? 6 : 1); ++i)
    set_up = cuMemAlloc(&p[i], wide ? 4 * kWideElems : 1 << 20) == CUDA_SUCCESS;
  if (!set_up) {
    std::fprintf(stderr, "hook_overhead_bench: setup failed\n");
    return 1;
  }
  const long per_thread = std::max(1L, n / threads);
  constexpr int kReps = 6;  // the first repetition is the warm-up
  // Each run: every thread waits at `start`, launches, records its time and
  // waits at `done`; the main thread times from `start` to `done`.
  std::barrier start(threads + 1), done(threads + 1);
  std::vector<double> thread_ns(static_cast<size_t>(threads));
  // With `between`: every launch's own time after the warm-up, per thread.
  std::vector<std::vector<double>> cold_ns(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  std::atomic<bool> failed{false};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t elems = wide ? kWideElems : 1024;
      void* tiny_params[] = {&p[0], &elems};
      void* wide_params[] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &elems};
      void** params = wide ? wide_params : tiny_params;
      std::vector<uint64_t> own(between / sizeof(uint64_t));
      if (between > 0) cold_ns[static_cast<size_t>(t)].reserve(static_cast<size_t>(per_thread) * kReps);
      const bool ok = cuCtxSetCurrent(ctx) == CUDA_SUCCESS;
      const auto launch = [&] { cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr); };
      for (int rep = 0; rep < kReps; ++rep) {
        start.arrive_and_wait();
        std::chrono::steady_clock::duration spent{};
        if (between == 0) {
          const auto t0 = std::chrono::steady_clock::now();
          for (long i = 0; ok && i < per_thread; ++i) launch();
          spent = std::chrono::steady_clock::now() - t0;
        }
        for (long i = 0; ok && between > 0 && i < per_thread; ++i) {
          for (uint64_t& w : own) w += static_cast<uint64_t>(i);
          asm volatile("" : : "r"(own.data()) : "memory");  // the writes must happen: nothing reads them
          const auto t0 = std::chrono::steady_clock::now();
          launch();
          const auto one = std::chrono::steady_clock::now() - t0;
          spent += one;
          if (rep > 0) cold_ns[static_cast<size_t>(t)].push_back(std::chrono::duration<double, std::nano>(one).count());
        }
        thread_ns[static_cast<size_t>(t)] = std::chrono::duration<double, std::nano>(spent).count();
        if (!ok) failed.store(true);
        done.arrive_and_wait();
      }
    });
  }
  Sample best;
  double best_wall = 1e300;
  for (int rep = 0; rep < kReps; ++rep) {
    start.arrive_and_wait();
    const auto t0 = std::chrono::steady_clock::now();
    done.arrive_and_wait();
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    cuCtxSynchronize();
    if (rep == 0 || wall >= best_wall) continue;
    best_wall = wall;
    double sum = 0;
    for (double v : thread_ns) sum += v / static_cast<double>(per_thread);
    best.ns_per_launch = sum / threads;
    best.launches_per_s = static_cast<double>(per_thread) * threads / (wall * 1e-9);
  }
  for (std::thread& t : pool) t.join();
  if (between > 0) {
    std::vector<double> all;
    for (const std::vector<double>& v : cold_ns) all.insert(all.end(), v.begin(), v.end());
    if (!all.empty()) {
      std::nth_element(all.begin(), all.begin() + static_cast<ptrdiff_t>(all.size() / 2), all.end());
      best.ns_per_launch = all[all.size() / 2];
    }
  }
  if (failed) {
    std::fprintf(stderr, "hook_overhead_bench: cuCtxSetCurrent failed on a launching thread\n");
    return 1;
  }
  std::printf("%.1f %.0f\n", best.ns_per_launch, best.launches_per_s);
  return 0;
}

Sample Measure(const std::string& self, const char* kernel, long n, int threads, size_t between,
               const std::map<std::string, std::string>& env) {
  msched::SpawnOptions o;
  o.env = env;
  o.unset_env = {"MSIM_DEVICE", "MSCHED_STATS", "MSIM_STATS", "MSCHED_UNKNOWN"};
  if (!env.count("LD_PRELOAD")) o.unset_env.push_back("LD_PRELOAD");
  const std::string out = "/tmp/hook_overhead_" + std::to_string(getpid()) + ".out";
  o.stdout_path = out;
  auto p = msched::Subprocess::Spawn(
      {self, "--child", kernel, std::to_string(n), std::to_string(threads), std::to_string(between)}, o);
  Sample v;
  if (p.ok() && p->Wait() == 0) std::ifstream(out) >> v.ns_per_launch >> v.launches_per_s;
  unlink(out.c_str());
  return v;
}

}  // namespace

// "1,4,16" -> {1, 4, 16}; empty on anything else.
static std::vector<int> ParseThreads(const char* text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1024) return {};
    out.push_back(static_cast<int>(v));
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--child") == 0) {
    return Child(argv[2], std::atol(argv[3]), std::atoi(argv[4]), std::strtoull(argv[5], nullptr, 10));
  }
  long n = 200000;
  size_t between = 0;
  std::vector<int> thread_counts = {1};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
      n = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      thread_counts = ParseThreads(argv[++i]);
    } else if (std::strcmp(argv[i], "--between") == 0 && i + 1 < argc) {
      char* end = nullptr;
      between = std::strtoull(argv[++i], &end, 10);
      if (*end != '\0' || between > (1ull << 30)) thread_counts.clear();
    } else {
      thread_counts.clear();
    }
    if (thread_counts.empty() || n < 1) {
      std::fprintf(stderr,
                   "usage: hook_overhead_bench [--launches N] [--threads T[,T...]] [--between BYTES] "
                   "(T in 1..1024, BYTES at most 1 GiB)\n");
      return 2;
    }
  }
  const std::string self = msched::ExecutableDir() + "/hook_overhead_bench";
  const std::string templates = "/tmp/hook_overhead_" + std::to_string(getpid()) + ".templates.json";
  std::ofstream(templates) << kTemplates;
  const std::string lib = LIBMSCHED;
  struct Row {
    const char* name;
    const char* kernel;
    std::map<std::string, std::string> env;
    bool reference = false;  // the rows after it say what they add to it
  } rows[] = {
      {"hook, off", "tiny", {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "off"}}},
      {"hook, msched, predicted kernel",
       "tiny",
       {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}}},
      {"hook, msched, unknown, pointers",
       "tiny_unknown",
       {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}}},
      {"hook, msched, unknown, fault",
       "tiny_unknown",
       {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}, {"MSCHED_UNKNOWN", "fault"}}},
      {"hook, um, wide kernel", "wide", {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "um"}}, true},
      {"hook, msched, wide kernel",
       "wide",
       {{"LD_PRELOAD", lib}, {"MSCHED_MODE", "msched"}, {"MSCHED_TEMPLATES", templates}}},
  };
  int status = 0;
  for (const int threads : thread_counts) {
    const Sample base = Measure(self, "tiny", n, threads, between, {});
    if (base.ns_per_launch < 0) status = 1;
    std::printf("launch overhead of libmsched on the simulated driver (%ld launches, %d launching thread%s, %s)\n", n,
                threads, threads == 1 ? "" : "s",
                between > 0 ? ("the median of 5 runs' launches, each timed alone after " + std::to_string(between) +
                               " bytes written")
                                  .c_str()
                            : "best of 5 runs, wall time");
    std::printf("%-34s %18s %14s %16s\n", "setting", "ns/launch/thread", "added ns", "launches/s");
    std::printf("%-34s %18.1f %14s %16.0f\n", "no hook (simulated driver alone)", base.ns_per_launch, "-",
                base.launches_per_s);
    Sample ref = base;
    for (const Row& r : rows) {
      const Sample v = Measure(self, r.kernel, n, threads, between, r.env);
      if (v.ns_per_launch < 0) status = 1;
      if (r.reference) {
        ref = v;
        std::printf("%-34s %18.1f %14s %16.0f\n", r.name, v.ns_per_launch, "-", v.launches_per_s);
        continue;
      }
      std::printf("%-34s %18.1f %14.1f %16.0f\n", r.name, v.ns_per_launch, v.ns_per_launch - ref.ns_per_launch,
                  v.launches_per_s);
    }
    std::printf("\n");
  }
  unlink(templates.c_str());
  return status;
}

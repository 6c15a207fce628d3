// A driver-API program that reaches the driver the way cudart, cuBLAS and
// PyTorch do: dlopen("libcuda.so.1"), dlsym of cuGetProcAddress_v2, then
// every entry point through it, by base name, ABI version and stream flag
// (cuGetProcAddress itself included). Each subcommand exercises one path of
// libmsched and prints what the tests check:
//   lookups   which library answers each lookup (wrapper or real driver)
//   run       a vector add through the resolved functions; prints a checksum
//   capture   a launch captured into a graph, then replayed
//   vmm       VMM memory mapped and used; prints cuMemGetInfo
//   async     stream-ordered allocations freed while kernels still use them
//   share keep|free
//             memory meant for another process: 4 MiB from a pool created
//             with an export handle type (managed? exported?), 4 MiB from the
//             default pool (managed?), and an IPC handle asked for a
//             cuMemAlloc buffer (the answer); the exportable block is freed
//             or kept to the end
//   pool [S]  S steps of a per-tensor stream-ordered allocator (as PyTorch's
//             cudaMallocAsync backend): every activation allocated from a
//             pool just before its kernel and freed right after its
//             consumer is queued, on two streams, then the pool trimmed;
//             prints checksums, the virtual time per step and the managed
//             allocations made during the steps
//   rtld_next dlsym(RTLD_NEXT, ...) answers as if no interposer sat between
//   crash     three vector adds of different sizes, then killed by a signal
//   late_context
//             an allocation before any context exists (prints the driver's
//             answer), then a context and the run subcommand's vector add
//   idle US   a vector add over 40 MiB, US microseconds of host work with the
//             simulator's idle alarm off (as if no timer saw it: the next
//             launch must notice the idleness itself), a second vector add;
//             prints a checksum
// Exit status 0 on success; 1 with a message on stderr otherwise.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <msim/msim.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* kModule = R"({"format":"msim-module","version":1,"kernels":[
  {"name":"vector_add","params":[8,8,8,8],"host":"vector_add_f32",
   "accesses":[{"arg":"p0","mode":"read","extent":"4*p3"},{"arg":"p1","mode":"read","extent":"4*p3"},
               {"arg":"p2","mode":"write","extent":"4*p3"}],"cost":{"bytes":"12*p3"}}]})";

PFN_cuGetProcAddress_v12000 g_lookup = nullptr;
// The simulator's own entry points, found with dlsym (null on a real driver).
decltype(&msimGetTime) g_sim_time = nullptr;
decltype(&msimCallCount) g_sim_calls = nullptr;
decltype(&msimAdvanceTo) g_sim_advance = nullptr;
decltype(&msimSetIdleAlarm) g_sim_alarm = nullptr;

void* Lookup(const char* name, int version, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  if (g_lookup(name, &fn, version, flags, &status) != CUDA_SUCCESS || fn == nullptr) {
    std::fprintf(stderr, "probe: cannot resolve %s@%d\n", name, version);
    std::exit(1);
  }
  return fn;
}

template <typename Fn>
Fn L(const char* name, int version, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  return reinterpret_cast<Fn>(Lookup(name, version, flags));
}

std::string Owner(void* fn) {
  Dl_info info{};
  if (!dladdr(fn, &info) || info.dli_fname == nullptr) return "?";
  std::string lib = info.dli_fname;
  lib = lib.substr(lib.rfind('/') + 1);
  return lib + ":" + (info.dli_sname ? info.dli_sname : "?");
}

#define CHECK(expr)                                                                  \
  do {                                                                               \
    CUresult r_ = (expr);                                                            \
    if (r_ != CUDA_SUCCESS) {                                                        \
      std::fprintf(stderr, "probe: %s failed: %d (line %d)\n", #expr, r_, __LINE__); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

struct Api {
  PFN_cuInit_v2000 init = L<PFN_cuInit_v2000>("cuInit", 2000);
  PFN_cuDeviceGet_v2000 device_get = L<PFN_cuDeviceGet_v2000>("cuDeviceGet", 2000);
  PFN_cuDevicePrimaryCtxRetain_v7000 retain = L<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain", 7000);
  PFN_cuCtxSetCurrent_v4000 set_current = L<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000);
  PFN_cuModuleLoadData_v2000 load = L<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", 2000);
  PFN_cuModuleGetFunction_v2000 get_function = L<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction", 2000);
  PFN_cuMemAlloc_v3020 alloc = L<PFN_cuMemAlloc_v3020>("cuMemAlloc", 3020);
  PFN_cuMemFree_v3020 free = L<PFN_cuMemFree_v3020>("cuMemFree", 3020);
  PFN_cuMemcpyHtoD_v3020 htod = L<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD", 3020);
  PFN_cuMemcpyDtoH_v3020 dtoh = L<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH", 3020);
  PFN_cuLaunchKernel_v7000_ptsz launch_ptsz =
      L<PFN_cuLaunchKernel_v7000_ptsz>("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  PFN_cuLaunchKernel_v4000 launch = L<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000);
  PFN_cuCtxSynchronize_v2000 sync = L<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize", 2000);
  PFN_cuStreamCreate_v2000 stream_create = L<PFN_cuStreamCreate_v2000>("cuStreamCreate", 2000);
  PFN_cuStreamSynchronize_v2000 stream_sync = L<PFN_cuStreamSynchronize_v2000>("cuStreamSynchronize", 2000);
  CUfunction vadd = nullptr;

  int Setup() {
    CHECK(init(0));
    CUdevice dev;
    CHECK(device_get(&dev, 0));
    CUcontext ctx;
    CHECK(retain(&ctx, dev));
    CHECK(set_current(ctx));
    CUmodule m;
    CHECK(load(&m, kModule));
    CHECK(get_function(&vadd, m, "vector_add"));
    return 0;
  }
};

uint64_t Fnv(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int Lookups() {
  const struct {
    const char* name;
    int version;
    cuuint64_t flags;
  } queries[] = {
      {"cuGetProcAddress", 12000, 0},
      {"cuGetProcAddress", 11030, 0},
      {"cuLaunchKernel", 4000, 0},
      {"cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuLaunchKernelEx", 11060, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemAlloc", 3020, 0},
      {"cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuCtxSynchronize", 13000, 0},
      {"cuCtxSynchronize", 2000, 0},
      {"cuMemAlloc", 2000, 0},        // an older ABI than msched hooks
      {"cuModuleLoadData", 2000, 0},  // not hooked
  };
  for (const auto& q : queries)
    std::printf("%s@%d/%llu %s\n", q.name, q.version, (unsigned long long)q.flags,
                Owner(Lookup(q.name, q.version, q.flags)).c_str());
  return 0;
}

int Run(Api& api, uint64_t n, bool per_thread) {
  CUdeviceptr a, b, c;
  CHECK(api.alloc(&a, 4 * n));
  CHECK(api.alloc(&b, 4 * n));
  CHECK(api.alloc(&c, 4 * n));
  std::vector<float> x(n), y(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000), y[i] = 0.5f;
  CHECK(api.htod(a, x.data(), 4 * n));
  CHECK(api.htod(b, y.data(), 4 * n));
  void* params[] = {&a, &b, &c, &n};
  for (int rep = 0; rep < 3; ++rep) {
    if (per_thread)
      CHECK(api.launch_ptsz(api.vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    else
      CHECK(api.launch(api.vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  }
  CHECK(api.sync());
  CHECK(api.dtoh(x.data(), c, 4 * n));
  std::printf("checksum %016llx\n", static_cast<unsigned long long>(Fnv(x)));
  CHECK(api.free(a));
  CHECK(api.free(b));
  CHECK(api.free(c));
  return 0;
}

int LaunchThenCrash(Api& api) {
  const uint64_t capacity = 1 << 16;
  CUdeviceptr a, b, c;
  CHECK(api.alloc(&a, 4 * capacity));
  CHECK(api.alloc(&b, 4 * capacity));
  CHECK(api.alloc(&c, 4 * capacity));
  for (uint64_t n : {1000, 3000, 7000}) {
    void* params[] = {&a, &b, &c, &n};
    CHECK(api.launch(api.vadd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CHECK(api.sync());
  }
  std::raise(SIGKILL);  // as the OOM killer would: no handler, no core file
  return 0;
}

int Capture(Api& api) {
  auto begin = L<PFN_cuStreamBeginCapture_v10010>("cuStreamBeginCapture", 10010);
  auto end = L<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture", 10000);
  auto instantiate = L<PFN_cuGraphInstantiateWithFlags_v11040>("cuGraphInstantiateWithFlags", 11040);
  auto graph_launch = L<PFN_cuGraphLaunch_v10000>("cuGraphLaunch", 10000);
  const uint64_t n = 1 << 16;
  CUdeviceptr a, b, c;
  CHECK(api.alloc(&a, 4 * n));
  CHECK(api.alloc(&b, 4 * n));
  CHECK(api.alloc(&c, 4 * n));
  std::vector<float> x(n, 1.0f);
  CHECK(api.htod(a, x.data(), 4 * n));
  CHECK(api.htod(b, x.data(), 4 * n));
  CUstream s;
  CHECK(api.stream_create(&s, CU_STREAM_NON_BLOCKING));
  CHECK(begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  void* params[] = {&a, &b, &c, const_cast<uint64_t*>(&n)};
  CHECK(api.launch(api.vadd, n / 256, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  CUgraph g;
  CHECK(end(s, &g));
  CUgraphExec exec;
  CHECK(instantiate(&exec, g, 0));
  CHECK(graph_launch(exec, s));
  CHECK(api.stream_sync(s));
  CHECK(api.dtoh(x.data(), c, 4 * n));
  std::printf("replayed %g\n", x[n / 2]);
  return x[n / 2] == 2.0f ? 0 : 1;
}

int Vmm(Api& api) {
  auto create = L<PFN_cuMemCreate_v10020>("cuMemCreate", 10020);
  auto reserve = L<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve", 10020);
  auto map = L<PFN_cuMemMap_v10020>("cuMemMap", 10020);
  auto access = L<PFN_cuMemSetAccess_v10020>("cuMemSetAccess", 10020);
  auto unmap = L<PFN_cuMemUnmap_v10020>("cuMemUnmap", 10020);
  auto release = L<PFN_cuMemRelease_v10020>("cuMemRelease", 10020);
  auto info = L<PFN_cuMemGetInfo_v3020>("cuMemGetInfo", 3020);
  const size_t size = 4 << 20;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle h;
  CHECK(create(&h, size, &prop, 0));
  CUdeviceptr va;
  CHECK(reserve(&va, size, 0, 0, 0));
  CHECK(map(va, size, 0, h, 0));
  CUmemAccessDesc desc{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(access(va, size, &desc, 1));
  CUdeviceptr m;
  CHECK(api.alloc(&m, 8 << 20));
  size_t free = 0, total = 0;
  CHECK(info(&free, &total));
  std::printf("meminfo free %zu total %zu\n", free, total);
  CHECK(api.free(m));
  CHECK(unmap(va, size));
  CHECK(release(h));
  return 0;
}

int Share(Api& api, bool keep) {
  auto pool_create = L<PFN_cuMemPoolCreate_v11020>("cuMemPoolCreate", 11020);
  auto pool_destroy = L<PFN_cuMemPoolDestroy_v11020>("cuMemPoolDestroy", 11020);
  auto default_pool = L<PFN_cuDeviceGetDefaultMemPool_v11020>("cuDeviceGetDefaultMemPool", 11020);
  auto alloc_from = L<PFN_cuMemAllocFromPoolAsync_v11020>("cuMemAllocFromPoolAsync", 11020);
  auto free_async = L<PFN_cuMemFreeAsync_v11020>("cuMemFreeAsync", 11020);
  auto export_pointer = L<PFN_cuMemPoolExportPointer_v11020>("cuMemPoolExportPointer", 11020);
  auto attribute = L<PFN_cuPointerGetAttribute_v4000>("cuPointerGetAttribute", 4000);
  auto ipc_handle = L<PFN_cuIpcGetMemHandle_v4010>("cuIpcGetMemHandle", 4010);
  const auto managed = [&](CUdeviceptr p) {
    int is = -1;
    return attribute(&is, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS ? is : -1;
  };
  CUstream s;
  CHECK(api.stream_create(&s, CU_STREAM_NON_BLOCKING));
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemoryPool exportable, standard;
  CHECK(pool_create(&exportable, &props));
  CHECK(default_pool(&standard, 0));
  CUdeviceptr shared, own, plain;
  CHECK(alloc_from(&shared, 4 << 20, exportable, s));
  CHECK(alloc_from(&own, 4 << 20, standard, s));
  CUmemPoolPtrExportData data;
  std::printf("exportable managed %d export %d\n", managed(shared), export_pointer(&data, shared));
  std::printf("default managed %d\n", managed(own));
  CHECK(api.alloc(&plain, 1 << 20));
  CUipcMemHandle handle;
  std::printf("ipc %d\n", ipc_handle(&handle, plain));
  CHECK(free_async(own, s));
  if (!keep) CHECK(free_async(shared, s));
  CHECK(api.stream_sync(s));
  if (!keep) CHECK(pool_destroy(exportable));
  CHECK(api.free(plain));
  return 0;
}

int Async(Api& api) {
  auto alloc_async = L<PFN_cuMemAllocAsync_v11020>("cuMemAllocAsync", 11020);
  auto free_async = L<PFN_cuMemFreeAsync_v11020>("cuMemFreeAsync", 11020);
  const uint64_t n = 1 << 16;
  CUstream s;
  CHECK(api.stream_create(&s, CU_STREAM_NON_BLOCKING));
  std::vector<float> out(n);
  for (int round = 0; round < 4; ++round) {
    CUdeviceptr a, b, c;
    CHECK(alloc_async(&a, 4 * n, s));
    CHECK(alloc_async(&b, 4 * n, s));
    CHECK(alloc_async(&c, 4 * n, s));
    std::vector<float> x(n, static_cast<float>(round));
    CHECK(api.htod(a, x.data(), 4 * n));
    CHECK(api.htod(b, x.data(), 4 * n));
    void* params[] = {&a, &b, &c, const_cast<uint64_t*>(&n)};
    CHECK(api.launch(api.vadd, n / 256, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    CHECK(free_async(a, s));  // freed while the kernel may still run
    CHECK(free_async(b, s));
    CHECK(api.stream_sync(s));
    CHECK(api.dtoh(out.data(), c, 4 * n));
    CHECK(free_async(c, s));
    if (out[7] != 2.0f * round) {
      std::fprintf(stderr, "probe: round %d computed %g\n", round, out[7]);
      return 1;
    }
  }
  CHECK(api.sync());
  std::printf("async ok\n");
  return 0;
}

// A training loop over a per-tensor stream-ordered allocator. Weights are
// allocated once; each step's activations come from the pool one per layer
// and are freed (in stream order) as soon as the kernel that reads them last
// is queued, so the pool's reuse runs ahead of the device. Every fifth
// layer runs on a second stream, allocating there memory that the main
// stream freed. Only bytes a kernel wrote are ever read back.
int Pool(Api& api, int steps) {
  auto alloc_async = L<PFN_cuMemAllocAsync_v11020>("cuMemAllocAsync", 11020);
  auto alloc_pool = L<PFN_cuMemAllocFromPoolAsync_v11020>("cuMemAllocFromPoolAsync", 11020);
  auto free_async = L<PFN_cuMemFreeAsync_v11020>("cuMemFreeAsync", 11020);
  auto get_pool = L<PFN_cuDeviceGetDefaultMemPool_v11020>("cuDeviceGetDefaultMemPool", 11020);
  auto event_create = L<PFN_cuEventCreate_v2000>("cuEventCreate", 2000);
  auto event_record = L<PFN_cuEventRecord_v2000>("cuEventRecord", 2000);
  auto wait_event = L<PFN_cuStreamWaitEvent_v3020>("cuStreamWaitEvent", 3020);
  auto dtoh_async = L<PFN_cuMemcpyDtoHAsync_v3020>("cuMemcpyDtoHAsync", 3020);
  auto trim = L<PFN_cuMemPoolTrimTo_v11020>("cuMemPoolTrimTo", 11020);
  constexpr int kLayers = 16;
  constexpr uint64_t kWeight = 1 << 18;  // floats per layer's weights (1 MiB)
  // Activation sizes in bytes, from 64 KiB to 40 MiB (past 32 MiB, msched's
  // pool gives a request that nothing free fits a chunk of its own).
  const uint64_t kSizes[] = {64 << 10, 256 << 10, 1 << 20, 3 << 20, 40 << 20, 200 << 10};
  CUmemoryPool pool;
  CHECK(get_pool(&pool, 0));
  CUstream s, side;
  CHECK(api.stream_create(&s, CU_STREAM_NON_BLOCKING));
  CHECK(api.stream_create(&side, CU_STREAM_NON_BLOCKING));
  CUevent forked, joined;
  CHECK(event_create(&forked, CU_EVENT_DISABLE_TIMING));
  CHECK(event_create(&joined, CU_EVENT_DISABLE_TIMING));
  std::vector<CUdeviceptr> w(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    CHECK(alloc_pool(&w[l], 4 * kWeight, pool, s));
    std::vector<float> init(kWeight);
    for (uint64_t i = 0; i < kWeight; ++i) init[i] = static_cast<float>((i * 7 + l * 13) % 101) / 64.0f;
    CHECK(api.htod(w[l], init.data(), 4 * kWeight));
  }
  CHECK(api.stream_sync(s));
  uint64_t t0 = 0, t1 = 0, managed0 = 0, managed1 = 0;
  if (g_sim_time) g_sim_time(&t0);
  if (g_sim_calls) g_sim_calls("cuMemAllocManaged", &managed0);
  std::vector<float> losses;
  uint64_t allocations = 0;
  for (int t = 0; t < steps; ++t) {
    CUdeviceptr x;
    CHECK(alloc_async(&x, 4 * kWeight, s));
    allocations += 1;
    uint64_t valid = kWeight;
    void* first[] = {&w[0], &w[1], &x, &valid};
    CHECK(api.launch(api.vadd, (valid + 255) / 256, 1, 1, 256, 1, 1, 0, s, first, nullptr));
    for (int l = 2; l < kLayers; ++l) {
      const uint64_t bytes = kSizes[(l + t) % (sizeof kSizes / sizeof kSizes[0])];
      uint64_t n = std::min<uint64_t>({valid, kWeight, bytes / 4});
      CUdeviceptr y;
      void* params[] = {&x, &w[l], &y, &n};
      const unsigned grid = static_cast<unsigned>((n + 255) / 256);
      if (l % 5 == 0) {  // forked onto the side stream, joined back
        CHECK(event_record(forked, s));
        CHECK(wait_event(side, forked, 0));
        CHECK(alloc_async(&y, bytes, side));
        CHECK(api.launch(api.vadd, grid, 1, 1, 256, 1, 1, 0, side, params, nullptr));
        CHECK(event_record(joined, side));
        CHECK(wait_event(s, joined, 0));
      } else {
        CHECK(l % 2 ? alloc_pool(&y, bytes, pool, s) : alloc_async(&y, bytes, s));
        CHECK(api.launch(api.vadd, grid, 1, 1, 256, 1, 1, 0, s, params, nullptr));
      }
      CHECK(free_async(x, s));  // its last reader is queued, perhaps not run
      allocations += 1;
      x = y;
      valid = n;
    }
    float loss = 0;  // as loss.item(): one value back per step
    CHECK(dtoh_async(&loss, x + 4 * (valid - 1), 4, s));
    CHECK(api.stream_sync(s));
    losses.push_back(loss);
    if (t + 1 == steps) {
      std::vector<float> last(valid);
      CHECK(api.dtoh(last.data(), x, 4 * valid));
      std::printf("checksum last %016llx\n", static_cast<unsigned long long>(Fnv(last)));
    }
    CHECK(free_async(x, s));
  }
  CHECK(api.stream_sync(s));
  if (g_sim_time) g_sim_time(&t1);
  if (g_sim_calls) g_sim_calls("cuMemAllocManaged", &managed1);
  std::printf("checksum losses %016llx\n", static_cast<unsigned long long>(Fnv(losses)));
  for (CUdeviceptr p : w) CHECK(free_async(p, s));
  CHECK(api.sync());
  CHECK(trim(pool, 0));  // as torch.cuda.empty_cache(): all of it goes back
  std::printf("pool steps %d allocations %llu ns_per_step %llu managed_allocations %llu\n", steps,
              static_cast<unsigned long long>(allocations),
              static_cast<unsigned long long>(steps > 0 ? (t1 - t0) / steps : 0),
              static_cast<unsigned long long>(managed1 - managed0));
  return 0;
}

int IdleBetweenLaunches(Api& api, uint64_t host_us) {
  if (g_sim_time == nullptr || g_sim_advance == nullptr || g_sim_alarm == nullptr) {
    std::fprintf(stderr, "probe: idle needs the simulated driver\n");
    return 1;
  }
  uint64_t n = 3'500'000;  // three buffers of 14 MB
  CUdeviceptr a, b, c;
  CHECK(api.alloc(&a, 4 * n));
  CHECK(api.alloc(&b, 4 * n));
  CHECK(api.alloc(&c, 4 * n));
  std::vector<float> x(n), y(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000), y[i] = 0.25f;
  CHECK(api.htod(a, x.data(), 4 * n));
  CHECK(api.htod(b, y.data(), 4 * n));
  void* params[] = {&a, &b, &c, &n};
  CHECK(api.launch(api.vadd, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  CHECK(api.sync());
  CHECK(g_sim_alarm(0, nullptr));
  uint64_t now = 0;
  CHECK(g_sim_time(&now));
  CHECK(g_sim_advance(now + host_us * 1000));
  void* again[] = {&c, &b, &a, &n};
  CHECK(api.launch(api.vadd, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr, again, nullptr));
  CHECK(api.sync());
  CHECK(api.dtoh(x.data(), a, 4 * n));
  std::printf("checksum %016llx\n", static_cast<unsigned long long>(Fnv(x)));
  return 0;
}

int RtldNext() {
  // From the main program, the next definition of a hooked name is the
  // interposer's; of an ordinary libc function, libc's.
  std::printf("cuLaunchKernel %s\n", Owner(dlsym(RTLD_NEXT, "cuLaunchKernel")).c_str());
  std::printf("strlen %s\n", Owner(dlsym(RTLD_NEXT, "strlen")).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: probe_app lookups|run|run_ptsz|capture|vmm|async|pool [steps]|rtld_next|crash|late_context|idle US\n");
    return 1;
  }
  const std::string cmd = argv[1];
  if (cmd == "rtld_next") return RtldNext();
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "probe: cannot open libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  auto first = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
  if (first == nullptr) return 1;
  g_lookup = first;
  g_sim_time = reinterpret_cast<decltype(g_sim_time)>(dlsym(h, "msimGetTime"));
  g_sim_calls = reinterpret_cast<decltype(g_sim_calls)>(dlsym(h, "msimCallCount"));
  g_sim_advance = reinterpret_cast<decltype(g_sim_advance)>(dlsym(h, "msimAdvanceTo"));
  g_sim_alarm = reinterpret_cast<decltype(g_sim_alarm)>(dlsym(h, "msimSetIdleAlarm"));
  // As cudart does: from here on, use the pointer returned for cuGetProcAddress itself.
  g_lookup = L<PFN_cuGetProcAddress_v12000>("cuGetProcAddress", 12000);
  if (cmd == "lookups") {
    std::printf("dlsym cuGetProcAddress_v2 %s\n", Owner(reinterpret_cast<void*>(first)).c_str());
    return Lookups();
  }
  Api api;
  if (cmd == "late_context") {
    CHECK(api.init(0));
    CUdeviceptr early = 0;
    std::printf("no context: %d\n", static_cast<int>(api.alloc(&early, 1 << 20)));
    if (int r = api.Setup()) return r;
    return Run(api, 1 << 18, false);
  }
  if (int r = api.Setup()) return r;
  if (cmd == "run") return Run(api, 1 << 18, false);
  if (cmd == "run_ptsz") return Run(api, 1 << 18, true);
  if (cmd == "capture") return Capture(api);
  if (cmd == "vmm") return Vmm(api);
  if (cmd == "share") return Share(api, argc > 2 && std::string(argv[2]) == "keep");
  if (cmd == "async") return Async(api);
  if (cmd == "pool") return Pool(api, argc > 2 ? std::atoi(argv[2]) : 20);
  if (cmd == "crash") return LaunchThenCrash(api);
  if (cmd == "idle" && argc > 2) return IdleBetweenLaunches(api, std::strtoull(argv[2], nullptr, 10));
  std::fprintf(stderr, "probe: unknown command %s\n", cmd.c_str());
  return 1;
}

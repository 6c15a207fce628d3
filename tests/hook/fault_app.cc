// A driver-API program for fault-injection tests: it makes one hooked call,
// named by the test, after writing a known pattern to device memory, and
// reports what the call returned and whether the pattern survived. It reaches
// the driver as cudart does (dlopen, cuGetProcAddress), so under LD_PRELOAD
// every call below goes through libmsched's wrappers.
//   fault_app <base> <abi version> <flavour 0|1|2> <counted name>...
// prints
//   count <name> <calls before> <calls after>   (msimCallCount around the call)
//   result <CUresult of the call>
//   witness <checksum read back> expected <checksum written>
// Exit status 0 when it got that far (whatever the call returned), 1 when
// anything else failed, 3 when it does not know how to make the call.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

const char* kModule = R"({"format":"msim-module","version":1,"kernels":[
  {"name":"vector_add","params":[8,8,8,8],"host":"vector_add_f32",
   "accesses":[{"arg":"p0","mode":"read","extent":"4*p3"},{"arg":"p1","mode":"read","extent":"4*p3"},
               {"arg":"p2","mode":"write","extent":"4*p3"}],"cost":{"bytes":"12*p3"}}]})";

constexpr uint64_t kN = 1 << 14;  // floats in each buffer
constexpr size_t kBytes = 4 * kN;

PFN_cuGetProcAddress_v12000 g_lookup = nullptr;

void* Lookup(const char* name, int version, int flavour = 0) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  const cuuint64_t flags = flavour != 0 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
  if (g_lookup(name, &fn, version, flags, &status) != CUDA_SUCCESS || fn == nullptr) {
    std::fprintf(stderr, "fault_app: cannot resolve %s@%d\n", name, version);
    std::exit(1);
  }
  return fn;
}

template <typename Fn>
Fn L(const char* name, int version, int flavour = 0) {
  return reinterpret_cast<Fn>(Lookup(name, version, flavour));
}

#define CHECK(expr)                                                                      \
  do {                                                                                   \
    CUresult r_ = (expr);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                            \
      std::fprintf(stderr, "fault_app: %s failed: %d (line %d)\n", #expr, r_, __LINE__); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

uint64_t Fnv(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// What the program holds when the call is made. The call under test writes
// to `witness` wherever it writes device memory at all, so that a failed call
// that still wrote would show in the checksum.
struct World {
  CUcontext ctx = nullptr;
  CUfunction vadd = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr witness = 0, a = 0, b = 0;
  uint64_t n = kN;
  std::vector<float> host = std::vector<float>(kN, 0.0f);
  PFN_cuMemAlloc_v3020 alloc = L<PFN_cuMemAlloc_v3020>("cuMemAlloc", 3020);
  PFN_cuMemcpyHtoD_v3020 htod = L<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD", 3020);
  PFN_cuMemcpyDtoH_v3020 dtoh = L<PFN_cuMemcpyDtoH_v3020>("cuMemcpyDtoH", 3020);
  PFN_cuCtxSynchronize_v2000 sync = L<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize", 2000);

  void* params[4] = {&a, &b, &witness, &n};
};

void Setup(World& w) {
  CHECK(L<PFN_cuInit_v2000>("cuInit", 2000)(0));
  CUdevice dev;
  CHECK(L<PFN_cuDeviceGet_v2000>("cuDeviceGet", 2000)(&dev, 0));
  CHECK(L<PFN_cuDevicePrimaryCtxRetain_v7000>("cuDevicePrimaryCtxRetain", 7000)(&w.ctx, dev));
  CHECK(L<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000)(w.ctx));
  CUmodule m;
  CHECK(L<PFN_cuModuleLoadData_v2000>("cuModuleLoadData", 2000)(&m, kModule));
  CHECK(L<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction", 2000)(&w.vadd, m, "vector_add"));
  CHECK(L<PFN_cuStreamCreate_v2000>("cuStreamCreate", 2000)(&w.stream, CU_STREAM_NON_BLOCKING));
  for (CUdeviceptr* d : {&w.witness, &w.a, &w.b}) CHECK(w.alloc(d, kBytes));
  std::vector<float> x(kN);
  for (uint64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 977) * 0.5f;
  CHECK(w.htod(w.a, x.data(), kBytes));
  CHECK(w.htod(w.b, x.data(), kBytes));
  for (uint64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 613) + 0.25f;
  CHECK(w.htod(w.witness, x.data(), kBytes));
  CHECK(w.sync());
}

using Action = std::function<CUresult()>;

// The call `base` (ABI `version`, stream flavour `flavour`), with whatever it
// needs prepared; empty when fault_app does not know the call. Preparation
// happens here, before the call counts are read.
Action Prepare(World& w, const std::string& base, int version, int flavour) {
  auto fn = [&](auto* typed) { return reinterpret_cast<decltype(typed)>(Lookup(base.c_str(), version, flavour)); };
  const CUstream s = w.stream;
  const CUdeviceptr W = w.witness, A = w.a;
  if (base == "cuGetProcAddress") {
    if (version >= 12000) {
      return [] {
        void* p;
        CUdriverProcAddressQueryResult st;
        return g_lookup("cuMemAlloc", &p, 3020, 0, &st);
      };
    }
    auto f = fn(PFN_cuGetProcAddress_v11030{});
    return [f] {
      void* p;
      return f("cuMemAlloc", &p, 3020, 0);
    };
  }
  if (base == "cuMemAlloc") {
    auto f = fn(PFN_cuMemAlloc_v3020{});
    return [f] {
      CUdeviceptr d;
      return f(&d, kBytes);
    };
  }
  if (base == "cuMemAllocPitch") {
    auto f = fn(PFN_cuMemAllocPitch_v3020{});
    return [f] {
      CUdeviceptr d;
      size_t pitch;
      return f(&d, &pitch, 256, 16, 4);
    };
  }
  if (base == "cuMemFree" || base == "cuMemFreeAsync") {
    CUdeviceptr d;
    CHECK(w.alloc(&d, kBytes));
    if (base == "cuMemFree") {
      auto f = fn(PFN_cuMemFree_v3020{});
      return [f, d] { return f(d); };
    }
    auto f = fn(PFN_cuMemFreeAsync_v11020{});
    return [f, d, s] { return f(d, s); };
  }
  if (base == "cuMemAllocManaged") {
    auto f = fn(PFN_cuMemAllocManaged_v6000{});
    return [f] {
      CUdeviceptr d;
      return f(&d, kBytes, CU_MEM_ATTACH_GLOBAL);
    };
  }
  if (base == "cuMemAllocAsync") {
    auto f = fn(PFN_cuMemAllocAsync_v11020{});
    return [f, s] {
      CUdeviceptr d;
      return f(&d, kBytes, s);
    };
  }
  if (base == "cuMemAllocFromPoolAsync") {
    CUmemoryPool pool;
    CHECK(L<PFN_cuDeviceGetDefaultMemPool_v11020>("cuDeviceGetDefaultMemPool", 11020)(&pool, 0));
    auto f = fn(PFN_cuMemAllocFromPoolAsync_v11020{});
    return [f, s, pool] {
      CUdeviceptr d;
      return f(&d, kBytes, pool, s);
    };
  }
  if (base == "cuMemPoolTrimTo") {
    CUmemoryPool pool;
    CHECK(L<PFN_cuDeviceGetDefaultMemPool_v11020>("cuDeviceGetDefaultMemPool", 11020)(&pool, 0));
    auto f = fn(PFN_cuMemPoolTrimTo_v11020{});
    return [f, pool] { return f(pool, 0); };
  }
  if (base == "cuMemPoolCreate" || base == "cuMemPoolDestroy") {
    static const CUmemPoolProps props = [] {
      CUmemPoolProps p{};
      p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      p.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
      return p;
    }();
    if (base == "cuMemPoolCreate") {
      auto f = fn(PFN_cuMemPoolCreate_v11020{});
      return [f] {
        CUmemoryPool pool;
        return f(&pool, &props);
      };
    }
    CUmemoryPool pool;
    CHECK(L<PFN_cuMemPoolCreate_v11020>("cuMemPoolCreate", 11020)(&pool, &props));
    auto f = fn(PFN_cuMemPoolDestroy_v11020{});
    return [f, pool] { return f(pool); };
  }
  if (base == "cuMemGetInfo") {
    auto f = fn(PFN_cuMemGetInfo_v3020{});
    return [f] {
      size_t free, total;
      return f(&free, &total);
    };
  }
  if (base == "cuMemCreate" || base == "cuMemRelease" || base == "cuMemMap" || base == "cuMemUnmap" ||
      base == "cuMemSetAccess" || base == "cuMemRetainAllocationHandle" || base == "cuMemExportToShareableHandle" ||
      base == "cuMemImportFromShareableHandle" || base == "cuMemGetAllocationPropertiesFromHandle") {
    static CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // exportable
    const size_t size = 2 << 20;
    if (base == "cuMemCreate") {
      auto f = fn(PFN_cuMemCreate_v10020{});
      return [f, size] {
        CUmemGenericAllocationHandle h;
        return f(&h, size, &prop, 0);
      };
    }
    CUmemGenericAllocationHandle h;
    CHECK(L<PFN_cuMemCreate_v10020>("cuMemCreate", 10020)(&h, size, &prop, 0));
    if (base == "cuMemImportFromShareableHandle") {  // this process's own export, imported
      int fd = -1;
      CHECK(L<PFN_cuMemExportToShareableHandle_v10020>("cuMemExportToShareableHandle", 10020)(
          &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      auto f = fn(PFN_cuMemImportFromShareableHandle_v10020{});
      return [f, fd] {
        CUmemGenericAllocationHandle imported;
        return f(&imported, reinterpret_cast<void*>(intptr_t{fd}), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      };
    }
    if (base == "cuMemRelease") {
      auto f = fn(PFN_cuMemRelease_v10020{});
      return [f, h] { return f(h); };
    }
    if (base == "cuMemExportToShareableHandle") {
      auto f = fn(PFN_cuMemExportToShareableHandle_v10020{});
      return [f, h] {
        int fd = -1;
        return f(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      };
    }
    if (base == "cuMemGetAllocationPropertiesFromHandle") {
      auto f = fn(PFN_cuMemGetAllocationPropertiesFromHandle_v10020{});
      return [f, h] {
        CUmemAllocationProp got{};
        return f(&got, h);
      };
    }
    CUdeviceptr va;
    CHECK(L<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve", 10020)(&va, size, 0, 0, 0));
    if (base == "cuMemMap") {
      auto f = fn(PFN_cuMemMap_v10020{});
      return [f, va, size, h] { return f(va, size, 0, h, 0); };
    }
    CHECK(L<PFN_cuMemMap_v10020>("cuMemMap", 10020)(va, size, 0, h, 0));
    static const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (base == "cuMemSetAccess") {
      auto f = fn(PFN_cuMemSetAccess_v10020{});
      return [f, va, size] { return f(va, size, &access, 1); };
    }
    CHECK(L<PFN_cuMemSetAccess_v10020>("cuMemSetAccess", 10020)(va, size, &access, 1));
    if (base == "cuMemRetainAllocationHandle") {
      auto f = fn(PFN_cuMemRetainAllocationHandle_v11000{});
      return [f, va] {
        CUmemGenericAllocationHandle retained;
        return f(&retained, reinterpret_cast<void*>(va));
      };
    }
    auto f = fn(PFN_cuMemUnmap_v10020{});
    return [f, va, size] { return f(va, size); };
  }
  if (base == "cuIpcOpenMemHandle") {
    auto f = fn(PFN_cuIpcOpenMemHandle_v11000{});
    return [f] {
      CUdeviceptr d;
      CUipcMemHandle h{};
      return f(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    };
  }
  if (base == "cuIpcCloseMemHandle") {
    auto f = fn(PFN_cuIpcCloseMemHandle_v4010{});
    return [f, A] { return f(A); };
  }
  if (base == "cuIpcGetMemHandle") {
    auto f = fn(PFN_cuIpcGetMemHandle_v4010{});
    return [f, A] {
      CUipcMemHandle h;
      return f(&h, A);
    };
  }
  void** params = w.params;
  const CUfunction k = w.vadd;
  const unsigned grid = kN / 256;
  if (base == "cuLaunchKernel") {
    auto f = fn(PFN_cuLaunchKernel_v4000{});
    return [=] { return f(k, grid, 1, 1, 256, 1, 1, 0, s, params, nullptr); };
  }
  if (base == "cuLaunchCooperativeKernel") {
    auto f = fn(PFN_cuLaunchCooperativeKernel_v9000{});
    return [=] { return f(k, grid, 1, 1, 256, 1, 1, 0, s, params); };
  }
  if (base == "cuLaunchKernelEx") {
    auto f = fn(PFN_cuLaunchKernelEx_v11060{});
    return [=] {
      CUlaunchConfig c{};
      c.gridDimX = grid;
      c.gridDimY = c.gridDimZ = c.blockDimY = c.blockDimZ = 1;
      c.blockDimX = 256;
      c.hStream = s;
      return f(&c, k, params, nullptr);
    };
  }
  if (base == "cuGraphLaunch" || base == "cuStreamEndCapture") {
    CHECK(L<PFN_cuStreamBeginCapture_v10010>("cuStreamBeginCapture", 10010)(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(L<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000)(k, grid, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    if (base == "cuStreamEndCapture") {
      auto f = fn(PFN_cuStreamEndCapture_v10000{});
      return [f, s] {
        CUgraph g;
        const CUresult r = f(s, &g);
        if (r != CUDA_SUCCESS) CHECK(f(s, &g));  // leave the stream usable
        return r;
      };
    }
    CUgraph g;
    CHECK(L<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture", 10000)(s, &g));
    CUgraphExec exec;
    CHECK(L<PFN_cuGraphInstantiateWithFlags_v11040>("cuGraphInstantiateWithFlags", 11040)(&exec, g, 0));
    auto f = fn(PFN_cuGraphLaunch_v10000{});
    return [f, exec, s] { return f(exec, s); };
  }
  if (base == "cuGraphInstantiateWithFlags" || base == "cuGraphInstantiateWithParams" || base == "cuGraphExecDestroy" ||
      base == "cuGraphDestroy") {
    CHECK(L<PFN_cuStreamBeginCapture_v10010>("cuStreamBeginCapture", 10010)(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(L<PFN_cuLaunchKernel_v4000>("cuLaunchKernel", 4000)(k, grid, 1, 1, 256, 1, 1, 0, s, params, nullptr));
    CUgraph g;
    CHECK(L<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture", 10000)(s, &g));
    if (base == "cuGraphInstantiateWithFlags") {
      auto f = fn(PFN_cuGraphInstantiateWithFlags_v11040{});
      return [f, g] {
        CUgraphExec exec;
        return f(&exec, g, 0);
      };
    }
    if (base == "cuGraphInstantiateWithParams") {
      auto f = fn(PFN_cuGraphInstantiateWithParams_v12000{});
      return [f, g] {
        CUDA_GRAPH_INSTANTIATE_PARAMS p{};
        CUgraphExec exec;
        return f(&exec, g, &p);
      };
    }
    if (base == "cuGraphExecDestroy") {
      CUgraphExec exec;
      CHECK(L<PFN_cuGraphInstantiateWithFlags_v11040>("cuGraphInstantiateWithFlags", 11040)(&exec, g, 0));
      auto f = fn(PFN_cuGraphExecDestroy_v10000{});
      return [f, exec] { return f(exec); };
    }
    // No executable graph holds it, so the driver is asked at once.
    auto f = fn(PFN_cuGraphDestroy_v10000{});
    return [f, g] { return f(g); };
  }
  if (base == "cuStreamBeginCapture") {
    auto f = fn(PFN_cuStreamBeginCapture_v10010{});
    auto end = L<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture", 10000);
    return [f, end, s] {
      const CUresult r = f(s, CU_STREAM_CAPTURE_MODE_RELAXED);
      CUgraph g;
      if (r == CUDA_SUCCESS) CHECK(end(s, &g));  // leave the stream usable
      return r;
    };
  }
  if (base == "cuMemcpy") {
    auto f = fn(PFN_cuMemcpy_v4000{});
    return [=] { return f(W, A, kBytes); };
  }
  if (base == "cuMemcpyAsync") {
    auto f = fn(PFN_cuMemcpyAsync_v4000{});
    return [=] { return f(W, A, kBytes, s); };
  }
  float* host = w.host.data();
  if (base == "cuMemcpyHtoD") {
    auto f = fn(PFN_cuMemcpyHtoD_v3020{});
    return [=] { return f(W, host, kBytes); };
  }
  if (base == "cuMemcpyHtoDAsync") {
    auto f = fn(PFN_cuMemcpyHtoDAsync_v3020{});
    return [=] { return f(W, host, kBytes, s); };
  }
  if (base == "cuMemcpyDtoH") {
    auto f = fn(PFN_cuMemcpyDtoH_v3020{});
    return [=] { return f(host, W, kBytes); };
  }
  if (base == "cuMemcpyDtoHAsync") {
    auto f = fn(PFN_cuMemcpyDtoHAsync_v3020{});
    return [=] { return f(host, W, kBytes, s); };
  }
  if (base == "cuMemcpyDtoD") {
    auto f = fn(PFN_cuMemcpyDtoD_v3020{});
    return [=] { return f(W, A, kBytes); };
  }
  if (base == "cuMemcpyDtoDAsync") {
    auto f = fn(PFN_cuMemcpyDtoDAsync_v3020{});
    return [=] { return f(W, A, kBytes, s); };
  }
  if (base == "cuMemsetD8") {
    auto f = fn(PFN_cuMemsetD8_v3020{});
    return [=] { return f(W, 0x5a, kBytes); };
  }
  if (base == "cuMemsetD16") {
    auto f = fn(PFN_cuMemsetD16_v3020{});
    return [=] { return f(W, 0x5a5a, kBytes / 2); };
  }
  if (base == "cuMemsetD32") {
    auto f = fn(PFN_cuMemsetD32_v3020{});
    return [=] { return f(W, 0x5a5a5a5a, kBytes / 4); };
  }
  if (base == "cuMemsetD8Async") {
    auto f = fn(PFN_cuMemsetD8Async_v3020{});
    return [=] { return f(W, 0x5a, kBytes, s); };
  }
  if (base == "cuMemsetD16Async") {
    auto f = fn(PFN_cuMemsetD16Async_v3020{});
    return [=] { return f(W, 0x5a5a, kBytes / 2, s); };
  }
  if (base == "cuMemsetD32Async") {
    auto f = fn(PFN_cuMemsetD32Async_v3020{});
    return [=] { return f(W, 0x5a5a5a5a, kBytes / 4, s); };
  }
  if (base == "cuCtxSynchronize") {
    if (version >= 13000) {
      auto f = fn(PFN_cuCtxSynchronize_v13000{});
      const CUcontext ctx = w.ctx;
      return [f, ctx] { return f(ctx); };
    }
    auto f = fn(PFN_cuCtxSynchronize_v2000{});
    return [f] { return f(); };
  }
  if (base == "cuStreamSynchronize") {
    auto f = fn(PFN_cuStreamSynchronize_v2000{});
    return [f, s] { return f(s); };
  }
  if (base == "cuEventSynchronize") {
    CUevent e;
    CHECK(L<PFN_cuEventCreate_v2000>("cuEventCreate", 2000)(&e, 0));
    CHECK(L<PFN_cuEventRecord_v2000>("cuEventRecord", 2000)(e, s));
    auto f = fn(PFN_cuEventSynchronize_v2000{});
    return [f, e] { return f(e); };
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: fault_app <base> <abi version> <flavour> <counted name>...\n");
    return 1;
  }
  const std::string base = argv[1];
  const int version = std::atoi(argv[2]), flavour = std::atoi(argv[3]);
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    std::fprintf(stderr, "fault_app: %s\n", dlerror());
    return 1;
  }
  g_lookup = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
  using CallCountFn = CUresult (*)(const char*, uint64_t*);
  auto call_count = reinterpret_cast<CallCountFn>(dlsym(h, "msimCallCount"));
  if (g_lookup == nullptr || call_count == nullptr) {
    std::fprintf(stderr, "fault_app: needs the simulated driver\n");
    return 1;
  }
  World w;
  Setup(w);
  std::vector<float> pattern(kN);
  CHECK(w.dtoh(pattern.data(), w.witness, kBytes));
  const uint64_t expected = Fnv(pattern.data(), kBytes);

  const Action call = Prepare(w, base, version, flavour);
  if (!call) {
    std::fprintf(stderr, "fault_app: does not know how to call %s@%d\n", base.c_str(), version);
    return 3;
  }
  std::vector<uint64_t> before(argc - 4), after(argc - 4);
  for (int i = 4; i < argc; ++i) CHECK(call_count(argv[i], &before[i - 4]));
  const CUresult r = call();
  for (int i = 4; i < argc; ++i) CHECK(call_count(argv[i], &after[i - 4]));

  CHECK(w.sync());
  std::vector<float> back(kN);
  CHECK(w.dtoh(back.data(), w.witness, kBytes));
  for (int i = 4; i < argc; ++i) {
    std::printf("count %s %llu %llu\n", argv[i], static_cast<unsigned long long>(before[i - 4]),
                static_cast<unsigned long long>(after[i - 4]));
  }
  std::printf("result %d\n", static_cast<int>(r));
  std::printf("witness %016llx expected %016llx\n", static_cast<unsigned long long>(Fnv(back.data(), kBytes)),
              static_cast<unsigned long long>(expected));
  return 0;
}

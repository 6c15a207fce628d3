// Tests of the simulated driver's API in one process, beside the memory
// model: host kernels, the extra launch form, a replayed launch's ranges
// and time (msimSetNextLaunch), events, the idle alarm,
// capture, VMM, pointer attributes, malformed modules, parameter info,
// cuGetProcAddress semantics, unimplemented calls and sticky errors.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "sim_test_util.h"

#include "sim_driver_fixture.h"
#include "sim_test_util.h"

namespace msim_test {
namespace {

TEST_F(SimDriverTest, HostKernelsComputeOnTheData) {
  const uint64_t n = 1 << 16;
  CUdeviceptr a = Managed(4 * n), b = Managed(4 * n), c = Managed(4 * n);
  std::vector<float> x(n), y(n), z(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 2.0f * static_cast<float>(i);
  CU_ASSERT(cuMemcpyHtoD(a, x.data(), 4 * n));
  CU_ASSERT(cuMemcpyHtoD(b, y.data(), 4 * n));
  uint64_t nn = n;
  void* params[] = {&a, &b, &c, &nn};
  CU_ASSERT(cuLaunchKernel(vadd_, n / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
  CU_ASSERT(cuMemcpyDtoH(z.data(), c, 4 * n));
  for (uint64_t i = 0; i < n; i += 997) EXPECT_EQ(z[i], 3.0f * static_cast<float>(i));
}

TEST_F(SimDriverTest, ExtraFormAndLaunchExReachTheSameKernel) {
  const uint64_t n = 1024;
  CUdeviceptr a = Managed(4 * n), b = Managed(4 * n), c = Managed(4 * n);
  CU_ASSERT(cuMemsetD32(a, 0x3f800000, n));  // 1.0f
  CU_ASSERT(cuMemsetD32(b, 0x40000000, n));  // 2.0f
  struct {
    CUdeviceptr a, b, c;
    uint64_t n;
  } packed{a, b, c, n};
  size_t size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 256, config.blockDimY = config.blockDimZ = 1;
  CU_ASSERT(cuLaunchKernelEx(&config, vadd_, nullptr, extra));
  float out = 0;
  CU_ASSERT(cuMemcpyDtoH(&out, c + 4 * 100, 4));
  EXPECT_EQ(out, 3.0f);
  size = 8;  // smaller than the layout
  EXPECT_EQ(cuLaunchKernelEx(&config, vadd_, nullptr, extra), CUDA_ERROR_INVALID_VALUE);
}

std::vector<msimRange> LastAccesses() {
  size_t n = 0;
  msimLastLaunchAccesses(nullptr, 0, &n);
  std::vector<msimRange> out(n);
  msimLastLaunchAccesses(out.data(), out.size(), &n);
  return out;
}

TEST_F(SimDriverTest, ASetNextLaunchReplacesTheAccessesAndTimeOfThatFunctionsNextLaunchOnly) {
  const uint64_t mib = 1 << 20;
  CUdeviceptr a = Managed(4 * mib);
  Prefetch(a, 4 * mib, true);
  const msimRange ranges[] = {{a + mib, a + 2 * mib, 2, 0}, {a + 3 * mib, a + 3 * mib + 64, 1, 0}};
  CU_ASSERT(msimSetNextLaunch(touch_, ranges, 2, 5'000'000));
  Spin(a, 1, nullptr);  // another function: the override waits for touch's launch
  ASSERT_EQ(LastAccesses().size(), 1u);
  EXPECT_EQ(LastAccesses()[0].begin, a) << "spin touches what its declaration lists";
  const uint64_t replayed = Timed([&] { Touch(a, 4096); });
  const std::vector<msimRange> got = LastAccesses();
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].begin, ranges[i].begin);
    EXPECT_EQ(got[i].end, ranges[i].end);
    EXPECT_EQ(got[i].mode, ranges[i].mode);
  }
  EXPECT_GE(replayed, 5'000'000u) << "the given compute time";
  EXPECT_LT(replayed, 5'100'000u);
  // Once used, it is gone: the next launch is the declaration's again.
  const uint64_t declared = Timed([&] { Touch(a, 4096); });
  ASSERT_EQ(LastAccesses().size(), 1u);
  EXPECT_EQ(LastAccesses()[0].end, a + 4096);
  EXPECT_LT(declared, 100'000u);
  // Without a time, the model: launch time plus the bytes at HBM bandwidth,
  // so a range 64 times larger takes longer.
  const msimRange small[] = {{a, a + 64 * 1024, 1, 0}}, large[] = {{a, a + 4 * mib, 1, 0}};
  CU_ASSERT(msimSetNextLaunch(touch_, small, 1, 0));
  const uint64_t t_small = Timed([&] { Touch(a, 8); });
  CU_ASSERT(msimSetNextLaunch(touch_, large, 1, 0));
  const uint64_t t_large = Timed([&] { Touch(a, 8); });
  EXPECT_GT(t_large, t_small);
  // No ranges at all: the launch touches nothing.
  CU_ASSERT(msimSetNextLaunch(touch_, nullptr, 0, 0));
  Touch(a, 4096);
  EXPECT_TRUE(LastAccesses().empty());
  const msimRange empty[] = {{a + 8, a + 8, 1, 0}}, bad_mode[] = {{a, a + 8, 4, 0}};
  EXPECT_EQ(msimSetNextLaunch(touch_, empty, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(msimSetNextLaunch(touch_, bad_mode, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(msimSetNextLaunch(nullptr, nullptr, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(msimSetNextLaunch(touch_, nullptr, 1, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, EventsMeasureVirtualTime) {
  CUdeviceptr small = Managed(4096);
  Prefetch(small, 4096, true);
  CUevent e0, e1;
  CU_ASSERT(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU_ASSERT(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU_ASSERT(cuEventRecord(e0, nullptr));
  Spin(small, 563'000'000'000, nullptr);  // 10 ms at 56.3 TFLOPS
  CU_ASSERT(cuEventRecord(e1, nullptr));
  CU_ASSERT(cuEventSynchronize(e1));
  float ms = 0;
  CU_ASSERT(cuEventElapsedTime(&ms, e0, e1));
  EXPECT_NEAR(ms, 10.0 + 0.003, 0.01);
  CU_ASSERT(cuEventDestroy(e0));
  CU_ASSERT(cuEventDestroy(e1));
}

// The idle alarm is a timer in virtual time for a job that gives
// its turn on the GPU up when it has been idle: it fires where the idleness
// runs out, on the thread that moves the clock, and again every idle period
// while the process stays idle, counting queued work as activity, and never
// from within itself.
std::vector<uint64_t> g_alarms;  // the virtual times the alarm fired at
void RecordAlarm() {
  g_alarms.push_back(Now());
  msimAdvanceTo(Now() + 2'500'000);  // from within the alarm: no second one
}

TEST_F(SimDriverTest, TheIdleAlarmFiresEveryIdlePeriodWhileTheProcessStaysIdle) {
  struct Disarm {
    ~Disarm() { msimSetIdleAlarm(0, nullptr); }
  } disarm;
  g_alarms.clear();
  CUdeviceptr small = Managed(4096);
  Prefetch(small, 4096, true);
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(msimSetIdleAlarm(1'000'000, RecordAlarm));
  const uint64_t t0 = Now();  // the synchronisation's end: idle from here
  CU_ASSERT(msimAdvanceTo(t0 + 500'000));
  EXPECT_TRUE(g_alarms.empty()) << "idle for 0.5 ms only";
  CU_ASSERT(msimAdvanceTo(t0 + 3'000'000));
  ASSERT_EQ(g_alarms.size(), 1u);
  EXPECT_EQ(g_alarms[0], t0 + 1'000'000) << "the clock stops where 1 ms of idleness ran out";
  EXPECT_EQ(Now(), t0 + 3'500'000) << "then goes on: the alarm moved it 2.5 ms, past the 3 ms asked for";
  // Still idle: at 4 ms and 5 ms into the period (the points at 2 and 3 ms
  // passed within the alarm), each moving the clock 2.5 ms on again.
  CU_ASSERT(msimAdvanceTo(t0 + 5'000'000));
  ASSERT_EQ(g_alarms.size(), 2u);
  EXPECT_EQ(g_alarms[1], t0 + 4'000'000);
  EXPECT_EQ(Now(), t0 + 6'500'000);
  CU_ASSERT(msimAdvanceTo(t0 + 7'000'000));
  ASSERT_EQ(g_alarms.size(), 3u);
  EXPECT_EQ(g_alarms[2], t0 + 7'000'000) << "every 1 ms of the period, from where the clock is";

  // A 10 ms kernel still queued is work: a new period starts at its end.
  const uint64_t t1 = Now();
  Spin(small, 563'000'000'000, nullptr);
  CU_ASSERT(msimAdvanceTo(t1 + 11'500'000));
  ASSERT_EQ(g_alarms.size(), 4u);
  EXPECT_GE(g_alarms[3], t1 + 11'000'000);
  EXPECT_LT(g_alarms[3], t1 + 11'100'000);

  CU_ASSERT(msimSetIdleAlarm(0, nullptr));
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(msimAdvanceTo(Now() + 10'000'000));
  EXPECT_EQ(g_alarms.size(), 4u) << "disarmed";
}

// However short its period, the idle alarm looks again at most once a
// millisecond of an idle stretch: a 1 ns alarm once fired a billion times
// over a virtual second of host work, and the process never finished it.
int g_alarm_count = 0;
void CountAlarm() { ++g_alarm_count; }

TEST_F(SimDriverTest, AShortIdleAlarmNeverSpinsPerNanosecond) {
  struct Disarm {
    ~Disarm() { msimSetIdleAlarm(0, nullptr); }
  } disarm;
  g_alarm_count = 0;
  CU_ASSERT(cuCtxSynchronize());
  CU_ASSERT(msimSetIdleAlarm(1, CountAlarm));
  const uint64_t t0 = Now();
  CU_ASSERT(msimAdvanceTo(t0 + 1'000'000'000));  // a second of host work
  EXPECT_EQ(Now(), t0 + 1'000'000'000);
  EXPECT_GE(g_alarm_count, 1) << "the first look comes after 1 ns";
  EXPECT_LE(g_alarm_count, 1001) << "then at most one a millisecond";
}

TEST_F(SimDriverTest, CaptureRecordsLaunchesAndRefusesPrefetch) {
  CUdeviceptr a = Managed(4096), b = Managed(4096), c = Managed(4096);
  CU_ASSERT(cuMemsetD32(a, 0x3f800000, 1024));
  CU_ASSERT(cuMemsetD32(b, 0x3f800000, 1024));
  CU_ASSERT(cuMemsetD32(c, 0, 1024));
  CUstream s;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status;
  CU_ASSERT(cuStreamIsCapturing(s, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  uint64_t n = 1024;
  void* params[] = {&a, &b, &c, &n};
  CU_ASSERT(cuLaunchKernel(vadd_, 4, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemPrefetchAsync(a, 4096, dev, 0, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  CU_ASSERT(cuStreamEndCapture(s, &graph));
  float out = -1;
  CU_ASSERT(cuMemcpyDtoH(&out, c, 4));
  EXPECT_EQ(out, 0.0f) << "a captured launch must not run";
  CUgraphExec exec;
  CU_ASSERT(cuGraphInstantiate(&exec, graph, 0));
  CU_ASSERT(cuGraphLaunch(exec, s));
  CU_ASSERT(cuStreamSynchronize(s));
  CU_ASSERT(cuMemcpyDtoH(&out, c, 4));
  EXPECT_EQ(out, 2.0f);
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuGraphDestroy(graph));
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(SimDriverTest, VmmMemoryHoldsHbmAndIsMapped) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t gran = 0;
  CU_ASSERT(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CU_ASSERT(cuMemCreate(&h, 2 * gran, &prop, 0));
  size_t free = 0, total = 0;
  CU_ASSERT(cuMemGetInfo(&free, &total));
  EXPECT_EQ(total - free, 2 * gran);
  CUdeviceptr va;
  CU_ASSERT(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, 2 * gran, 0, h, 0));
  CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU_ASSERT(cuMemSetAccess(va, 2 * gran, &access, 1));
  CU_ASSERT(cuMemsetD8(va, 0x5a, 2 * gran));
  uint8_t byte = 0;
  CU_ASSERT(cuMemcpyDtoH(&byte, va + gran + 5, 1));
  EXPECT_EQ(byte, 0x5a);
  CU_ASSERT(cuMemUnmap(va, 2 * gran));
  CU_ASSERT(cuMemAddressFree(va, 2 * gran));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(SimDriverTest, PointerAttributesDescribeAllocations) {
  CUdeviceptr m = Managed(3 * kMiB);
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, kMiB));
  int managed = -1;
  CU_ASSERT(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m + 5000));
  EXPECT_EQ(managed, 1);
  CU_ASSERT(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
  EXPECT_EQ(managed, 0);
  CUdeviceptr start = 0;
  size_t size = 0;
  CU_ASSERT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, m + kMiB));
  CU_ASSERT(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, m + kMiB));
  EXPECT_EQ(start, m);
  EXPECT_EQ(size, 3 * kMiB);
  EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, 0x10), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT(cuMemFree(d));
}

TEST_F(SimDriverTest, PrefetchOfNonManagedMemoryIsRejected) {
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, kMiB));
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemPrefetchAsync(d, kMiB, dev, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPrefetchAsync(d, kMiB, dev, 1, nullptr), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT(cuMemFree(d));
}

TEST_F(SimDriverTest, MalformedModulesFailWithInvalidImage) {
  CUmodule m;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cuModuleLoadData(&m, "{\"format\": \"msim-module\", \"version\": 1, \"kernels\": [{"),
            CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoadData(&m, R"({"format":"msim-module","version":1,"kernels":[
      {"name":"k","params":[8],"accesses":[{"arg":"p3","extent":"4"}]}]})"),
            CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoadData(&m, R"({"format":"msim-module","version":1,"kernels":[
      {"name":"k","params":[8],"accesses":[{"arg":"p0","extent":"4*(p0"}]}]})"),
            CUDA_ERROR_INVALID_IMAGE);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kernel 'k'"), std::string::npos) << err;
  EXPECT_EQ(cuModuleLoad(&m, "/nonexistent/module.json"), CUDA_ERROR_FILE_NOT_FOUND);
}

TEST_F(SimDriverTest, ParamInfoAndNamesAnswerAsTheDriverDoes) {
  const char* name = nullptr;
  CU_ASSERT(cuFuncGetName(&name, vadd_));
  EXPECT_STREQ(name, "vadd");
  size_t off = 0, size = 0;
  CU_ASSERT(cuFuncGetParamInfo(vadd_, 3, &off, &size));
  EXPECT_EQ(off, 24u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(cuFuncGetParamInfo(vadd_, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
  CUkernel k;
  CUlibrary lib;
  CU_ASSERT(cuLibraryLoadData(&lib, kTestModule, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CU_ASSERT(cuLibraryGetKernel(&k, lib, "spin"));
  CU_ASSERT(cuKernelGetName(&name, k));
  EXPECT_STREQ(name, "spin");
  CUfunction f;
  CU_ASSERT(cuKernelGetFunction(&f, k));
  CU_ASSERT(cuFuncGetName(&name, f));
  EXPECT_STREQ(name, "spin");
  CU_ASSERT(cuLibraryUnload(lib));
  EXPECT_EQ(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
}

void* Sym(const char* name) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h ? dlsym(h, name) : nullptr;
}

struct LookupCase {
  const char* base;
  int version;
  cuuint64_t flags;
  const char* symbol;  // expected exported symbol, or nullptr
  CUdriverProcAddressQueryResult status;
};

TEST_F(SimDriverTest, GetProcAddressHonoursVersionAndStreamFlag) {
  const cuuint64_t kPt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const LookupCase cases[] = {
      {"cuLaunchKernel", 12000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 12000, kPt, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 4000, kPt, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},  // no ptsz ABI before 7000
      {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemAlloc", 2000, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemPrefetchAsync", 12020, kPt, "cuMemPrefetchAsync_v2_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemPrefetchAsync", 8000, 0, "cuMemPrefetchAsync", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxSynchronize", 12080, 0, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemcpyHtoD", 7000, kPt, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 11030, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernelEx", 11000, 0, nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
      {"cuNoSuchEntryPoint", 13000, 0, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
      {"", 0, 0, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
  };
  for (const LookupCase& c : cases) {
    void* fn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult status;
    ASSERT_EQ(cuGetProcAddress(c.base, &fn, c.version, c.flags, &status), CUDA_SUCCESS) << c.base;
    EXPECT_EQ(status, c.status) << c.base << " " << c.version;
    EXPECT_EQ(fn, c.symbol ? Sym(c.symbol) : nullptr) << c.base << " " << c.version << " flags " << c.flags;
  }
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress("cuInit", &fn, 99000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, UnimplementedCallsAreCountedNotFatal) {
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(Stats()["unsupported_calls"]["cuGetExportTable"], 2);
}

TEST_F(SimDriverTest, IllegalAccessIsStickyUntilSynchronisation) {
  // The poisoned context stays poisoned, so this runs in a child process.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CUdeviceptr bogus = 0x10000;  // nobody's allocation
    uint64_t bytes = 4096;
    void* params[] = {&bogus, &bytes};
    const CUresult launch = cuLaunchKernel(touch_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
    const CUresult sync = cuCtxSynchronize();
    _exit(launch == CUDA_SUCCESS && sync == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace msim_test

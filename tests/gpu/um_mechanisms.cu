// um_mechanisms: measures, on a real GPU and without msched, the unified-memory
// mechanisms msched's design and simulator rest on (docs/simulator.md,
// ../shared/reference/cuda-driver-notes.md section 14): first-touch prefetch,
// bulk and batched prefetch, fault-driven migration, eviction, read duplication,
// discard, evict/populate overlap, one lone fault, sub-2 MiB prefetch to host,
// and the host and device cost of the calls the simulator models.
//
// Prints one markdown table row per figure. Never allocates more managed memory
// than a quarter of what the device reports free, never changes device settings.
// Usage: um_mechanisms [MAX_GIB]   (sizes 1, 4, 16 GiB, capped by MAX_GIB and free/4)
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#define CHECK_DRV(call)                                                          \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char* s_ = nullptr;                                                  \
      cuGetErrorName(r_, &s_);                                                   \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call, s_);   \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)
#define CHECK_RT(call)                                                           \
  do {                                                                           \
    cudaError_t r_ = (call);                                                     \
    if (r_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #call,        \
                   cudaGetErrorString(r_));                                      \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

constexpr size_t kGiB = size_t{1} << 30;
constexpr size_t kMiB = size_t{1} << 20;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Row(const char* what, double value, const char* unit, const char* note) {
  std::printf("| %s | %.3f | %s | %s |\n", what, value, unit, note);
  std::fflush(stdout);
}

__global__ void WriteAll(uint32_t* p, size_t n, uint32_t v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) p[i] = v + i;
}

__global__ void ReadAll(const uint32_t* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) acc ^= p[i];
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never stores
}

// One thread touches one word every `stride` bytes, each access waiting for
// the previous one: with nothing resident every access is a lone fault.
__global__ void TouchSerially(const uint32_t* p, size_t count, size_t stride_words, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t k = 0; k < count; ++k) acc += p[k * stride_words + acc % 2];
  *sink = acc;
}

__global__ void Empty() {}

CUmemLocation Device(CUdevice d) { CUmemLocation l{}; l.type = CU_MEM_LOCATION_TYPE_DEVICE; l.id = d; return l; }
CUmemLocation Host() { CUmemLocation l{}; l.type = CU_MEM_LOCATION_TYPE_HOST; l.id = 0; return l; }

struct Timer {
  CUstream s;
  CUevent a, b;
  explicit Timer(CUstream st) : s(st) { CHECK_DRV(cuEventCreate(&a, 0)); CHECK_DRV(cuEventCreate(&b, 0)); }
  ~Timer() { cuEventDestroy(a); cuEventDestroy(b); }
  void Start() { CHECK_DRV(cuEventRecord(a, s)); }
  double StopSeconds() {
    CHECK_DRV(cuEventRecord(b, s));
    CHECK_DRV(cuEventSynchronize(b));
    float ms = 0;
    CHECK_DRV(cuEventElapsedTime(&ms, a, b));
    return ms / 1e3;
  }
};

void Prefetch(CUdeviceptr p, size_t n, CUmemLocation where, CUstream s) {
  CHECK_DRV(cuMemPrefetchAsync(p, n, where, 0, s));
}

}  // namespace

int main(int argc, char** argv) {
  const double max_gib = argc > 1 ? std::atof(argv[1]) : 16;
  CHECK_RT(cudaFree(nullptr));
  CUdevice dev;
  CUcontext ctx;
  CHECK_DRV(cuCtxGetCurrent(&ctx));
  CHECK_DRV(cuCtxGetDevice(&dev));
  char name[256];
  CHECK_DRV(cuDeviceGetName(name, sizeof name, dev));
  int driver = 0, cma = 0, pageable = 0;
  CHECK_DRV(cuDriverGetVersion(&driver));
  CHECK_DRV(cuDeviceGetAttribute(&cma, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
  CHECK_DRV(cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev));
  size_t free_b = 0, total_b = 0;
  CHECK_DRV(cuMemGetInfo(&free_b, &total_b));
  std::printf("device: %s, driver API %d, concurrent managed access %d, pageable access %d, free %.1f GiB of %.1f GiB\n\n",
              name, driver, cma, pageable, free_b / double(kGiB), total_b / double(kGiB));
  std::printf("| figure | value | unit | method |\n|---|---:|---|---|\n");

  CUstream s, s2;
  CHECK_DRV(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK_DRV(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  uint32_t* sink = nullptr;
  CHECK_RT(cudaMalloc(&sink, 64));
  Timer t(s);

  // --- call costs (the simulator's four assumed constants) ---
  {
    Empty<<<1, 1, 0, s>>>();
    CHECK_DRV(cuStreamSynchronize(s));
    const int n = 20000;
    double host = 0;
    for (int done = 0; done < n; done += 250) {  // bursts that never fill the launch queue
      const double t0 = Now();
      for (int i = 0; i < 250; ++i) Empty<<<1, 1, 0, s>>>();
      host += Now() - t0;
      CHECK_DRV(cuStreamSynchronize(s));
    }
    Row("launch_api_us: host time of one kernel launch", host / n * 1e6, "us", "20,000 empty <<<1,1>>> launches in bursts of 250 on a drained stream, launch calls only / count");
    double t0 = 0;
    t.Start();
    for (int i = 0; i < n; ++i) Empty<<<1, 1, 0, s>>>();
    Row("kernel_launch_us: device time of one empty kernel", t.StopSeconds() / n * 1e6, "us", "20,000 back-to-back empty kernels between two events / count");
    CUevent e;
    CHECK_DRV(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    t0 = Now();
    for (int i = 0; i < n; ++i) CHECK_DRV(cuEventRecord(e, s2));
    Row("api_call_us: host time of a cheap driver call", (Now() - t0) / n * 1e6, "us", "cuEventRecord on an idle stream, 20,000 calls");
    t0 = Now();
    for (int i = 0; i < n; ++i) CHECK_DRV(cuStreamQuery(s2));
    Row("host time of cuStreamQuery (idle stream)", (Now() - t0) / n * 1e6, "us", "20,000 calls");
    CHECK_DRV(cuEventDestroy(e));
  }
  {
    CUdeviceptr p;
    const size_t n = 64 * kMiB;
    CHECK_DRV(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
    Prefetch(p, n, Device(dev), s);
    CHECK_DRV(cuStreamSynchronize(s));
    const int calls = 2000;
    double t0 = Now();
    t.Start();
    for (int i = 0; i < calls; ++i) Prefetch(p + (i % 32) * 2 * kMiB, 2 * kMiB, Device(dev), s);
    const double host = (Now() - t0) / calls;
    const double dev_t = t.StopSeconds() / calls;
    Row("host time of cuMemPrefetchAsync (2 MiB already resident)", host * 1e6, "us", "2,000 calls");
    Row("prefetch_call_us: stream time of a no-op prefetch (2 MiB already resident)", dev_t * 1e6, "us", "2,000 back-to-back calls between two events / count");
    // 64 KiB pages host-written, then prefetched one by one: setup plus a small transfer.
    std::memset(reinterpret_cast<void*>(p), 1, n);
    t.Start();
    const int pages = 512;
    for (int i = 0; i < pages; ++i) Prefetch(p + size_t(i) * 64 * 1024, 64 * 1024, Device(dev), s);
    Row("stream time of a 64 KiB host-to-device prefetch", t.StopSeconds() / pages * 1e6, "us", "512 separate calls on host-written pages / count");
    CHECK_DRV(cuMemFree(p));
  }

  // --- one lone fault ---
  {
    CUdeviceptr p;
    const size_t count = 256, stride = 2 * kMiB;
    CHECK_DRV(cuMemAllocManaged(&p, count * stride, CU_MEM_ATTACH_GLOBAL));
    std::memset(reinterpret_cast<void*>(p), 0, count * stride);  // resident on the host, every page valid there
    t.Start();
    TouchSerially<<<1, 1, 0, s>>>(reinterpret_cast<const uint32_t*>(p), count, stride / 4, sink);
    Row("one lone GPU fault (host-resident 4 KiB word, serial)", t.StopSeconds() / count * 1e6, "us", "one thread reads 256 words 2 MiB apart, each waiting for the last; kernel time / 256");
    TouchSerially<<<1, 1, 0, s>>>(reinterpret_cast<const uint32_t*>(p), count, stride / 4, sink);
    t.Start();
    TouchSerially<<<1, 1, 0, s>>>(reinterpret_cast<const uint32_t*>(p), count, stride / 4, sink);
    Row("the same reads once resident", t.StopSeconds() / count * 1e6, "us", "same kernel again");
    CHECK_DRV(cuMemFree(p));
  }

  // --- bandwidth figures at 1, 4 and 16 GiB ---
  for (double gib : {1.0, 4.0, 16.0}) {
    if (gib > max_gib || gib * kGiB * 4 > free_b) {
      std::printf("| (skipped %.0f GiB: over MAX_GIB or a quarter of free memory) | | | |\n", gib);
      continue;
    }
    const size_t n = size_t(gib * kGiB);
    const size_t words = n / 4;
    char label[160];
    CUdeviceptr p;
    CHECK_DRV(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));

    t.Start();
    Prefetch(p, n, Device(dev), s);
    std::snprintf(label, sizeof label, "first-touch prefetch to the GPU, %.0f GiB never written", gib);
    Row(label, n / t.StopSeconds() / 1e9, "GB/s", "cuMemPrefetchAsync of fresh managed memory (no valid copy anywhere)");

    WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), words, 7);
    CHECK_DRV(cuStreamSynchronize(s));
    t.Start();
    Prefetch(p, n, Host(), s);
    std::snprintf(label, sizeof label, "eviction, first (GPU-written, no host pages yet), %.0f GiB", gib);
    Row(label, n / t.StopSeconds() / 1e9, "GB/s", "cuMemPrefetchAsync to CU_MEM_LOCATION_TYPE_HOST");
    Prefetch(p, n, Device(dev), s);
    WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), words, 8);
    CHECK_DRV(cuStreamSynchronize(s));
    t.Start();
    Prefetch(p, n, Host(), s);
    std::snprintf(label, sizeof label, "eviction, again (GPU-written, evicted before), %.0f GiB", gib);
    Row(label, n / t.StopSeconds() / 1e9, "GB/s", "the same range back on the GPU, rewritten, evicted a second time");

    t.Start();
    Prefetch(p, n, Device(dev), s);
    std::snprintf(label, sizeof label, "bulk prefetch host to GPU, %.0f GiB", gib);
    Row(label, n / t.StopSeconds() / 1e9, "GB/s", "cuMemPrefetchAsync of host-resident data");

    Prefetch(p, n, Host(), s);
    CHECK_DRV(cuStreamSynchronize(s));
    t.Start();
    ReadAll<<<1024, 256, 0, s>>>(reinterpret_cast<const uint32_t*>(p), words, sink);
    std::snprintf(label, sizeof label, "fault-driven migration host to GPU, %.0f GiB", gib);
    Row(label, n / t.StopSeconds() / 1e9, "GB/s", "a 1024x256 grid-stride kernel reads host-resident data");

    // Batched prefetch of 64 pieces back to the host then to the device.
    {
      const size_t pieces = 64, piece = n / pieces;
      std::vector<CUdeviceptr> ptrs(pieces);
      std::vector<size_t> sizes(pieces, piece);
      for (size_t i = 0; i < pieces; ++i) ptrs[i] = p + i * piece;
      CUmemLocation locs[1] = {Host()};
      size_t idx[1] = {0};
      t.Start();
      CUresult r = cuMemPrefetchBatchAsync(ptrs.data(), sizes.data(), pieces, locs, idx, 1, 0, s);
      const double evict = t.StopSeconds();
      if (r == CUDA_SUCCESS) {
        locs[0] = Device(dev);
        t.Start();
        CHECK_DRV(cuMemPrefetchBatchAsync(ptrs.data(), sizes.data(), pieces, locs, idx, 1, 0, s));
        std::snprintf(label, sizeof label, "batched prefetch host to GPU (64 ranges), %.0f GiB", gib);
        Row(label, n / t.StopSeconds() / 1e9, "GB/s", "one cuMemPrefetchBatchAsync");
        std::snprintf(label, sizeof label, "batched eviction to host (64 ranges, GPU-resident clean), %.0f GiB", gib);
        Row(label, n / evict / 1e9, "GB/s", "one cuMemPrefetchBatchAsync to host");
      } else {
        const char* e = nullptr;
        cuGetErrorName(r, &e);
        std::printf("| cuMemPrefetchBatchAsync | unsupported | | %s |\n", e);
        Prefetch(p, n, Device(dev), s);
      }
    }

    // Read duplication: read-mostly data prefetched in keeps its host copy; evicting it moves nothing.
    {
      Prefetch(p, n, Host(), s);
      CHECK_DRV(cuStreamSynchronize(s));
      CHECK_DRV(cuMemAdvise(p, n, CU_MEM_ADVISE_SET_READ_MOSTLY, Device(dev)));
      t.Start();
      Prefetch(p, n, Device(dev), s);
      std::snprintf(label, sizeof label, "read-mostly prefetch host to GPU, %.0f GiB", gib);
      Row(label, n / t.StopSeconds() / 1e9, "GB/s", "after cuMemAdvise SET_READ_MOSTLY");
      t.Start();
      Prefetch(p, n, Host(), s);
      std::snprintf(label, sizeof label, "read-mostly eviction (duplicate dropped), %.0f GiB", gib);
      const double drop = t.StopSeconds();
      Row(label, drop * 1e3, "ms", "prefetch to host of a duplicated range; a copy would take n / D2H GB/s");
      CHECK_DRV(cuMemAdvise(p, n, CU_MEM_ADVISE_UNSET_READ_MOSTLY, Device(dev)));
    }

    // Discard: dead data leaves without a copy.
    {
      Prefetch(p, n, Device(dev), s);
      WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), words, 11);
      CHECK_DRV(cuStreamSynchronize(s));
      CUdeviceptr ptrs[1] = {p};
      size_t sizes[1] = {n};
      t.Start();
      CUresult r = cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, s);
      const double disc = t.StopSeconds();
      if (r == CUDA_SUCCESS) {
        t.Start();
        Prefetch(p, n, Host(), s);
        std::snprintf(label, sizeof label, "discard then evict, %.0f GiB", gib);
        Row(label, (disc + t.StopSeconds()) * 1e3, "ms", "cuMemDiscardBatchAsync then prefetch to host");
      } else {
        const char* e = nullptr;
        cuGetErrorName(r, &e);
        std::printf("| cuMemDiscardBatchAsync | unsupported | | %s |\n", e);
      }
    }

    // Evict one half while populating the other, on two streams.
    {
      const size_t half = n / 2;
      Prefetch(p, half, Device(dev), s);
      WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), half / 4, 13);
      Prefetch(p + half, half, Host(), s);
      CHECK_DRV(cuStreamSynchronize(s));
      double t0 = Now();
      Prefetch(p, half, Host(), s);
      Prefetch(p + half, half, Device(dev), s2);
      CHECK_DRV(cuStreamSynchronize(s));
      CHECK_DRV(cuStreamSynchronize(s2));
      const double both = Now() - t0;
      std::snprintf(label, sizeof label, "evict %.1f GiB while loading %.1f GiB on two streams", gib / 2, gib / 2);
      Row(label, n / both / 1e9, "GB/s", "both directions' bytes / wall time; compare with the one-direction rows");
    }
    CHECK_DRV(cuMemFree(p));
  }

  // --- one prefetch over two managed allocations that touch ---
  {
    CUdeviceptr x, y;
    CHECK_DRV(cuMemAllocManaged(&x, 2 * kMiB, CU_MEM_ATTACH_GLOBAL));
    CHECK_DRV(cuMemAllocManaged(&y, 2 * kMiB, CU_MEM_ATTACH_GLOBAL));
    if (y == x + 2 * kMiB || x == y + 2 * kMiB) {
      const CUdeviceptr lo = x < y ? x : y;
      const CUresult r = cuMemPrefetchAsync(lo, 4 * kMiB, Device(dev), 0, s);
      const char* e = nullptr;
      cuGetErrorName(r, &e);
      std::printf("| one prefetch spanning two adjacent 2 MiB managed allocations | %d | CUresult | %s |\n", int(r), e);
      CHECK_DRV(cuStreamSynchronize(s));
    } else {
      std::printf("| (two 2 MiB managed allocations were not adjacent: spanning prefetch not tried) | | | |\n");
    }
    CHECK_DRV(cuMemFree(x));
    CHECK_DRV(cuMemFree(y));
  }

  // --- writing read-mostly data: collapse by GPU faults, or unset the advice first ---
  // Collapsing by faults takes over a second per 64 MiB on an H100 (bench/results/gpu-2026-11-22-h100-80gb-hbm3.md:
  // 1.66 s), so this runs at 64 MiB, not 1 GiB.
  {
    CUdeviceptr p;
    const size_t n = 64 * kMiB;
    CHECK_DRV(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
    for (int unset_first = 0; unset_first < 2; ++unset_first) {
      std::memset(reinterpret_cast<void*>(p), 1, n);
      CHECK_DRV(cuMemAdvise(p, n, CU_MEM_ADVISE_SET_READ_MOSTLY, Device(dev)));
      Prefetch(p, n, Device(dev), s);
      CHECK_DRV(cuStreamSynchronize(s));
      const double t0 = Now();
      if (unset_first) CHECK_DRV(cuMemAdvise(p, n, CU_MEM_ADVISE_UNSET_READ_MOSTLY, Device(dev)));
      const double advise = Now() - t0;
      t.Start();
      WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), n / 4, 9);
      const double write = t.StopSeconds();
      if (unset_first) {
        Row("unset read-mostly advice on 64 MiB duplicated on the GPU", advise * 1e3, "ms", "host time of cuMemAdvise UNSET_READ_MOSTLY");
        Row("then a GPU write over it", write * 1e3, "ms", "WriteAll after the advice is gone");
      } else {
        Row("GPU write over 64 MiB of read-mostly data (collapse by faults)", write * 1e3, "ms", "WriteAll over a duplicated range, advice still set");
      }
      CHECK_DRV(cuMemAdvise(p, n, CU_MEM_ADVISE_UNSET_READ_MOSTLY, Device(dev)));
    }
    t.Start();
    WriteAll<<<1024, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), n / 4, 10);
    Row("the same GPU write on resident, non-duplicated data", t.StopSeconds() * 1e3, "ms", "reference");
    CHECK_DRV(cuMemFree(p));
  }

  // --- sub-2 MiB prefetch to host: does it move the slice or the whole 2 MiB chunk? ---
  {
    CUdeviceptr p;
    const size_t n = 64 * kMiB;
    CHECK_DRV(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
    Prefetch(p, n, Device(dev), s);
    WriteAll<<<256, 256, 0, s>>>(reinterpret_cast<uint32_t*>(p), n / 4, 1);
    CHECK_DRV(cuStreamSynchronize(s));
    t.Start();
    for (int i = 0; i < 32; ++i) Prefetch(p + i * 2 * kMiB, 64 * 1024, Host(), s);
    const double slice = t.StopSeconds() / 32;
    // Reading a word 1 MiB into each chunk faults if the whole chunk left.
    t.Start();
    TouchSerially<<<1, 1, 0, s>>>(reinterpret_cast<const uint32_t*>(p + kMiB), 32, 2 * kMiB / 4, sink);
    const double touch = t.StopSeconds() / 32;
    Row("prefetch of a 64 KiB slice of a GPU-written 2 MiB chunk to host", slice * 1e6, "us", "32 calls / count");
    Row("then one read 1 MiB into the same chunk", touch * 1e6, "us", "lone-fault latency if the whole chunk left; well under 1 us if only the slice did");
    CHECK_DRV(cuMemFree(p));
  }
  CHECK_RT(cudaFree(sink));
  std::printf("\nall figures measured in one process on an otherwise idle GPU\n");
  return 0;
}

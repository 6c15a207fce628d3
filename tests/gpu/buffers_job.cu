// buffers_job: a batch job over N device buffers, for checks on a real GPU
// under libmsched (scripts/gpu-check.sh). It allocates with cudaMalloc, as an
// unmodified program does, fills each buffer on the GPU, then makes P passes in
// which a kernel updates every buffer in turn, and prints a checksum of all the
// data read back to the host: the checksum must be the same in every msched
// mode. Its footprint (N x MIB) can exceed the budget msched is given.
//
// Usage: buffers_job work BUFFERS MIB PASSES [FLOPS_PER_WORD]
//        buffers_job launches COUNT        (host time per launch of an empty kernel)
//        buffers_job graph BUFFERS MIB REPLAYS (the passes captured once as a CUDA graph)
#include <cuda_runtime.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    cudaError_t r_ = (call);                                                                             \
    if (r_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "buffers_job: %s failed: %s\n", #call, cudaGetErrorString(r_));               \
      return 1;                                                                                          \
    }                                                                                                    \
  } while (0)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void Fill(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = seed * 2654435761u + static_cast<uint32_t>(i);
}

// An integer update: results are exact, so every mode must agree bit for bit.
__global__ void Update(uint32_t* p, size_t n, uint32_t pass, int rounds) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t v = p[i];
    for (int r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u + pass;
    p[i] = v;
  }
}

__global__ void Empty() {}

// FNV-1a over 64-bit words: a byte-wise hash of 6 GiB takes longer than the GPU work.
uint64_t Fnv(const std::vector<uint32_t>& words, uint64_t h) {
  for (size_t i = 0; i + 1 < words.size(); i += 2) h = (h ^ (uint64_t{words[i + 1]} << 32 | words[i])) * 1099511628211ull;
  if (words.size() % 2) h = (h ^ words.back()) * 1099511628211ull;
  return h;
}

int Checksum(const std::vector<uint32_t*>& bufs, size_t words) {
  std::vector<uint32_t> host(words);
  uint64_t h = 1469598103934665603ull;
  for (uint32_t* b : bufs) {
    CHECK(cudaMemcpy(host.data(), b, words * 4, cudaMemcpyDeviceToHost));
    h = Fnv(host, h);
  }
  std::printf("checksum %016" PRIx64 "\n", h);
  return 0;
}

int Work(int nbuf, size_t mib, int passes, int rounds, bool graph) {
  const size_t words = mib * (size_t{1} << 20) / 4;
  std::vector<uint32_t*> bufs(nbuf);
  for (auto& b : bufs) CHECK(cudaMalloc(&b, words * 4));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double t0 = Now();
  for (int i = 0; i < nbuf; ++i) Fill<<<512, 256, 0, s>>>(bufs[i], words, i + 1);
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nbuf; ++i) Update<<<512, 256, 0, s>>>(bufs[i], words, i, rounds);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (int r = 0; r < passes; ++r) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
  } else {
    for (int p = 0; p < passes; ++p)
      for (int i = 0; i < nbuf; ++i) Update<<<512, 256, 0, s>>>(bufs[i], words, p * nbuf + i, rounds);
  }
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGetLastError());
  const double t1 = Now();
  std::printf("footprint %zu MiB, %d passes, %.3f s\n", nbuf * mib, passes, t1 - t0);
  if (Checksum(bufs, words) != 0) return 1;
  for (auto* b : bufs) CHECK(cudaFree(b));
  CHECK(cudaStreamDestroy(s));
  return 0;
}

// Launches in bursts of 256 with the GPU drained between them, timing only
// the launch calls: one long loop fills the launch queue and then measures
// how fast the GPU retires empty kernels, not the host path.
int Launches(int count) {
  Empty<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  double host = 0;
  for (int done = 0; done < count; done += 256) {
    const double t0 = Now();
    for (int i = 0; i < 256; ++i) Empty<<<1, 1>>>();
    host += Now() - t0;
    CHECK(cudaDeviceSynchronize());
  }
  const int launched = (count + 255) / 256 * 256;
  std::printf("launch %.1f ns host time per empty-kernel launch over %d launches\n", host / launched * 1e9, launched);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "launches" && argc == 3) return Launches(std::atoi(argv[2]));
  if ((what == "work" && (argc == 5 || argc == 6)) || (what == "graph" && argc == 5)) {
    const int rounds = argc == 6 ? std::atoi(argv[5]) : 4;
    return Work(std::atoi(argv[2]), std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]), rounds, what == "graph");
  }
  std::fprintf(stderr,
               "usage: buffers_job work BUFFERS MIB PASSES [ROUNDS] | buffers_job graph BUFFERS MIB REPLAYS | "
               "buffers_job launches COUNT\n");
  return 2;
}

// profile_kernels: a vector add and a tiled GEMM at a size given on the command
// line, for msched-profile on a real GPU (scripts/gpu-check.sh): templates
// fitted from runs at two sizes are checked against a run at a third.
// Usage: profile_kernels N   (vectors of N*N floats, N x N matrices)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kTile = 16;

__global__ void VectorAdd(const float* a, const float* b, float* c, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    c[i] = a[i] + b[i];
}

__global__ void Gemm(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile], tb[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0;
  for (int k0 = 0; k0 < n; k0 += kTile) {
    ta[threadIdx.y][threadIdx.x] = row < n && k0 + threadIdx.x < n ? a[size_t(row) * n + k0 + threadIdx.x] : 0;
    tb[threadIdx.y][threadIdx.x] = col < n && k0 + threadIdx.y < n ? b[size_t(k0 + threadIdx.y) * n + col] : 0;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[size_t(row) * n + col] = acc;
}

__global__ void Init(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = v * static_cast<float>(i % 7);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::atoi(argv[1]) <= 0) {
    std::fprintf(stderr, "usage: profile_kernels N\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const size_t elems = size_t(n) * n;
  float *a, *b, *c;
  if (cudaMalloc(&a, elems * 4) != cudaSuccess || cudaMalloc(&b, elems * 4) != cudaSuccess ||
      cudaMalloc(&c, elems * 4) != cudaSuccess) {
    std::fprintf(stderr, "profile_kernels: cudaMalloc failed\n");
    return 1;
  }
  std::printf("a %p b %p c %p (%zu bytes each)\n", static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c),
              elems * 4);
  Init<<<256, 256>>>(a, elems, 1.0f);
  Init<<<256, 256>>>(b, elems, 0.5f);
  for (int r = 0; r < 3; ++r) {
    VectorAdd<<<256, 256>>>(a, b, c, elems);
    Gemm<<<dim3((n + kTile - 1) / kTile, (n + kTile - 1) / kTile), dim3(kTile, kTile)>>>(a, c, b, n);
  }
  float probe = 0;
  if (cudaMemcpy(&probe, b, sizeof probe, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "profile_kernels: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf("n %d, b[0] %g\n", n, probe);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 0;
}

// A program of the CUDA runtime (libcudart.so.13, built by nvcc). On the
// simulator cudart cannot initialise (it needs the driver's private export
// tables), so cudaGetDeviceCount fails; what the tests check is that every
// driver lookup cudart made on the way went through libmsched.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int count = -1;
  const cudaError_t e = cudaGetDeviceCount(&count);
  std::printf("cudaGetDeviceCount -> %d (%s), count %d\n", static_cast<int>(e), cudaGetErrorName(e), count);
  return 0;
}

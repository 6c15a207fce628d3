// Host implementations of the simulator's built-in kernels. They compute on
// the data for real (device memory is host memory here), so workloads can
// check that every byte a program wrote reads back the same under every
// policy. Parameters arrive as cuLaunchKernel's kernelParams: params[i]
// points to parameter i. Launch validation has already checked that every
// declared access lies inside the caller's allocations.
#include <cstdint>
#include <cstring>

#include "kernel_decl.h"

namespace msim {
namespace {

template <typename T>
T Param(void* const* params, int i) {
  T v;
  std::memcpy(&v, params[i], sizeof(T));
  return v;
}

// (u32* dst, u32 value, u64 n)
void FillU32(void* const* p, const msimLaunchInfo*) {
  auto* dst = Param<uint32_t*>(p, 0);
  const uint32_t value = Param<uint32_t>(p, 1);
  const uint64_t n = Param<uint64_t>(p, 2);
  for (uint64_t i = 0; i < n; ++i) dst[i] = value;
}

// (u32* dst, u64 n, u32 seed): a deterministic, position-dependent pattern.
void IotaU32(void* const* p, const msimLaunchInfo*) {
  auto* dst = Param<uint32_t*>(p, 0);
  const uint64_t n = Param<uint64_t>(p, 1);
  const uint32_t seed = Param<uint32_t>(p, 2);
  for (uint64_t i = 0; i < n; ++i) dst[i] = seed + static_cast<uint32_t>(i) * 2654435761u;
}

// (const f32* a, const f32* b, f32* c, u64 n)
void VectorAddF32(void* const* p, const msimLaunchInfo*) {
  const auto* a = Param<const float*>(p, 0);
  const auto* b = Param<const float*>(p, 1);
  auto* c = Param<float*>(p, 2);
  const uint64_t n = Param<uint64_t>(p, 3);
  for (uint64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

// (f32 a, const f32* x, f32* y, u64 n): y = a*x + y
void AxpyF32(void* const* p, const msimLaunchInfo*) {
  const float a = Param<float>(p, 0);
  const auto* x = Param<const float*>(p, 1);
  auto* y = Param<float*>(p, 2);
  const uint64_t n = Param<uint64_t>(p, 3);
  for (uint64_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

// (f32* x, f32 s, u64 n)
void ScaleF32(void* const* p, const msimLaunchInfo*) {
  auto* x = Param<float*>(p, 0);
  const float s = Param<float>(p, 1);
  const uint64_t n = Param<uint64_t>(p, 2);
  for (uint64_t i = 0; i < n; ++i) x[i] *= s;
}

// (const f32* A, const f32* B, f32* C, u32 M, u32 N, u32 K): C = A(MxK) B(KxN)
void MatmulF32(void* const* p, const msimLaunchInfo*) {
  const auto* A = Param<const float*>(p, 0);
  const auto* B = Param<const float*>(p, 1);
  auto* C = Param<float*>(p, 2);
  const uint32_t M = Param<uint32_t>(p, 3), N = Param<uint32_t>(p, 4), K = Param<uint32_t>(p, 5);
  // i-k-j order: the inner loop walks rows of B and C contiguously.
  for (uint32_t i = 0; i < M; ++i) {
    float* c = C + uint64_t{i} * N;
    for (uint32_t j = 0; j < N; ++j) c[j] = 0;
    for (uint32_t k = 0; k < K; ++k) {
      const float a = A[uint64_t{i} * K + k];
      const float* b = B + uint64_t{k} * N;
      for (uint32_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

// (const f32* W, const f32* x, f32* y, u32 rows, u32 cols): y = W x, a layer
// of an LLM decode step.
void MatvecF32(void* const* p, const msimLaunchInfo*) {
  const auto* W = Param<const float*>(p, 0);
  const auto* x = Param<const float*>(p, 1);
  auto* y = Param<float*>(p, 2);
  const uint32_t rows = Param<uint32_t>(p, 3), cols = Param<uint32_t>(p, 4);
  for (uint32_t r = 0; r < rows; ++r) {
    float acc = 0;
    for (uint32_t c = 0; c < cols; ++c) acc += W[uint64_t{r} * cols + c] * x[c];
    y[r] = acc;
  }
}

// (const f32* kv, u64 seq_len, u64 dim, f32* out): reads only the first
// seq_len rows of a KV cache sized for the maximum context.
void KvAttendF32(void* const* p, const msimLaunchInfo*) {
  const auto* kv = Param<const float*>(p, 0);
  const uint64_t seq = Param<uint64_t>(p, 1), dim = Param<uint64_t>(p, 2);
  auto* out = Param<float*>(p, 3);
  for (uint64_t d = 0; d < dim; ++d) {
    float acc = 0;
    for (uint64_t t = 0; t < seq; ++t) acc += kv[t * dim + d];
    out[d] = acc;
  }
}

// One struct parameter {f32* x; f32* y; u64 n; f32 a;}, as frameworks pass
// tensors by value: y = a*x + y.
struct AxpyArgs {
  float* x;
  float* y;
  uint64_t n;
  float a;
};
void StructAxpyF32(void* const* p, const msimLaunchInfo*) {
  const auto args = Param<AxpyArgs>(p, 0);
  for (uint64_t i = 0; i < args.n; ++i) args.y[i] = args.a * args.x[i] + args.y[i];
}

// (const f32* src, u64 src_n, const u32* idx, f32* dst, u64 n): a
// data-dependent gather, which no template can predict.
void GatherF32(void* const* p, const msimLaunchInfo*) {
  const auto* src = Param<const float*>(p, 0);
  const uint64_t src_n = Param<uint64_t>(p, 1);
  const auto* idx = Param<const uint32_t*>(p, 2);
  auto* dst = Param<float*>(p, 3);
  const uint64_t n = Param<uint64_t>(p, 4);
  for (uint64_t i = 0; i < n; ++i) dst[i] = src_n ? src[idx[i] % src_n] : 0.0f;
}

// (f32* x, u64 rows, u64 cols, u64 ld, f32 s): scales the first `cols`
// values of each of `rows` rows laid out `ld` values apart: a strided region.
void StridedScaleF32(void* const* p, const msimLaunchInfo*) {
  auto* x = Param<float*>(p, 0);
  const uint64_t rows = Param<uint64_t>(p, 1), cols = Param<uint64_t>(p, 2), ld = Param<uint64_t>(p, 3);
  const float s = Param<float>(p, 4);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t c = 0; c < cols; ++c) x[r * ld + c] *= s;
  }
}

// (const u64* desc, u64 n, f32* out): the data's address is read from device
// memory (desc[0]): a base no launch argument holds.
void IndirectSumF32(void* const* p, const msimLaunchInfo*) {
  const auto* desc = Param<const uint64_t*>(p, 0);
  const uint64_t n = Param<uint64_t>(p, 1);
  auto* out = Param<float*>(p, 2);
  const auto* data = reinterpret_cast<const float*>(desc[0]);
  float acc = 0;
  for (uint64_t i = 0; i < n; ++i) acc += data[i];
  out[0] = acc;
}

}  // namespace

void RegisterBuiltinHostKernels() {
  RegisterHostKernel("fill_u32", FillU32);
  RegisterHostKernel("iota_u32", IotaU32);
  RegisterHostKernel("vector_add_f32", VectorAddF32);
  RegisterHostKernel("axpy_f32", AxpyF32);
  RegisterHostKernel("scale_f32", ScaleF32);
  RegisterHostKernel("matmul_f32", MatmulF32);
  RegisterHostKernel("matvec_f32", MatvecF32);
  RegisterHostKernel("kv_attend_f32", KvAttendF32);
  RegisterHostKernel("struct_axpy_f32", StructAxpyF32);
  RegisterHostKernel("gather_f32", GatherF32);
  RegisterHostKernel("indirect_sum_f32", IndirectSumF32);
  RegisterHostKernel("strided_scale_f32", StridedScaleF32);
}

}  // namespace msim

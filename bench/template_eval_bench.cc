// How long evaluating a kernel's template takes on the launch path, for
// templates of 1, 4 and 16 regions. BM_Linear: every region linear in a
// product of two argument words (the common T2 shape). BM_WithStrided: every
// fourth region strided, 64 pieces 1 MiB apart (each piece its own range).
// The target is well under a microsecond for a typical kernel.
#include <benchmark/benchmark.h>

#include "model/kernel_args.h"
#include "model/template_eval.h"

namespace msched {
namespace {

KernelTemplate MakeTemplate(int regions, bool strided) {
  KernelTemplate t;
  t.name = "bench_kernel";
  for (uint16_t p = 0; p < 18; ++p) t.layout.push_back({static_cast<uint32_t>(8 * p), 8});
  for (int r = 0; r < regions; ++r) {
    Region region;
    region.base = {static_cast<uint16_t>(r), 0, 8};
    region.mode = AccessMode::kRead;
    if (strided && r % 4 == 3) {
      region.kind = Region::Kind::kStrided;
      region.count = {1, 1, {Factor{Factor::Kind::kArg, {16, 0, 8}}}, 0};
      region.stride = LinearExpr::Constant(1 << 20);
      region.extent = {4, 1, {Factor{Factor::Kind::kArg, {17, 0, 8}}}, 0};
    } else {
      region.kind = Region::Kind::kLinear;
      region.extent = {4, 1, {Factor{Factor::Kind::kArg, {16, 0, 8}}, Factor{Factor::Kind::kArg, {17, 0, 8}}}, 0};
    }
    t.regions.push_back(region);
  }
  return t;
}

void Evaluate(benchmark::State& state, bool strided) {
  const KernelTemplate t = MakeTemplate(static_cast<int>(state.range(0)), strided);
  uint64_t values[18];
  void* params[18];
  for (int i = 0; i < 16; ++i) values[i] = 0x7f0000000000ull + (uint64_t{1} << 30) * i;
  values[16] = 64;    // rows
  values[17] = 1024;  // columns
  for (int i = 0; i < 18; ++i) params[i] = &values[i];
  const ArgView args = ArgView::FromKernelParams(t.layout, params);
  const LaunchDims dims;
  Prediction out;
  for (auto _ : state) {
    out.Clear();
    EvaluateTemplate(t, args, dims, &out);
    benchmark::DoNotOptimize(out.regions().data());
  }
  state.counters["regions"] = static_cast<double>(t.regions.size());
  state.counters["ranges_out"] = static_cast<double>(out.regions().size());
}

void BM_Linear(benchmark::State& state) { Evaluate(state, false); }
void BM_WithStrided(benchmark::State& state) { Evaluate(state, true); }
BENCHMARK(BM_Linear)->Arg(1)->Arg(4)->Arg(16);
BENCHMARK(BM_WithStrided)->Arg(4)->Arg(16);

}  // namespace
}  // namespace msched

BENCHMARK_MAIN();

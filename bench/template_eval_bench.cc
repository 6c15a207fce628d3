// How long evaluating a kernel's template takes on the launch path, for
// templates of 1, 4 and 16 regions, each compiled once beforehand (as the
// template store does when it loads them). BM_Linear: every region linear in a
// product of two argument words (the common T2 shape). BM_WithStrided: every
// fourth region strided, 64 pieces 1 MiB apart (each piece its own range).
// BM_WidestShipped: the widest shipped template (templates/), then cut to the
// allocations, teaching the extent memo; BM_PointerFallbackWidest: the
// fallback over a struct of the same width, without and with the memo. The
// target is well under a microsecond for a typical kernel, and under one for
// the widest.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/kernel_args.h"
#include "model/predictor.h"
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
  const CompiledTemplate t(MakeTemplate(static_cast<int>(state.range(0)), strided));
  uint64_t values[18];
  void* params[18];
  for (int i = 0; i < 16; ++i) values[i] = 0x7f0000000000ull + (uint64_t{1} << 30) * i;
  values[16] = 64;    // rows
  values[17] = 1024;  // columns
  for (int i = 0; i < 18; ++i) params[i] = &values[i];
  const ArgView args = ArgView::FromKernelParams(t.source().layout, params);
  const LaunchDims dims;
  Prediction out;
  for (auto _ : state) {
    out.Clear();
    t.Evaluate(args, dims, &out);
    benchmark::DoNotOptimize(out.regions().data());
  }
  state.counters["regions"] = static_cast<double>(t.source().regions.size());
  state.counters["ranges_out"] = static_cast<double>(out.regions().size());
}

// The shipped template with the most regions (a PyTorch foreach kernel over
// a TensorListMetadata of about 3 KiB), on arguments whose base words point
// 1 GiB apart and whose other 32-bit words hold 64; /1 then cuts the regions
// to their allocations and teaches the extent memo each region's extent, as
// the hook does under its lock (model/predictor.h), /0 and /2 do not. On /0
// and /1 the one block's slot (64) leaves every list slot in use; on /2 it
// is 7, a launch over 8 tensors, whose other slots are skipped.
void BM_WidestShipped(benchmark::State& state) {
  TemplateLoadResult loaded = LoadTemplatesFile(MSCHED_SHIPPED_TEMPLATES);
  const KernelTemplate* widest = nullptr;
  for (const KernelTemplate& t : loaded.templates.kernels) {
    if (widest == nullptr || t.regions.size() > widest->regions.size()) widest = &t;
  }
  if (widest == nullptr) {
    state.SkipWithError("no shipped templates");
    return;
  }
  size_t bytes = 0;
  for (const ParamInfo& p : widest->layout) bytes = std::max<size_t>(bytes, p.offset + p.size);
  std::vector<uint32_t> buffer((bytes + 7) / 4, 64);
  AllocationMap allocs;
  uint64_t next = 0x7f0000000000ull;
  for (const Region& r : widest->regions) {
    const uint64_t base = next;
    next += uint64_t{1} << 30;
    std::memcpy(reinterpret_cast<uint8_t*>(buffer.data()) + widest->layout[r.base.param].offset + r.base.offset, &base,
                8);
    (void)allocs.Insert(base, uint64_t{1} << 29, AllocKind::kManaged);
  }
  if (state.range(0) == 2) {
    for (const Region& r : widest->regions) {
      if (!r.list) continue;
      reinterpret_cast<uint8_t*>(
          buffer.data())[widest->layout[r.list->slot_of_block.param].offset + r.list->slot_of_block.offset] = 7;
    }
  }
  const CompiledTemplate compiled(*widest);  // as the template store holds it
  const ArgView args = ArgView::FromBuffer(widest->layout, buffer.data(), buffer.size() * 4);
  const LaunchDims dims;
  Prediction out;
  ExtentMemo learned;
  for (auto _ : state) {
    out.Clear();
    compiled.Evaluate(args, dims, &out);
    if (state.range(0) == 1) ClipToAllocations(allocs, 0, &out, &learned);
    benchmark::DoNotOptimize(out.regions().data());
  }
  state.counters["regions"] = static_cast<double>(widest->regions.size());
  state.counters["param_bytes"] = static_cast<double>(bytes);
  state.counters["ranges_out"] = static_cast<double>(out.regions().size());
}

// The fallback on the same arguments: every 8-byte word looked up; /1 with
// each pointer's extent learned (one memo lookup more per pointer), /0
// without a memo.
void BM_PointerFallbackWidest(benchmark::State& state) {
  constexpr size_t kWords = 3144 / 8;
  std::vector<uint64_t> words(kWords, 64);
  AllocationMap allocs;
  for (size_t i = 0; i < 144; ++i) {  // 48 tensors in each of three lists
    words[i] = 0x7f0000000000ull + (uint64_t{1} << 30) * i;
    (void)allocs.Insert(words[i], uint64_t{1} << 29, AllocKind::kManaged);
  }
  ExtentMemo learned;
  for (size_t i = 0; i < 144; ++i) learned.Learn(words[i], allocs.Find(words[i])->id, words[i] + (uint64_t{1} << 20));
  const ExtentMemo* memo = state.range(0) ? &learned : nullptr;
  const ParamLayout layout = {{0, static_cast<uint32_t>(kWords * 8)}};
  const ArgView args = ArgView::FromBuffer(layout, words.data(), kWords * 8);
  Prediction out;
  for (auto _ : state) {
    out.Clear();
    PredictFromPointers(args, allocs, memo, PointerExtent::kToAllocationEnd, &out);
    benchmark::DoNotOptimize(out.regions().data());
  }
  state.counters["ranges_out"] = static_cast<double>(out.regions().size());
}

void BM_Linear(benchmark::State& state) { Evaluate(state, false); }
void BM_WithStrided(benchmark::State& state) { Evaluate(state, true); }
BENCHMARK(BM_Linear)->Arg(1)->Arg(4)->Arg(16);
BENCHMARK(BM_WithStrided)->Arg(4)->Arg(16);
BENCHMARK(BM_WidestShipped)->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_PointerFallbackWidest)->Arg(0)->Arg(1);

}  // namespace
}  // namespace msched

BENCHMARK_MAIN();

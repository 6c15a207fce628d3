// What the memory manager's planning costs on the launch path.
// BM_PlanAccessResident: a launch of 1, 4 or 16 regions whose data is all
// resident (the common path: no plan is made); BM_PlanAccessResidentLarge:
// the same with 4 regions of 8, 32 or 128 MiB (16 to 256 chunks, as a
// training step's weight and optimizer tensors); BM_PlanAccessResidentCold:
// the same after the program's own work has pushed the manager's state out
// of the caches (64 MiB written between calls, outside the timing), as a
// launch of a real program finds it, with the launch's 4 allocations alone
// in the map or among 256 others (a PyTorch program's caching allocator
// holds hundreds of segments); BM_FindAllocationCold: the allocation map's
// lookup alone, cold; BM_ColdFloor: the timing around nothing, cold. The
// cold rows also give the median of their calls (median_ns). BM_PlanAccessStreaming: a
// loop over N layers (weights read, activations written; 8 MiB each) through
// a budget that holds two thirds of them, so that every launch evicts and
// loads: the full plan (prediction, victim order, OPT over the known future,
// whole-chunk widening), for N = 8, 32 and 128 (64 to 1,024 chunks).
// BM_SliceEndAndStart: the end of a turn (working set taken, half evicted
// by the next slice's needs) and the next start (the working set reloaded).
// Only MemoryManager's public interface is used, so that a change to its
// insides can be measured against the code before it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "model/memory_manager.h"

namespace msched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kLayerBytes = 8 * kMiB;

uint64_t WeightBase(uint64_t l) { return 0x100000000ull + l * 0x1000000ull; }
uint64_t ActivationBase(uint64_t l) { return 0x800000000ull + l * 0x1000000ull; }

void AddLayers(MemoryManager& mm, uint64_t layers) {
  for (uint64_t l = 0; l < layers; ++l) {
    (void)mm.AddAllocation(WeightBase(l), kLayerBytes);
    (void)mm.AddAllocation(ActivationBase(l), kLayerBytes);
  }
}

std::vector<PredictedRegion> LayerLaunch(uint64_t l) {
  return {{{WeightBase(l), WeightBase(l) + kLayerBytes}, AccessMode::kRead},
          {{ActivationBase(l), ActivationBase(l) + kLayerBytes}, AccessMode::kWrite}};
}

void BM_PlanAccessResident(benchmark::State& state) {
  const uint64_t regions = static_cast<uint64_t>(state.range(0));
  MemoryManager mm(1024 * kMiB);
  AddLayers(mm, regions);
  std::vector<PredictedRegion> launch;
  for (uint64_t l = 0; l < regions; ++l) {
    launch.push_back({{WeightBase(l) + 4096, WeightBase(l) + 2 * kMiB}, AccessMode::kRead});
  }
  uint64_t seq = 0;
  MemoryActions warm;
  mm.PlanAccess(launch, ++seq, &warm);
  for (auto _ : state) {
    MemoryActions act;
    mm.PlanAccess(launch, ++seq, &act);
    benchmark::DoNotOptimize(act);
  }
}
BENCHMARK(BM_PlanAccessResident)->Arg(1)->Arg(4)->Arg(16);

// Times fn alone in each iteration, after 64 MiB of other writes outside
// the timing (its state pushed out of the caches, as a real program's launch
// finds it). Reports the median (median_ns) beside the mean: a cold call's
// time moves by microseconds with what the machine does meanwhile.
template <typename Fn>
void TimeCold(benchmark::State& state, Fn&& fn) {
  std::vector<uint64_t> other_work(64 * kMiB / sizeof(uint64_t));
  std::vector<double> ns;
  uint64_t pass = 0;
  for (auto _ : state) {
    ++pass;
    for (uint64_t& w : other_work) w += pass;
    benchmark::DoNotOptimize(other_work.data());
    benchmark::ClobberMemory();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    ns.push_back(s * 1e9);
  }
  if (ns.empty()) return;
  std::nth_element(ns.begin(), ns.begin() + static_cast<ptrdiff_t>(ns.size() / 2), ns.end());
  state.counters["median_ns"] = ns[ns.size() / 2];
}

// A manager holding `others` allocations of 2 MiB (never used) below four
// of `bytes` each, and the launch that reads the first three and writes the
// fourth.
std::vector<PredictedRegion> AddLaunchAmongOthers(MemoryManager& mm, uint64_t bytes, int64_t others) {
  for (int64_t i = 0; i < others; ++i) {
    (void)mm.AddAllocation(0x40000000ull + static_cast<uint64_t>(i) * 2 * kMiB, 2 * kMiB);
  }
  std::vector<PredictedRegion> launch;
  for (uint64_t r = 0; r < 4; ++r) {
    const uint64_t base = 0x100000000ull + r * 0x10000000ull;  // 256 MiB apart
    (void)mm.AddAllocation(base, bytes);
    launch.push_back({{base, base + bytes}, r == 3 ? AccessMode::kWrite : AccessMode::kRead});
  }
  return launch;
}

void PlanAccessResidentLarge(benchmark::State& state, bool cold) {
  MemoryManager mm(1024 * kMiB);
  const std::vector<PredictedRegion> launch =
      AddLaunchAmongOthers(mm, static_cast<uint64_t>(state.range(0)) * kMiB, state.range(1));
  uint64_t seq = 0;
  const auto plan = [&] {
    MemoryActions act;
    mm.PlanAccess(launch, ++seq, &act);
    benchmark::DoNotOptimize(act);
  };
  plan();  // everything resident from here on
  if (cold) {
    TimeCold(state, plan);
    return;
  }
  for (auto _ : state) plan();
}
void BM_PlanAccessResidentLarge(benchmark::State& state) { PlanAccessResidentLarge(state, false); }
void BM_PlanAccessResidentCold(benchmark::State& state) { PlanAccessResidentLarge(state, true); }
BENCHMARK(BM_PlanAccessResidentLarge)->ArgsProduct({{8, 32, 128}, {0}});
// Each iteration writes 64 MiB outside the timing (each call timed by hand):
// a fixed count keeps the run short.
BENCHMARK(BM_PlanAccessResidentCold)->ArgsProduct({{8, 32, 128}, {0, 256}})->Iterations(300)->UseManualTime();

// The allocation map's lookup alone (which allocation holds a pointer), cold,
// among 0, 64 and 256 other allocations: what every region of a launch asks
// a few times.
void BM_FindAllocationCold(benchmark::State& state) {
  MemoryManager mm(1024 * kMiB);
  const std::vector<PredictedRegion> launch = AddLaunchAmongOthers(mm, 8 * kMiB, state.range(0));
  const uint64_t ptr = launch[2].range.begin + 4096;
  TimeCold(state, [&] { benchmark::DoNotOptimize(mm.allocations().FindExtent(ptr)); });
}
BENCHMARK(BM_FindAllocationCold)->Arg(0)->Arg(64)->Arg(256)->Iterations(300)->UseManualTime();

// The cold rows' floor: TimeCold around nothing (the clock's own cost once
// its state is out of the caches), to subtract from a row of a few lines.
void BM_ColdFloor(benchmark::State& state) {
  TimeCold(state, [] {});
}
BENCHMARK(BM_ColdFloor)->Iterations(300)->UseManualTime();

void BM_PlanAccessStreaming(benchmark::State& state) {
  const uint64_t layers = static_cast<uint64_t>(state.range(0));
  MemoryManager mm(2 * layers * kLayerBytes * 2 / 3);
  AddLayers(mm, layers);
  std::vector<std::vector<PredictedRegion>> launches;
  for (uint64_t l = 0; l < layers; ++l) launches.push_back(LayerLaunch(l));
  uint64_t seq = 0, moved = 0;
  for (int pass = 0; pass < 3; ++pass) {  // the loop is known from here on
    for (const auto& launch : launches) {
      MemoryActions act;
      mm.PlanAccess(launch, ++seq, &act);
    }
  }
  size_t next = 0;
  for (auto _ : state) {
    MemoryActions act;
    mm.PlanAccess(launches[next], ++seq, &act);
    mm.MarkCompleted(seq - 1);
    moved += act.load_bytes + act.evict_bytes;
    next = next + 1 == launches.size() ? 0 : next + 1;
  }
  state.counters["MiB_moved_per_launch"] =
      static_cast<double>(moved) / static_cast<double>(kMiB) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PlanAccessStreaming)->Arg(8)->Arg(32)->Arg(128);

void BM_SliceEndAndStart(benchmark::State& state) {
  const uint64_t layers = 32;
  MemoryManager mm(2 * layers * kLayerBytes);
  AddLayers(mm, layers);
  uint64_t seq = 0;
  for (auto _ : state) {
    for (uint64_t l = 0; l < layers; ++l) {
      MemoryActions act;
      mm.PlanAccess(LayerLaunch(l), ++seq, &act);
    }
    mm.MarkCompleted(seq);
    std::vector<ByteRange> working_set = mm.TakeWorkingSet();
    mm.SetFuture({working_set});
    MemoryActions shed, back;
    mm.PlanEviction(layers * kLayerBytes, &shed);
    mm.SetFuture({});
    mm.PlanLoad(working_set, &back);
    benchmark::DoNotOptimize(back);
  }
}
BENCHMARK(BM_SliceEndAndStart);

}  // namespace
}  // namespace msched

BENCHMARK_MAIN();

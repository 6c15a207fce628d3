#include "profile/list_slots.h"

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "model/template_eval.h"
#include "trace_builder.h"

namespace msched {
namespace {

using tracetest::FitAll;
using tracetest::TraceBuilder;
using tracetest::Write;

constexpr uint64_t kPage = 64 << 10, kTensorBytes = 2 << 20;
constexpr uint32_t kSlots = 16, kMapOffset = 256;

// PyTorch's TensorListMetadata in small: 16 pointer slots, 16 counts, then
// one byte per block naming the slot that block works on.
struct Meta {
  uint64_t pointer[kSlots];
  int64_t count[kSlots];
  uint8_t slot_of_block[32];
  uint8_t residue[32];  // an earlier launch's map, left on the stack
};
static_assert(offsetof(Meta, slot_of_block) == kMapOffset);

uint64_t Tensor(uint32_t t) { return 0x7f0000000000 + uint64_t{t} * (4 << 20); }

// A foreach launch over `used` tensors (one block each, from tensor `first`
// on); the slots past them keep the previous launch's pointers and counts,
// as PyTorch's reused struct does, and the bytes past the grid its blocks'.
// `map` overrides the block map when given.
struct ListTrace {
  TraceBuilder b{kPage};
  Meta meta{};
  ListTrace() {
    for (uint32_t t = 0; t < kSlots + 8; ++t) b.Alloc(Tensor(t), 4 << 20);
  }
  void Launch(uint32_t used, uint32_t first, const uint8_t* map = nullptr) {
    std::vector<TouchedRange> touched;
    for (uint32_t s = 0; s < used; ++s) {
      meta.pointer[s] = Tensor(first + s);
      meta.count[s] = kTensorBytes / 4;
      meta.slot_of_block[s] = static_cast<uint8_t>(s);
      touched.push_back(Write(Tensor(first + s), Tensor(first + s) + kTensorBytes));
    }
    if (map != nullptr) std::memcpy(meta.slot_of_block, map, sizeof meta.slot_of_block);
    std::memcpy(meta.residue, meta.slot_of_block, sizeof meta.residue);
    b.LaunchBytes("foreach", {tracetest::Bytes(meta)}, std::move(touched), used);
  }
};

// What the fitted template predicts for `meta` launched on `blocks` blocks.
std::vector<uint64_t> PredictedBases(const KernelTemplate& t, Meta meta, uint32_t blocks) {
  void* params[] = {&meta};
  LaunchDims dims;
  dims.grid[0] = blocks;
  Prediction p;
  CompiledTemplate(t).Evaluate(ArgView::FromKernelParams(t.layout, params), dims, &p);
  std::vector<uint64_t> bases;
  for (const PredictedRegion& r : p.regions()) bases.push_back(r.range.begin);
  return bases;
}

TEST(GuardListSlotsTest, TheSlotsPastTheLastBlocksAreFoundAndSkipped) {
  ListTrace l;
  for (const auto& [used, first] : {std::pair{16u, 0u}, {9u, 4u}, {12u, 2u}, {8u, 7u}, {14u, 1u}, {10u, 5u}}) {
    l.Launch(used, first);
  }
  const KernelFit fit = FitAll(l.b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  ASSERT_EQ(fit.tmpl.regions.size(), kSlots);
  for (const Region& r : fit.tmpl.regions) {
    ASSERT_TRUE(r.list.has_value()) << ArgRefToString(r.base);
    EXPECT_EQ(r.list->slot, r.base.offset / 8);
    EXPECT_EQ(r.list->slot_of_block, (ArgRef{0, kMapOffset, 8}));
  }
  // A launch over 3 tensors after one over 16: slots 3-15 are stale.
  l.Launch(16, 0);
  l.Launch(3, 20);
  EXPECT_EQ(PredictedBases(fit.tmpl, l.meta, 3), (std::vector<uint64_t>{Tensor(20), Tensor(21), Tensor(22)}));
}

// A copy of the map later in the struct reads the same in every profiled
// launch, but only the first is the launch's own: the guard reads it, even
// when a region's base word (garbage that passed for a pointer) lies in it.
TEST(GuardListSlotsTest, TheFirstArrayOfItsBytesIsTheMapNotALaterCopy) {
  ListTrace l;
  for (const auto& [used, first] : {std::pair{16u, 0u}, {9u, 4u}, {12u, 2u}, {8u, 7u}, {14u, 1u}, {10u, 5u}}) {
    l.Launch(used, first);
  }
  const std::vector<Observation> observations = Observe(l.b.trace());
  std::vector<const Observation*> obs;
  for (const Observation& o : observations) obs.push_back(&o);
  KernelFit fit = FitKernel(obs, kPage);
  ASSERT_TRUE(fit.predictable) << fit.reason;
  Region garbage = fit.tmpl.regions[0];
  garbage.base.offset = kMapOffset + 8;  // inside the map when more than 8 blocks run
  fit.tmpl.regions.push_back(garbage);
  for (Region& r : fit.tmpl.regions) r.list.reset();
  GuardListSlots(obs, kPage, &fit.tmpl);
  ASSERT_TRUE(fit.tmpl.regions[0].list.has_value());
  EXPECT_EQ(fit.tmpl.regions[0].list->slot_of_block, (ArgRef{0, kMapOffset, 8}));
}

TEST(GuardListSlotsTest, BytesThatAreNoBlockMapGuardNothing) {
  ListTrace l;
  uint8_t falling[32];
  for (uint32_t i = 0; i < 32; ++i) falling[i] = static_cast<uint8_t>(40 - i);  // not from 0, and falling
  for (const auto& [used, first] : {std::pair{16u, 0u}, {9u, 4u}, {12u, 2u}, {8u, 7u}}) l.Launch(used, first, falling);
  const KernelFit fit = FitAll(l.b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  for (const Region& r : fit.tmpl.regions) EXPECT_FALSE(r.list.has_value()) << ArgRefToString(r.base);
}

// The kernel touched a slot past the one the map names for its last block:
// whatever guard the fit finds, it never skips that slot in that launch.
TEST(GuardListSlotsTest, ASlotTouchedPastTheLastBlocksIsNeverSkipped) {
  ListTrace l;
  for (const auto& [used, first] : {std::pair{16u, 0u}, {9u, 4u}, {12u, 2u}}) l.Launch(used, first);
  l.Launch(10, 5);
  const Meta last = l.meta;
  ASSERT_EQ(last.pointer[15], Tensor(15));
  TraceLaunch& launch = const_cast<Trace&>(l.b.trace()).launches.back();
  launch.touched.push_back(Write(Tensor(15), Tensor(15) + kTensorBytes));  // slot 15's stale tensor, 2 MiB of it
  const KernelFit fit = FitAll(l.b.trace());
  ASSERT_TRUE(fit.predictable) << fit.reason;
  const std::vector<uint64_t> bases = PredictedBases(fit.tmpl, last, 10);
  EXPECT_NE(std::find(bases.begin(), bases.end(), Tensor(15)), bases.end());
  const Region& slot15 = fit.tmpl.regions.back();
  ASSERT_EQ(slot15.base.offset, 15 * 8);
  EXPECT_TRUE(!slot15.list || slot15.list->slot <= 9) << "guarded as slot " << slot15.list->slot;
}

}  // namespace
}  // namespace msched

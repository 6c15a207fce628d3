#include "model/kernel_args.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>

namespace msched {
namespace {

// A struct parameter the way PyTorch passes one: pointers and sizes by value.
struct TensorArg {
  uint64_t data;
  uint32_t sizes[2];
  uint64_t stride;
};

ParamLayout Layout() {
  // (float* a, TensorArg t, int n): offsets as nvcc lays them out.
  return {{0, 8}, {8, sizeof(TensorArg)}, {32, 4}};
}

TEST(ArgViewTest, ReadsKernelParamsForm) {
  const ParamLayout layout = Layout();
  uint64_t a = 0xdead0000;
  TensorArg t{0xbeef0000, {3, 5}, 64};
  int32_t n = 1000;
  void* params[] = {&a, &t, &n};
  ArgView v = ArgView::FromKernelParams(layout, params);
  EXPECT_EQ(v.Read({0, 0, 8}), 0xdead0000u);
  EXPECT_EQ(v.Read({1, 0, 8}), 0xbeef0000u);
  EXPECT_EQ(v.Read({1, 8, 4}), 3u);
  EXPECT_EQ(v.Read({1, 12, 4}), 5u);
  EXPECT_EQ(v.Read({1, 16, 8}), 64u);
  EXPECT_EQ(v.Read({2, 0, 4}), 1000u);
  EXPECT_EQ(v.Read({2, 0, 8}), 1000u);          // narrow parameter: zero-extended
  EXPECT_FALSE(v.Read({2, 4, 4}).has_value());  // past the parameter
  EXPECT_FALSE(v.Read({3, 0, 8}).has_value());  // no such parameter
}

// A word resolved once reads what Read(ArgRef) reads, in either form; a
// word that can never be read resolves to no bytes (issue 30).
TEST(ArgViewTest, ResolvedWordsReadAsTheirRefs) {
  const ParamLayout layout = Layout();
  EXPECT_EQ(ResolveArgRef(layout, {1, 12, 4}).buffer_offset, 20u);
  EXPECT_EQ(ResolveArgRef(layout, {2, 0, 8}).bytes, 4u);  // narrow parameter: its 4 bytes
  EXPECT_EQ(ResolveArgRef(layout, {2, 4, 4}).bytes, 0u);  // past the parameter
  EXPECT_EQ(ResolveArgRef(layout, {3, 0, 8}).bytes, 0u);  // no such parameter
  EXPECT_EQ(ResolveArgRef(layout, {0, 0, 2}).bytes, 0u);  // a width templates never use
  alignas(8) uint8_t buf[40] = {};
  TensorArg t{0xbeef0000, {3, 5}, 64};
  const int32_t n = 1000;
  std::memcpy(buf + 8, &t, sizeof t);
  std::memcpy(buf + 32, &n, 4);
  void* params[] = {buf, buf + 8, buf + 32};
  for (const ArgView& v : {ArgView::FromKernelParams(layout, params), ArgView::FromBuffer(layout, buf, sizeof buf)}) {
    for (const ArgRef ref : {ArgRef{1, 0, 8}, ArgRef{1, 12, 4}, ArgRef{2, 0, 8}, ArgRef{2, 4, 4}, ArgRef{3, 0, 8}}) {
      uint64_t value = 0;
      const bool read = v.Read(ResolveArgRef(layout, ref), &value);
      EXPECT_EQ(read ? std::optional<uint64_t>(value) : std::nullopt, v.Read(ref));
    }
  }
  uint64_t value = 0;
  EXPECT_FALSE(ArgView().Read(ResolveArgRef(layout, {0, 0, 8}), &value));
}

TEST(ArgViewTest, ReadsExtraFormThroughTokens) {
  const ParamLayout layout = Layout();
  alignas(8) uint8_t buf[40] = {};
  const uint64_t a = 0x1234;
  const int32_t n = 77;
  std::memcpy(buf, &a, 8);
  std::memcpy(buf + 32, &n, 4);
  size_t size = sizeof buf;
  void* extra[] = {reinterpret_cast<void*>(kLaunchParamBufferPointer), buf,
                   reinterpret_cast<void*>(kLaunchParamBufferSize), &size, reinterpret_cast<void*>(kLaunchParamEnd)};
  Result<ArgView> v = ArgView::FromExtra(layout, extra);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->Read({0, 0, 8}), 0x1234u);
  EXPECT_EQ(v->Read({2, 0, 4}), 77u);
}

TEST(ArgViewTest, RejectsMalformedExtra) {
  const ParamLayout layout = Layout();
  alignas(8) uint8_t buf[16] = {};
  size_t small = sizeof buf;
  void* too_small[] = {reinterpret_cast<void*>(kLaunchParamBufferPointer), buf,
                       reinterpret_cast<void*>(kLaunchParamBufferSize), &small,
                       reinterpret_cast<void*>(kLaunchParamEnd)};
  EXPECT_FALSE(ArgView::FromExtra(layout, too_small).ok());
  void* no_size[] = {reinterpret_cast<void*>(kLaunchParamBufferPointer), buf, reinterpret_cast<void*>(kLaunchParamEnd)};
  EXPECT_FALSE(ArgView::FromExtra(layout, no_size).ok());
  void* bad_token[] = {reinterpret_cast<void*>(uintptr_t{9}), buf, reinterpret_cast<void*>(kLaunchParamEnd)};
  EXPECT_FALSE(ArgView::FromExtra(layout, bad_token).ok());
  EXPECT_FALSE(ArgView::FromExtra(layout, nullptr).ok());
}

TEST(SliceArgWordsTest, SlicesStructsIntoWords) {
  const ParamLayout layout = Layout();
  uint64_t a = 0xdead0000;
  TensorArg t{0xbeef0000, {3, 5}, 64};
  int32_t n = 1000;
  void* params[] = {&a, &t, &n};
  std::vector<ArgWord> words = SliceArgWords(ArgView::FromKernelParams(layout, params));
  auto has = [&](ArgRef r, uint64_t v) {
    for (const ArgWord& w : words) {
      if (w.ref == r) return w.value == v;
    }
    return false;
  };
  EXPECT_TRUE(has({0, 0, 8}, 0xdead0000));
  EXPECT_TRUE(has({0, 4, 4}, 0));
  EXPECT_TRUE(has({1, 0, 8}, 0xbeef0000));
  EXPECT_TRUE(has({1, 8, 8}, 3 | (uint64_t{5} << 32)));
  EXPECT_TRUE(has({1, 12, 4}, 5));
  EXPECT_TRUE(has({1, 16, 8}, 64));
  EXPECT_TRUE(has({2, 0, 4}, 1000));
  // 8-byte param: 1 u64 + 2 u32; 24-byte struct: 3 u64 + 6 u32; 4-byte int: 1 u32.
  EXPECT_EQ(words.size(), 3u + 9u + 1u);
}

TEST(SliceArgWordsTest, TinyParametersYieldOneWord) {
  const ParamLayout layout = {{0, 1}, {4, 2}};
  uint8_t flag = 0xab;
  uint16_t half = 0x1234;
  void* params[] = {&flag, &half};
  std::vector<ArgWord> words = SliceArgWords(ArgView::FromKernelParams(layout, params));
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0].value, 0xabu);
  EXPECT_EQ(words[1].value, 0x1234u);
}

TEST(ArgRefTest, TextFormRoundTrips) {
  EXPECT_EQ(ArgRefToString({3, 8, 4}), "p3+8:u32");
  EXPECT_EQ(ArgRefToString({0, 0, 8}), "p0");
}

}  // namespace
}  // namespace msched

#include "model/managed_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace msched {
namespace {

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kMiB = 1ull << 20;

// PoolOps for tests: chunks at 2 MiB-aligned addresses with a gap between
// them, out of memory beyond `capacity` bytes; fences numbered from 1, passed
// only when the test says (or waited for on the host). Records every call.
// Confined to one thread.
class FakePoolOps : public PoolOps {
 public:
  Result<uint64_t> AllocateChunk(uint64_t bytes) override {
    ++chunk_allocations;
    if (fail_next.code() != StatusCode::kOk) return std::exchange(fail_next, Status::Ok());
    if (allocated + bytes > capacity) return Status::ResourceExhausted("out of managed memory");
    EXPECT_EQ(bytes % kMiB, 0u);
    const uint64_t base = next_base;
    next_base += bytes + 2 * kMiB;
    allocated += bytes;
    chunks[base] = bytes;
    return base;
  }
  Status ReleaseChunk(uint64_t base, uint64_t bytes) override {
    EXPECT_EQ(chunks[base], bytes);
    chunks.erase(base);
    allocated -= bytes;
    released.push_back(base);
    return Status::Ok();
  }
  Result<FenceId> RecordFence(StreamHandle stream) override {
    if (fail_record) return Status::Unavailable("cannot record");
    const FenceId f = next_fence++;
    stream_of[f] = stream;
    return f;
  }
  bool FenceDone(FenceId f) override {
    ++queries;
    EXPECT_FALSE(dropped.count(f)) << "fence " << f << " queried after it was dropped";
    return passed.count(f) > 0;
  }
  Status StreamWaitFence(StreamHandle stream, FenceId f) override {
    EXPECT_FALSE(dropped.count(f)) << "fence " << f << " waited for after it was dropped";
    waits.push_back({stream, f});
    return Status::Ok();
  }
  Status WaitFence(FenceId f) override {
    EXPECT_FALSE(dropped.count(f));
    host_waits.push_back(f);
    passed.insert(f);
    return Status::Ok();
  }
  void DropFence(FenceId f) override { EXPECT_TRUE(dropped.insert(f).second) << "fence " << f << " dropped twice"; }

  uint64_t capacity = UINT64_MAX / 4;
  Status fail_next;  // the next AllocateChunk's answer, when not OK
  bool fail_record = false;
  uint64_t next_base = 0x7f0000000000, allocated = 0;
  int chunk_allocations = 0, queries = 0;
  FenceId next_fence = 1;
  std::map<uint64_t, uint64_t> chunks;
  std::vector<uint64_t> released;
  std::map<FenceId, StreamHandle> stream_of;
  std::set<FenceId> passed, dropped;
  std::vector<std::pair<StreamHandle, FenceId>> waits;
  std::vector<FenceId> host_waits;
};

// Small chunks, so that tests can fill them.
ManagedPool::Settings Small() {
  ManagedPool::Settings s;
  s.chunk_bytes = 4 * kMiB;
  s.own_chunk_from = 2 * kMiB;
  return s;
}

constexpr StreamHandle kS1 = 0x100, kS2 = 0x200;

uint64_t Alloc(ManagedPool& pool, uint64_t bytes, StreamHandle s, FakePoolOps& ops) {
  Result<uint64_t> p = pool.Allocate(bytes, s, ops);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : 0;
}

TEST(ManagedPoolTest, SmallAllocationsAreCarvedFromOneSharedChunk) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1000, kS1, ops);
  const uint64_t b = Alloc(pool, 4 * kKiB, kS1, ops);
  const uint64_t c = Alloc(pool, 1 * kMiB, kS2, ops);
  EXPECT_EQ(ops.chunk_allocations, 1);
  EXPECT_EQ(ops.chunks.begin()->second, 64 * kMiB) << "a shared chunk";
  EXPECT_EQ(a, ops.chunks.begin()->first);
  EXPECT_EQ(b, a + 1024) << "1000 bytes take 1024";
  EXPECT_EQ(c, b + 4 * kKiB);
  EXPECT_EQ(pool.reserved_bytes(), 64 * kMiB);
  EXPECT_EQ(pool.in_use_bytes(), 1024 + 4 * kKiB + 1 * kMiB);
  EXPECT_TRUE(ops.waits.empty()) << "fresh memory waits for nothing";
}

TEST(ManagedPoolTest, EveryBlockStartsAndEndsOnTheAlignment) {
  ManagedPool pool;
  FakePoolOps ops;
  ops.next_base += 256;  // a driver that aligned its chunk to 256 bytes only
  std::vector<uint64_t> p;
  for (uint64_t bytes : {1ull, 511ull, 512ull, 513ull, 3000ull}) p.push_back(Alloc(pool, bytes, kS1, ops));
  for (uint64_t x : p) EXPECT_EQ(x % 512, 0u) << x;
  EXPECT_EQ(p[0], ops.chunks.begin()->first + 256) << "the first aligned address of the chunk";
  EXPECT_EQ(pool.in_use_bytes(), 512u + 512 + 512 + 1024 + 3072);
  EXPECT_EQ(pool.Allocate(0, kS1, ops).status().code(), StatusCode::kInvalidArgument);
}

TEST(ManagedPoolTest, ALargeRequestGetsAChunkOfItsOwnRoundedTo2MiB) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t big = Alloc(pool, 40 * kMiB + 1, kS1, ops);
  ASSERT_EQ(ops.chunks.size(), 1u);
  EXPECT_EQ(ops.chunks.at(big), 42 * kMiB);
  const uint64_t small = Alloc(pool, 1 * kMiB, kS1, ops);
  EXPECT_EQ(small, big + 40 * kMiB + 512) << "its remainder serves what fits";
  const uint64_t next = Alloc(pool, 3 * kMiB, kS1, ops);
  ASSERT_EQ(ops.chunks.size(), 2u);
  EXPECT_EQ(ops.chunks.at(next), 64 * kMiB) << "what does not fit gets a shared chunk";
  ASSERT_TRUE(pool.Free(big, kS1, ops).ok());
  EXPECT_EQ(Alloc(pool, 40 * kMiB, kS1, ops), big) << "the freed big block is reused, not a new chunk";
  EXPECT_EQ(ops.chunk_allocations, 2);
}

TEST(ManagedPoolTest, AFreedBlockIsReusedOnTheSameStreamBehindItsFence) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1 * kMiB, kS1, ops);
  ASSERT_TRUE(pool.Free(a, kS1, ops).ok());
  EXPECT_EQ(ops.stream_of.at(1), kS1) << "the fence is recorded on the freeing stream";
  EXPECT_EQ(Alloc(pool, 1 * kMiB, kS1, ops), a);
  EXPECT_EQ(ops.waits, (std::vector<std::pair<StreamHandle, FenceId>>{{kS1, 1}}));
  EXPECT_TRUE(ops.host_waits.empty()) << "the device orders it; the host never waits";
  EXPECT_TRUE(ops.dropped.count(1)) << "no block carries the fence any more";
  EXPECT_EQ(ops.chunk_allocations, 1);
}

TEST(ManagedPoolTest, ReuseOnAnotherStreamWaitsForTheFreeingStreamsWork) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1 * kMiB, kS1, ops);
  ASSERT_TRUE(pool.Free(a, kS1, ops).ok());
  EXPECT_EQ(Alloc(pool, 1 * kMiB, kS2, ops), a);
  EXPECT_EQ(ops.waits, (std::vector<std::pair<StreamHandle, FenceId>>{{kS2, 1}}));
}

TEST(ManagedPoolTest, TheRemainderOfASplitBlockKeepsItsFence) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1 * kMiB, kS1, ops);
  ASSERT_TRUE(pool.Free(a, kS1, ops).ok());
  // The freed 1 MiB is a better fit than the untouched 3 MiB beside it.
  EXPECT_EQ(Alloc(pool, 256 * kKiB, kS2, ops), a);
  EXPECT_EQ(Alloc(pool, 768 * kKiB, kS1, ops), a + 256 * kKiB);
  EXPECT_EQ(ops.waits, (std::vector<std::pair<StreamHandle, FenceId>>{{kS2, 1}, {kS1, 1}}));
  EXPECT_TRUE(ops.dropped.count(1)) << "dropped once the last piece was taken";
}

TEST(ManagedPoolTest, FencesArePolledBeforeThePoolGrowsAndPassedFreesMerge) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  uint64_t b[4];
  for (uint64_t& x : b) x = Alloc(pool, 1 * kMiB, kS1, ops);  // fills the 4 MiB chunk
  ASSERT_TRUE(pool.Free(b[1], kS1, ops).ok());
  ASSERT_TRUE(pool.Free(b[2], kS2, ops).ok());
  ops.passed = {1, 2};
  EXPECT_EQ(Alloc(pool, 1536 * kKiB, kS1, ops), b[1]) << "the two frees merged once their fences passed";
  EXPECT_EQ(ops.queries, 2);
  EXPECT_TRUE(ops.waits.empty()) << "a passed fence needs no wait";
  EXPECT_EQ(ops.chunk_allocations, 1);
  EXPECT_EQ(ops.dropped, (std::set<FenceId>{1, 2}));
}

TEST(ManagedPoolTest, FreesWhoseFencesArePendingDoNotMergeSoThePoolGrows) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  uint64_t b[4];
  for (uint64_t& x : b) x = Alloc(pool, 1 * kMiB, kS1, ops);
  ASSERT_TRUE(pool.Free(b[1], kS1, ops).ok());
  ASSERT_TRUE(pool.Free(b[2], kS1, ops).ok());
  const uint64_t c = Alloc(pool, 1536 * kKiB, kS1, ops);
  EXPECT_EQ(ops.chunk_allocations, 2);
  EXPECT_EQ(c, std::prev(ops.chunks.end())->first);
  EXPECT_TRUE(ops.waits.empty());
  EXPECT_TRUE(ops.host_waits.empty()) << "growing needs no wait";
}

TEST(ManagedPoolTest, TrimGivesBackOnlyIdleChunksWhoseFreesHavePassed) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  const uint64_t live = Alloc(pool, 3 * kMiB, kS1, ops);  // a 4 MiB chunk of its own
  const uint64_t big = Alloc(pool, 3 * kMiB, kS1, ops);   // another: 1 MiB is left in the first
  ASSERT_EQ(ops.chunks.size(), 2u);
  ASSERT_TRUE(pool.Free(big, kS1, ops).ok());
  EXPECT_EQ(pool.Trim(0, ops), 0u) << "its free is still pending";
  ops.passed.insert(1);
  EXPECT_EQ(pool.Trim(0, ops), 4 * kMiB);
  EXPECT_EQ(ops.released, (std::vector<uint64_t>{big}));
  EXPECT_FALSE(pool.Contains(big));
  EXPECT_TRUE(pool.Contains(live));
  EXPECT_EQ(pool.reserved_bytes(), 4 * kMiB) << "the chunk with a live block stays";
  ASSERT_TRUE(pool.FreeIdle(live).ok());
  EXPECT_EQ(pool.Trim(4 * kMiB, ops), 0u) << "4 MiB may be kept";
  EXPECT_EQ(pool.Trim(0, ops), 4 * kMiB);
  EXPECT_EQ(pool.chunk_count(), 0u);
  EXPECT_TRUE(ops.chunks.empty());
}

TEST(ManagedPoolTest, OutOfMemoryIsTheDriversErrorAndNothingIsRetriedWithNothingToGiveBack) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  ops.capacity = 0;
  Result<uint64_t> p = pool.Allocate(1 * kKiB, kS1, ops);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ops.chunk_allocations, 1) << "one call, whose answer the program gets (CUDA_ERROR_OUT_OF_MEMORY)";
  ops.fail_next = Status::Unavailable("no context");
  p = pool.Allocate(1 * kKiB, kS1, ops);
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable) << "other errors pass unchanged";
  EXPECT_EQ(pool.reserved_bytes(), 0u);
}

TEST(ManagedPoolTest, OutOfMemoryWaitsForPendingFreesAndGivesBackIdleChunksBeforeFailing) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  ops.capacity = 8 * kMiB;
  const uint64_t a = Alloc(pool, 4 * kMiB, kS1, ops);  // own chunk, 4 MiB
  const uint64_t b = Alloc(pool, 2 * kMiB, kS1, ops);  // own chunk, 2 MiB
  ASSERT_TRUE(pool.Free(b, kS1, ops).ok());
  // 3 MiB needs a 4 MiB chunk: 10 MiB in all, over the capacity, until the
  // idle 2 MiB chunk goes back once its free has passed.
  const uint64_t c = Alloc(pool, 3 * kMiB, kS2, ops);
  EXPECT_EQ(ops.host_waits, (std::vector<FenceId>{1}));
  EXPECT_EQ(ops.released, (std::vector<uint64_t>{b}));
  EXPECT_EQ(ops.chunk_allocations, 4);
  EXPECT_EQ(ops.chunks.size(), 2u);
  EXPECT_TRUE(pool.Contains(a));
  EXPECT_EQ(pool.BlockAt(c)->size(), 3 * kMiB);
  // Now nothing is idle: a request that fits nowhere fails with the driver's error.
  EXPECT_EQ(pool.Allocate(2 * kMiB, kS1, ops).status().code(), StatusCode::kResourceExhausted);
}

TEST(ManagedPoolTest, InteriorPointersResolveToTheirLiveBlock) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1000, kS1, ops);
  const uint64_t b = Alloc(pool, 2 * kKiB, kS1, ops);
  ASSERT_TRUE(pool.BlockAt(a + 999).has_value());
  EXPECT_EQ(*pool.BlockAt(a + 999), (ByteRange{a, a + 1024}));
  EXPECT_EQ(*pool.BlockAt(b + 2047), (ByteRange{b, b + 2048}));
  EXPECT_FALSE(pool.BlockAt(b + 2048).has_value()) << "free space is no block";
  EXPECT_TRUE(pool.Contains(b + 2048)) << "but it is the pool's";
  EXPECT_FALSE(pool.Contains(a - 1));
  EXPECT_FALSE(pool.Contains(a + 64 * kMiB));
  ASSERT_TRUE(pool.Free(a, kS1, ops).ok());
  EXPECT_FALSE(pool.BlockAt(a).has_value());
}

TEST(ManagedPoolTest, OnlyTheStartOfALiveBlockCanBeFreed) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 4 * kKiB, kS1, ops);
  EXPECT_EQ(pool.Free(a + 512, kS1, ops).code(), StatusCode::kInvalidArgument) << "an interior pointer";
  EXPECT_EQ(pool.Free(a + 64 * kMiB, kS1, ops).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(pool.Free(a, kS1, ops).ok());
  EXPECT_EQ(pool.Free(a, kS1, ops).code(), StatusCode::kInvalidArgument) << "freed twice";
  EXPECT_EQ(pool.FreeIdle(a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ops.next_fence, 2u) << "no fence recorded for a refused free";
}

TEST(ManagedPoolTest, AFreeWithoutAFenceIsReusedWithoutWaiting) {
  ManagedPool pool;
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 4 * kKiB, kS1, ops);
  ASSERT_TRUE(pool.FreeIdle(a).ok());
  EXPECT_EQ(Alloc(pool, 4 * kKiB, kS2, ops), a);
  EXPECT_TRUE(ops.waits.empty());
}

TEST(ManagedPoolTest, ARetiredBlockIsNeverReusedAndKeepsItsChunk) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  const uint64_t a = Alloc(pool, 1 * kMiB, kS1, ops);
  ASSERT_TRUE(pool.Retire(a).ok());
  EXPECT_EQ(pool.in_use_bytes(), 0u);
  EXPECT_EQ(pool.retired_bytes(), 1 * kMiB);
  EXPECT_NE(Alloc(pool, 1 * kMiB, kS1, ops), a);
  // A free whose fence cannot be recorded retires its block too.
  const uint64_t b = Alloc(pool, 1 * kMiB, kS1, ops);
  ops.fail_record = true;
  EXPECT_EQ(pool.Free(b, kS1, ops).code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool.retired_bytes(), 2 * kMiB);
  EXPECT_EQ(pool.Free(b, kS1, ops).code(), StatusCode::kInvalidArgument) << "no longer live";
  EXPECT_EQ(pool.Trim(0, ops), 0u);
  EXPECT_EQ(pool.chunk_count(), 1u);
}

// Random allocations and frees on three streams, fences passing at random:
// live blocks never overlap; memory freed behind a fence that has not passed
// is handed out only after the new owner's stream (or the host) waited for
// that fence; once everything is freed and passed, Trim gives it all back.
TEST(ManagedPoolTest, RandomUseKeepsBlocksApartAndOrdersEveryReuseAfterItsFree) {
  ManagedPool pool(Small());
  FakePoolOps ops;
  std::mt19937_64 rng(42);
  std::map<uint64_t, uint64_t> live;  // start -> rounded size
  struct Freed {
    ByteRange range;
    FenceId fence;
  };
  std::vector<Freed> freed;  // fenced frees, until their fence passes
  const uint64_t sizes[] = {100, 4 * kKiB, 60 * kKiB, 700 * kKiB, 1 * kMiB + 3, 3 * kMiB};
  for (int step = 0; step < 4000; ++step) {
    const StreamHandle s = 1 + rng() % 3;
    if (live.empty() || rng() % 2 == 0) {
      const uint64_t bytes = sizes[rng() % 6];
      const size_t waits_before = ops.waits.size(), host_before = ops.host_waits.size();
      const uint64_t p = Alloc(pool, bytes, s, ops);
      ASSERT_EQ(p % 512, 0u);
      const ByteRange r = *pool.BlockAt(p);
      ASSERT_GE(r.size(), bytes);
      auto next = live.lower_bound(p);
      ASSERT_TRUE(next == live.end() || next->first >= r.end) << "overlaps the next live block";
      ASSERT_TRUE(next == live.begin() || std::prev(next)->first + std::prev(next)->second <= p);
      for (const Freed& f : freed) {
        if (!f.range.Overlaps(r) || ops.passed.count(f.fence)) continue;
        bool ordered = false;
        for (size_t i = waits_before; i < ops.waits.size(); ++i) {
          ordered |= ops.waits[i] == std::make_pair(s, f.fence);
        }
        for (size_t i = host_before; i < ops.host_waits.size(); ++i) ordered |= ops.host_waits[i] == f.fence;
        ASSERT_TRUE(ordered) << "reused memory freed behind pending fence " << f.fence << " without waiting";
      }
      // The new owner's stream is ordered after those frees, and the
      // program orders any later free after the allocation.
      std::erase_if(freed, [&](const Freed& f) { return f.range.Overlaps(r); });
      live[p] = r.size();
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      const FenceId fence = ops.next_fence;
      ASSERT_TRUE(pool.Free(it->first, s, ops).ok());
      freed.push_back({{it->first, it->first + it->second}, fence});
      live.erase(it);
    }
    if (rng() % 10 == 0) {  // a stream catches up: its fences pass
      const StreamHandle done = 1 + rng() % 3;
      for (const auto& [f, stream] : ops.stream_of) {
        if (stream == done) ops.passed.insert(f);
      }
      std::erase_if(freed, [&](const Freed& f) { return ops.passed.count(f.fence) > 0; });
    }
    uint64_t in_use = 0;
    for (const auto& [p, size] : live) in_use += size;
    ASSERT_EQ(pool.in_use_bytes(), in_use);
  }
  EXPECT_GT(ops.waits.size(), 100u) << "memory was reused behind pending fences";
  EXPECT_GT(ops.queries, 0) << "fences were polled";
  for (const auto& [p, size] : live) ASSERT_TRUE(pool.FreeIdle(p).ok());
  for (FenceId f = 1; f < ops.next_fence; ++f) ops.passed.insert(f);
  const uint64_t reserved = pool.reserved_bytes();
  EXPECT_EQ(pool.Trim(0, ops), reserved);
  EXPECT_EQ(pool.reserved_bytes(), 0u);
  EXPECT_TRUE(ops.chunks.empty());
}

}  // namespace
}  // namespace msched

// ManagedPool: msched's own stream-ordered allocator. Allocations the
// program makes with cuMemAllocAsync or cuMemAllocFromPoolAsync are carved
// from large chunks of managed memory, and what cuMemFreeAsync frees is
// reused, so that a per-tensor allocator (PyTorch's cudaMallocAsync
// backend) costs no managed allocation and no free per tensor. PoolOps is
// its seam to the driver (managed memory and stream-ordered fences): the
// hook supplies the real one, tests a fake.
// Externally synchronized (the hook holds its pool lock). Used by hook/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "model/address_range.h"
#include "model/device_ops.h"
#include "msched/status.h"

namespace msched {

// A point in a stream's queued work (an event in hook/); 0 is none.
using FenceId = uint64_t;
inline constexpr FenceId kNoFence = 0;

class PoolOps {
 public:
  virtual ~PoolOps() = default;
  // `bytes` of managed memory (a multiple of 2 MiB); its base. The error is
  // the driver's: ResourceExhausted when it is out of memory.
  virtual Result<uint64_t> AllocateChunk(uint64_t bytes) = 0;
  // Gives back a chunk AllocateChunk made. Nothing is allocated in it and no
  // queued work uses it.
  virtual Status ReleaseChunk(uint64_t base, uint64_t bytes) = 0;
  // A fence after the work queued on `stream` so far, or kNoFence when that
  // work is already known complete; an error when neither can be had.
  virtual Result<FenceId> RecordFence(StreamHandle stream) = 0;
  // Whether all work before `fence` is done (without waiting).
  virtual bool FenceDone(FenceId fence) = 0;
  // Makes work queued on `stream` from now on wait for `fence`, on the
  // device (nothing to do when `stream` is the one the fence was recorded on).
  virtual Status StreamWaitFence(StreamHandle stream, FenceId fence) = 0;
  // Waits on the host until all work before `fence` is done.
  virtual Status WaitFence(FenceId fence) = 0;
  // No block refers to `fence` any more (its event may be recorded again).
  virtual void DropFence(FenceId fence) = 0;
};

// Blocks are carved from chunks, best fit (the smallest free block that
// fits, the lowest address among equals), and a block's remainder stays
// free. A request of at least own_chunk_from bytes that nothing fits gets a
// chunk of its own (its size rounded up to 2 MiB); a smaller one, a shared
// chunk of chunk_bytes.
//
// Stream order: a block freed on stream S carries a fence recorded on S at
// the free. It may be reused at once by an allocation on any stream T: T is
// first made to wait for the fence (as CUDA's own pools do by default),
// unless the fence is already known passed; PoolOps may find the wait
// implied (T is S: stream order already puts T's new work after the free).
// So work queued before the free always finishes before the new owner's
// work starts, whatever streams they use. Fences are found passed only by
// polling them: when no free block fits, before the pool grows, and when
// trimming. Until then, neighbouring free blocks are not merged unless they
// carry the same fence: querying every fence at every allocation would
// cost more than the waits, and merging matters only once nothing fits.
//
// Memory goes back to the driver only in whole chunks with nothing in them
// and no fence pending: on Trim, and when growing fails (then every pending
// fence is waited for, idle chunks are given back, and growing is tried once
// more). Otherwise chunks are kept, as PyTorch keeps its pool's memory: the
// next step needs the same sizes again.
//
// Invariants: the blocks of a chunk tile its aligned span exactly, in
// address order; every block starts at a multiple of `alignment` and its
// size is one; free blocks are all in the free index, used and retired ones
// are not; fence_refs_ counts, for each fence, the free blocks that carry it.
class ManagedPool {
 public:
  // REQUIRES: chunk_bytes a multiple of 2 MiB, own_chunk_from <= chunk_bytes,
  // alignment a power of two (CUDA promises 256 bytes; 512 as PyTorch rounds).
  struct Settings {
    uint64_t chunk_bytes = uint64_t{64} << 20;     // a shared chunk
    uint64_t own_chunk_from = uint64_t{32} << 20;  // requests this large get their own
    uint64_t alignment = 512;                      // of every block's start and size
  };

  ManagedPool() : ManagedPool(Settings{}) {}
  explicit ManagedPool(Settings settings) : settings_(settings) {}
  ManagedPool(const ManagedPool&) = delete;
  ManagedPool& operator=(const ManagedPool&) = delete;

  // A block of at least `bytes` (rounded up to the alignment), ready for work
  // queued on `stream` from now on. InvalidArgument for 0 bytes; the
  // driver's error when the pool must grow and cannot, even after giving
  // back what it holds idle.
  Result<uint64_t> Allocate(uint64_t bytes, StreamHandle stream, PoolOps& ops);
  // Frees the block at `ptr` (its start) once the work queued on `stream`
  // so far is done. InvalidArgument if `ptr` is not the start of a live
  // block. When no fence can be recorded the block is retired (never
  // reused; its chunk is kept) and the fence's error is returned.
  Status Free(uint64_t ptr, StreamHandle stream, PoolOps& ops);
  // Frees the block at `ptr` with no fence: the caller guarantees that no
  // queued work uses it (cuMemFree's contract for stream-ordered memory).
  Status FreeIdle(uint64_t ptr);
  // Takes the block at `ptr` out of use for good: when it will be free is
  // unknowable (a free captured into a graph).
  Status Retire(uint64_t ptr);
  // Gives back idle chunks (nothing allocated, no fence pending, after
  // polling the fences) until at most `keep_bytes` are reserved. Returns the
  // bytes given back.
  uint64_t Trim(uint64_t keep_bytes, PoolOps& ops);

  // Whether `ptr` lies in one of the pool's chunks.
  bool Contains(uint64_t ptr) const;
  // The live block containing `ptr` (interior pointers included), if any.
  std::optional<ByteRange> BlockAt(uint64_t ptr) const;

  uint64_t reserved_bytes() const { return reserved_; }  // all chunks
  uint64_t in_use_bytes() const { return in_use_; }      // live blocks (rounded sizes)
  uint64_t retired_bytes() const { return retired_; }
  size_t chunk_count() const { return chunks_.size(); }

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t chunk = 0;  // base of its chunk
    enum class State : uint8_t { kFree, kUsed, kRetired } state = State::kFree;
    FenceId fence = kNoFence;  // a free block's: what reuse must wait for
  };
  struct Chunk {
    uint64_t bytes = 0;           // as allocated
    uint64_t begin = 0, end = 0;  // the aligned span its blocks tile
    uint64_t live_blocks = 0;     // used or retired
  };
  using BlockIt = std::map<uint64_t, Block>::iterator;

  // Takes the best-fitting free block for `need` bytes and orders `stream`
  // after its fence; nullopt when none fits.
  std::optional<uint64_t> Carve(uint64_t need, StreamHandle stream, PoolOps& ops);
  // Adds a chunk able to hold `need` bytes.
  Status Grow(uint64_t need, PoolOps& ops);
  // Makes the used block `it` free, carrying `fence`, and merges it.
  void Release(BlockIt it, FenceId fence);
  // Puts the free block `it` in the index, merged first with the free
  // neighbours of its chunk that carry the same fence; the merged block.
  BlockIt InsertFree(BlockIt it);
  void EraseFree(BlockIt it) { free_.erase({it->second.size, it->first}); }
  void Ref(FenceId fence);
  void Unref(FenceId fence, PoolOps& ops);
  // Clears every fence `passed` says is done from the free blocks, then
  // merges what became mergeable. True if any was.
  template <typename Passed>
  bool ClearFences(Passed&& passed, PoolOps& ops);
  // Live-block lookup: InvalidArgument unless `ptr` starts a used block.
  Result<BlockIt> Live(uint64_t ptr);

  Settings settings_;
  std::map<uint64_t, Block> blocks_;              // every block, by address
  std::set<std::pair<uint64_t, uint64_t>> free_;  // (size, address) of free blocks
  std::map<uint64_t, Chunk> chunks_;              // by base
  std::map<FenceId, uint32_t> fence_refs_;
  uint64_t reserved_ = 0, in_use_ = 0, retired_ = 0;
};

}  // namespace msched

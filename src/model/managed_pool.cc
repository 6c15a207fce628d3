#include "model/managed_pool.h"

#include <string>
#include <vector>

namespace msched {

Result<uint64_t> ManagedPool::Allocate(uint64_t bytes, StreamHandle stream, PoolOps& ops) {
  if (bytes == 0) return Status::InvalidArgument("a stream-ordered allocation of 0 bytes");
  if (bytes > UINT64_MAX / 2) {
    return Status::ResourceExhausted("a stream-ordered allocation of " + std::to_string(bytes) + " bytes");
  }
  const uint64_t need = AlignUp(bytes, settings_.alignment);
  if (std::optional<uint64_t> p = Carve(need, stream, ops)) return *p;
  // Frees whose fences have passed may merge into a block that fits.
  if (ClearFences([&ops](FenceId f) { return ops.FenceDone(f); }, ops)) {
    if (std::optional<uint64_t> p = Carve(need, stream, ops)) return *p;
  }
  Status grown = Grow(need, ops);
  if (grown.code() == StatusCode::kResourceExhausted) {
    // Out of memory: wait for every pending free (they may merge into a
    // fit), give back the idle chunks, and ask once more only if that gave
    // something back; otherwise the driver's answer stands.
    ClearFences([&ops](FenceId f) { return ops.WaitFence(f).ok(); }, ops);
    if (std::optional<uint64_t> p = Carve(need, stream, ops)) return *p;
    if (Trim(0, ops) > 0) grown = Grow(need, ops);
  }
  MSCHED_RETURN_IF_ERROR(grown);
  if (std::optional<uint64_t> p = Carve(need, stream, ops)) return *p;
  // Only a chunk whose base the driver did not align can come short.
  return Status::ResourceExhausted("a new chunk of managed memory cannot hold " + std::to_string(need) +
                                   " aligned bytes");
}

Status ManagedPool::Free(uint64_t ptr, StreamHandle stream, PoolOps& ops) {
  Result<BlockIt> it = Live(ptr);
  if (!it.ok()) return it.status();
  Result<FenceId> fence = ops.RecordFence(stream);
  if (!fence.ok()) {
    // When the block's work ends is unknown: it can never be handed out again.
    MSCHED_RETURN_IF_ERROR(Retire(ptr));
    return fence.status();
  }
  Release(*it, *fence);
  return Status::Ok();
}

Status ManagedPool::FreeIdle(uint64_t ptr) {
  Result<BlockIt> it = Live(ptr);
  if (!it.ok()) return it.status();
  Release(*it, kNoFence);
  return Status::Ok();
}

Status ManagedPool::Retire(uint64_t ptr) {
  Result<BlockIt> it = Live(ptr);
  if (!it.ok()) return it.status();
  Block& b = (*it)->second;
  b.state = Block::State::kRetired;
  in_use_ -= b.size;
  retired_ += b.size;
  return Status::Ok();
}

uint64_t ManagedPool::Trim(uint64_t keep_bytes, PoolOps& ops) {
  if (reserved_ <= keep_bytes) return 0;
  ClearFences([&ops](FenceId f) { return ops.FenceDone(f); }, ops);
  uint64_t released = 0;
  for (auto c = chunks_.begin(); c != chunks_.end() && reserved_ > keep_bytes;) {
    const Chunk& chunk = c->second;
    // Idle: nothing live, every free block merged into one, no fence on it.
    const BlockIt b = blocks_.find(chunk.begin);
    const bool idle = chunk.live_blocks == 0 && b != blocks_.end() && b->second.fence == kNoFence &&
                      b->second.size == chunk.end - chunk.begin;
    if (!idle || !ops.ReleaseChunk(c->first, chunk.bytes).ok()) {
      ++c;
      continue;
    }
    EraseFree(b);
    blocks_.erase(b);
    reserved_ -= chunk.bytes;
    released += chunk.bytes;
    c = chunks_.erase(c);
  }
  return released;
}

bool ManagedPool::Contains(uint64_t ptr) const {
  auto c = chunks_.upper_bound(ptr);
  if (c == chunks_.begin()) return false;
  --c;
  return ptr - c->first < c->second.bytes;
}

std::optional<ByteRange> ManagedPool::BlockAt(uint64_t ptr) const {
  auto b = blocks_.upper_bound(ptr);
  if (b == blocks_.begin()) return std::nullopt;
  --b;
  if (b->second.state != Block::State::kUsed || ptr - b->first >= b->second.size) return std::nullopt;
  return ByteRange{b->first, b->first + b->second.size};
}

std::optional<uint64_t> ManagedPool::Carve(uint64_t need, StreamHandle stream, PoolOps& ops) {
  for (auto f = free_.lower_bound({need, 0}); f != free_.end(); ++f) {
    const BlockIt it = blocks_.find(f->second);
    Block& b = it->second;
    const FenceId fence = b.fence;
    // The new owner's stream waits for the free's; failing that, the host
    // does; failing both, this block is passed over.
    if (fence != kNoFence && !ops.StreamWaitFence(stream, fence).ok() && !ops.WaitFence(fence).ok()) continue;
    free_.erase(f);
    if (b.size > need) {
      // The remainder stays free behind the same fence, for later allocations.
      const Block rest{b.size - need, b.chunk, Block::State::kFree, fence};
      const BlockIt r = blocks_.emplace_hint(std::next(it), it->first + need, rest);
      free_.insert({rest.size, r->first});
      if (fence != kNoFence) Ref(fence);
      b.size = need;
    }
    b.state = Block::State::kUsed;
    b.fence = kNoFence;
    if (fence != kNoFence) Unref(fence, ops);
    ++chunks_[b.chunk].live_blocks;
    in_use_ += need;
    return it->first;
  }
  return std::nullopt;
}

Status ManagedPool::Grow(uint64_t need, PoolOps& ops) {
  const uint64_t bytes = need >= settings_.own_chunk_from ? AlignUp(need, kChunkSize) : settings_.chunk_bytes;
  Result<uint64_t> base = ops.AllocateChunk(bytes);
  if (!base.ok()) return base.status();
  Chunk c;
  c.bytes = bytes;
  c.begin = AlignUp(*base, settings_.alignment);
  c.end = AlignDown(*base + bytes, settings_.alignment);
  chunks_[*base] = c;
  reserved_ += bytes;
  const BlockIt it = blocks_.emplace(c.begin, Block{c.end - c.begin, *base, Block::State::kFree, kNoFence}).first;
  free_.insert({it->second.size, it->first});
  return Status::Ok();
}

void ManagedPool::Release(BlockIt it, FenceId fence) {
  Block& b = it->second;
  in_use_ -= b.size;
  --chunks_[b.chunk].live_blocks;
  b.state = Block::State::kFree;
  b.fence = fence;
  if (fence != kNoFence) Ref(fence);
  (void)InsertFree(it);
}

ManagedPool::BlockIt ManagedPool::InsertFree(BlockIt it) {
  // Neighbours in the same chunk are contiguous (the blocks tile it).
  auto mergeable = [](const Block& a, const Block& b) {
    return a.chunk == b.chunk && a.state == Block::State::kFree && b.state == Block::State::kFree && a.fence == b.fence;
  };
  // Two blocks carried the fence and one is left: its count cannot reach 0.
  auto absorbed = [this](FenceId fence) {
    if (fence != kNoFence) --fence_refs_[fence];
  };
  const BlockIt next = std::next(it);
  if (next != blocks_.end() && mergeable(it->second, next->second)) {
    EraseFree(next);
    it->second.size += next->second.size;
    absorbed(next->second.fence);
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    const BlockIt prev = std::prev(it);
    if (mergeable(prev->second, it->second)) {
      EraseFree(prev);
      prev->second.size += it->second.size;
      absorbed(it->second.fence);
      blocks_.erase(it);
      it = prev;
    }
  }
  free_.insert({it->second.size, it->first});
  return it;
}

void ManagedPool::Ref(FenceId fence) { ++fence_refs_[fence]; }

void ManagedPool::Unref(FenceId fence, PoolOps& ops) {
  auto it = fence_refs_.find(fence);
  if (it == fence_refs_.end() || --it->second > 0) return;
  fence_refs_.erase(it);
  ops.DropFence(fence);
}

template <typename Passed>
bool ManagedPool::ClearFences(Passed&& passed, PoolOps& ops) {
  std::set<FenceId> done;
  for (const auto& [fence, refs] : fence_refs_) {
    if (passed(fence)) done.insert(fence);
  }
  if (done.empty()) return false;
  for (FenceId fence : done) {
    fence_refs_.erase(fence);
    ops.DropFence(fence);
  }
  // Only free blocks carry fences; each cleared one merges with its cleared
  // (or never fenced) neighbours as it is reached, in address order.
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->second.state != Block::State::kFree || done.count(it->second.fence) == 0) continue;
    EraseFree(it);
    it->second.fence = kNoFence;
    it = InsertFree(it);
  }
  return true;
}

Result<ManagedPool::BlockIt> ManagedPool::Live(uint64_t ptr) {
  const BlockIt it = blocks_.find(ptr);
  if (it == blocks_.end() || it->second.state != Block::State::kUsed) {
    return Status::InvalidArgument("no live stream-ordered allocation starts at " + std::to_string(ptr));
  }
  return it;
}

}  // namespace msched

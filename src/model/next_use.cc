#include "model/next_use.h"

namespace msched {

void NextUsePredictor::NoteLaunch(uint64_t signature, uint64_t seq) {
  latest_ = std::max(latest_, seq);
  // The multiply carries low bits up only: fold the high bits down before
  // indexing.
  SeenLaunch& seen = seen_launches_[(signature ^ signature >> 32 ^ signature >> 48) & (kSeenLaunches - 1)];
  if (seen.signature == signature && seen.seq < seq) {
    const uint64_t interval = seq - seen.seq;
    if (interval == loop_candidate_) {
      loop_votes_ = std::min(loop_votes_ + 1, kLoopVotes);
    } else {
      loop_candidate_ = interval;
      loop_votes_ = 1;
    }
  }
  seen = {signature, seq};
}

uint64_t NextUsePredictor::NextUse(const UseHistory& h, uint64_t loop) const {
  const uint64_t last = h.last(), prev = h.prev();
  const uint64_t own = prev != 0 && prev < last ? last + (last - prev) : 0;
  if (loop == 0) return own;
  // Each use within the last loop comes back one loop later.
  uint64_t next = 0;
  for (uint64_t u : h.uses) {
    if (u != 0 && u + loop > latest_ && (next == 0 || u + loop < next)) next = u + loop;
  }
  // The chunk's own interval serves where the loop says nothing, if it
  // still lies ahead (a loop estimated too short misses the chunk's uses).
  if (own > latest_ && next == 0) next = own;
  // A chunk used more than four times a loop lost a use within it from the
  // history, which may come back before the remembered ones: its own
  // interval, even one already past (it is due any time), ranks it near.
  // (Training's gradient buffers, used every other launch in backward,
  // stay resident so: 1.42x Belady at E-train 150% without this, 1.27x.)
  if (h.forgotten_use != 0 && h.forgotten_use + loop > latest_ && own != 0) next = std::min(next, own);
  return next;
}

}  // namespace msched

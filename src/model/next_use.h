// Next-use prediction for the memory manager: when a chunk of memory will be
// needed again, for the futures the coordinator does not give. Two sources:
//  - the chunk's own last reuse interval (training and decode loops repeat:
//    a layer's weights come back one iteration later);
//  - once the job is seen to repeat its launches every P launches (a
//    training step, a decoded token), the chunk's own uses in the last P
//    launches, each coming back P launches later: the exact future of a
//    program that loops exactly. The chunk's own interval still serves when
//    the loop misses the chunk's uses, or a use within the loop fell out of
//    its history.
// Knows nothing of chunks or addresses: a chunk's uses are a UseHistory, a
// launch is a signature. Externally synchronized (the memory manager's).
// Used by the memory manager's pieces (model/).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace msched {

// The launches that last used one chunk. Invariant: `uses` is newest first,
// strictly decreasing over its nonzero entries, zeros (none) at the end.
struct UseHistory {
  std::array<uint64_t, 4> uses{};  // sequence numbers, newest first (0: none)
  uint64_t forgotten_use = 0;      // the use that fell out of `uses`

  uint64_t last() const { return uses[0]; }
  uint64_t prev() const { return uses[1]; }
  // Launch `seq` (not older than last()) used the chunk; once per launch.
  void Record(uint64_t seq) {
    if (uses[0] == seq) return;
    static_assert(std::tuple_size_v<decltype(uses)> == 4, "the shift below names every entry");
    forgotten_use = uses[3];
    uses[3] = uses[2];  // by hand: std::copy_backward became a memmove call per chunk and launch
    uses[2] = uses[1];
    uses[1] = uses[0];
    uses[0] = seq;
  }
};

// A launch's signature: FNV-1a over what it accesses (the memory manager
// mixes each region's mode and, for each run of consecutive chunks it
// covers, the first and last chunk ids with their unit masks), so that
// launches that access the same memory in the same way sign alike.
class LaunchSignature {
 public:
  void Mix(uint64_t v) { value_ = (value_ ^ v) * 0x100000001b3ull; }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 0xcbf29ce484222325ull;
};

class NextUsePredictor {
 public:
  // Repeats that must agree on a loop's length before it predicts.
  static constexpr uint32_t kLoopVotes = 2;
  // Recent launches remembered by signature, direct-mapped (a collision
  // only loses a vote); a power of two.
  static constexpr size_t kSeenLaunches = 4096;

  NextUsePredictor() : seen_launches_(kSeenLaunches) {}

  // Launch `seq` (increasing) signed `signature`: a repeat of an earlier
  // launch with the same signature votes for the distance between them as
  // the job's loop length. `seq` is also the latest launch from then on.
  void NoteLaunch(uint64_t signature, uint64_t seq);

  // The job's loop length in launches, when its last kLoopVotes repeats
  // agreed on it; 0 when they did not. Launches are named by allocation and
  // place, never by address, so that runs number alike. A decode loop
  // agrees from its second token on, a training loop from its second step;
  // a first pass votes for nothing (training's backward reads what forward
  // wrote, but with other ranges), so it keeps least-recently-used order,
  // right for the reverse sweep that follows. Launches whose ranges repeat
  // within an iteration (a buffer reused by every layer) disagree with the
  // others, and the loop is then unknown: the chunk's own reuse interval
  // predicts instead. Two such repeats in a row with no other vote between
  // do set a loop that is too short; a chunk it leaves without a use in its
  // window then falls back to its own interval rather than to
  // least-recently-used order.
  uint64_t loop_interval() const { return loop_votes_ >= kLoopVotes ? loop_candidate_ : 0; }
  // The latest launch noted (0: none).
  uint64_t latest() const { return latest_; }

  // When the chunk with uses `h` is needed next, by the rules in the file
  // comment, given the loop length `loop` (loop_interval(), passed in so
  // that a caller ranking many chunks computes it once); 0 when nothing
  // predicts it.
  uint64_t NextUse(const UseHistory& h, uint64_t loop) const;

 private:
  struct SeenLaunch {
    uint64_t signature = 0;
    uint64_t seq = 0;
  };
  uint64_t loop_candidate_ = 0;
  uint32_t loop_votes_ = 0;
  uint64_t latest_ = 0;
  std::vector<SeenLaunch> seen_launches_;
};

}  // namespace msched

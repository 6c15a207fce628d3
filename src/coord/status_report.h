// The coordinator's status document, as `msched status --json` prints it
// (docs/operate.md lists its fields): the coordinator's settings and state,
// then each job: whose it is, what it holds, and, when it is not on the GPU,
// why and since when. A guest sees other users' jobs without name or pid.
// Pure functions of the scheduler's state, apart from looking user names up
// in the system's user database; thread-safe. Used by the coordinator server
// and its tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "coord/job.h"
#include "coord/job_wall_clock.h"
#include "coord/scheduler.h"

namespace msched {

// Why a job is not on the GPU.
enum class WaitReason : uint8_t {
  kNone,          // it is on the GPU, or finished
  kAdmission,     // not admitted: its memory does not fit beside the admitted jobs' yet
  kTurn,          // admitted and time-sliced out: its group waits for its turn
  kPriority,      // admitted, passed by a job of higher priority that holds the GPU
  kPaused,        // paused by a user
  kIdle,          // gave its turn up for want of work; back in the rotation at its next launch
  kUnresponsive,  // passed over for not answering; back in the rotation once heard from
};
// "admission", "turn", "priority", "paused", "idle", "unresponsive"; "" for kNone.
const char* WaitReasonName(WaitReason r);
// Why `j` waits, among all the scheduler's `jobs`.
WaitReason WaitReasonOf(const Job& j, const std::map<uint64_t, Job>& jobs);

// The state `msched status` shows: "running" (on the GPU), "waiting",
// "swapped out" (admitted and off the GPU after a turn, holding at most a
// tenth of its working set there), "paused" or "finished".
const char* RunStateOf(const Job& j);

// The name of user `uid` in the system's user database, else its number.
std::string UserName(uint32_t uid);

struct StatusContext {
  std::string socket_path;  // where the coordinator listens
  uint32_t requester = 0;   // uid of the asker: root and each job's owner see it in full
  // The jobs' waits in wall time at `wall_now` (waited_ns, wait_ns); null:
  // on the device's clock.
  const JobWallClock* wall = nullptr;
  uint64_t wall_now = 0;
};

// The document, as indented JSON.
std::string StatusReport(const Scheduler& s, const StatusContext& c);

}  // namespace msched

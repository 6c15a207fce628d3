// mschedd's side of the timeline (docs/tracing.md), in the Chrome trace
// event format, laid out as msched/trace_layout.h says:
//   - per job, one span per state: running, waiting for admission, waiting
//     for its turn, draining (a stop not yet answered), paused; instants for
//     its admission, refusal, preemptions and priority changes;
//   - per direction of the link, the swaps: a swap-in spans from the Go that
//     asked for it for as long as the job measured (both reported with its
//     next Stopped; a job that exits first reports nothing, and its
//     swap-in is drawn as its working set at the measured link rate); a
//     swap-out starts when the job has queued its evictions and lasts the
//     bytes it gave up (the coordinator's estimate) at the measured link
//     rate. A transfer that would overlap the one before it in the same
//     direction is drawn after it, so a track never overlaps.
// Times are the scheduler's: the device clock the jobs report. Each span is
// written when it ends; Close ends those still open.
// Externally synchronized (the server's thread). Used by the server.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "base/chrome_trace.h"
#include "coord/scheduler.h"

namespace msched {

class CoordTrace {
 public:
  explicit CoordTrace(std::unique_ptr<trace::Writer> writer);

  // After the scheduler changed: ends the span of every job whose state
  // changed and starts its next one; notes admissions and priority changes.
  void Sync(const Scheduler& s);
  // Commands about to be sent: refusals, preemptions, and the start of
  // each swap-in a Go asks for.
  void Sent(const Scheduler& s, const Commands& commands);
  // Job `id` answered a stop with `m`. Call before the scheduler learns it
  // (the job's resident bytes before the stop are still the scheduler's).
  void Stopped(const Scheduler& s, uint64_t id, const proto::Stopped& m);
  void Flush() { writer_->Flush(); }
  // Ends every open span at the scheduler's time and closes the file.
  Status Close(const Scheduler& s);

 private:
  struct Track {
    int64_t pid = 0;
    const char* state = nullptr;  // the open span's name (nullptr: none)
    uint64_t since = 0;
    int priority = 0;
    bool admitted = false;
    uint64_t load_from = 0;      // when its last Go with a load began (0: none unreported)
    uint64_t load_estimate = 0;  // the bytes that load was expected to bring
  };
  Track& TrackOf(const Scheduler& s, uint64_t id);
  void EndSpan(uint64_t id, Track& t, uint64_t now);
  // A swap-in the job will never report (it exited): drawn as estimated.
  void UnreportedLoad(uint64_t id, Track& t, double link_bytes_per_ns);
  void Instant(const Track& t, const char* name, uint64_t now, nlohmann::json args);
  void Link(int64_t tid, const char* name, uint64_t ts, uint64_t dur, nlohmann::json args);

  std::unique_ptr<trace::Writer> writer_;
  std::map<uint64_t, Track> tracks_;       // by job id; dropped when the scheduler forgets the job
  std::map<int64_t, uint64_t> link_free_;  // per link track: when its last transfer ends
};

}  // namespace msched

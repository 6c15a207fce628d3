// The coordinator protocol: framed messages over a UNIX stream socket. A job
// (libmsched in its process) keeps one connection for its whole life; the
// msched CLI opens one per request. Each frame is a 12-byte header (magic,
// version, type, payload size) and a payload whose fields are written one by
// one (native byte order: both ends run on one machine), so no struct
// padding or uninitialised byte crosses the socket. Decoding checks
// everything a hostile peer could get wrong: magic, version, a known type,
// the exact payload size its fields need, text lengths and characters, and
// enum and range limits; a frame that fails is rejected whole. Every text
// field is valid UTF-8 without control characters (a job name has none at
// all), so whatever decodes can be logged and put in JSON as it is. Each
// message type has its own size limit, checked from the header alone, so a
// peer can never make the coordinator hold more than one small frame.
// Identity never comes from a message: the coordinator takes the peer's uid
// and pid from the socket (SO_PEERCRED) and the job from the connection.
// Value types and pure functions; thread-safe. Used by mschedd, the hook's
// coordinator client and the msched CLI.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "msched/config.h"
#include "msched/status.h"

namespace msched::proto {

inline constexpr uint32_t kMagic = 0x4443534d;  // "MSCD" in memory order
// 2: the gate travels as a descriptor; 3: usage, stopped and goodbye carry
// the job's counters; 4: the welcome carries the idle yield, and jobs report
// going idle and having work again; 5: a usage report may ask for an answer
// (a budget answering it) before the job launches again; 6: each Go carries
// the turn's idle yield; 7: a hello may declare the job a service; 8: the
// counters carry the peak over budget; 9: and the shared bytes; 10: and the
// bytes that cannot page.
inline constexpr uint16_t kVersion = 10;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 1 << 20;  // a status report; every other frame is far smaller
inline constexpr size_t kMaxName = 63;
inline constexpr size_t kMaxReason = 255;
inline constexpr uint64_t kNever = UINT64_MAX;  // a slice without end; "evict everything"

enum class MsgType : uint16_t {
  // job -> coordinator
  kHello = 1,  // register (at the job's first allocation)
  kUsage,      // allocated bytes changed
  kSliceEnd,   // the job reached the end of its slice at a kernel boundary
  kIdle,       // the job launched nothing for the idle yield while others waited, or has work again
  kStopped,    // a Stop was carried out
  kGoodbye,    // the job is exiting (a job that dies just closes its socket)
  // coordinator -> job
  kWelcome,  // registered: admitted now or queued
  kRefused,  // can never run here
  kGo,       // run (again): start time, budget, slice end, load the working set
  kStop,     // stop launching, drain, evict this much, answer Stopped
  kBudget,   // the HBM budget changed while running
  // msched CLI -> coordinator, and back
  kControl,
  kControlReply,
};

struct Hello {
  static constexpr MsgType kType = MsgType::kHello;
  uint64_t declared_mem = 0;  // MSCHED_MEM; 0: not declared
  uint64_t allocated = 0;     // bytes allocated so far (at least the allocation being made)
  uint64_t device_total = 0;  // the device's memory as the driver reports it
  uint64_t now_ns = 0;        // the job's device clock
  int32_t priority = 0;
  JobClass job_class = JobClass::kUnset;
  std::string name;
  template <typename V>
  bool Fields(V& v) {
    return v(declared_mem) && v(allocated) && v(device_total) && v(now_ns) && v(priority) && v(job_class) &&
           v.Name(name);
  }
  Status Validate() const;
};

// The job's running totals since its process started, for mschedd's
// metrics; every report a job makes (usage, stopped, goodbye) carries them.
// The coordinator trusts them no more than any other figure a job reports:
// they feed only the metrics, never a decision.
struct JobCounters {
  uint64_t faults = 0;      // GPU page faults (counted by the simulated GPU; 0 on a real one)
  uint64_t prefetched = 0;  // bytes moved to the GPU ahead of use
  // The most the job's memory in HBM exceeded its budget when all its work
  // was complete (a synchronisation of everything it launched, a stop's
  // drain): what kernels msched could not predict faulted in beyond it.
  uint64_t peak_over_budget = 0;
  // Bytes of its memory shared with another process through a handle (VMM
  // handles exported or imported, IPC imports): kept on the GPU, never
  // moved by msched.
  uint64_t shared = 0;
  // Bytes of its memory that cannot page (VMM memory, on the GPU or moved
  // out, and shared memory), with a VMM allocation being made: all of it
  // must be on the GPU whenever the job runs.
  uint64_t unpaged = 0;
  template <typename V>
  bool Fields(V& v) {
    return v(faults) && v(prefetched) && v(peak_over_budget) && v(shared) && v(unpaged);
  }
};

// The job's allocated bytes changed. With `ask` (numbered from 1, rising),
// it holds more than the coordinator last knew and launches nothing more
// until a Budget answers that ask: its grant was decided for less.
struct Usage {
  static constexpr MsgType kType = MsgType::kUsage;
  uint64_t allocated = 0;
  uint64_t now_ns = 0;
  JobCounters counters;
  uint64_t ask = 0;  // 0: no answer wanted
  template <typename V>
  bool Fields(V& v) {
    return v(allocated) && v(now_ns) && counters.Fields(v) && v(ask);
  }
  Status Validate() const { return Status::Ok(); }
};

struct SliceEnd {
  static constexpr MsgType kType = MsgType::kSliceEnd;
  uint64_t now_ns = 0;
  template <typename V>
  bool Fields(V& v) {
    return v(now_ns);
  }
  Status Validate() const { return Status::Ok(); }
};

// A job that holds its turn while others wait for theirs and has launched
// nothing (and synchronised all it launched) for the welcome's idle yield
// gives its turn up: `idle`, as of `at_ns`, when it went idle. The answer is
// a Stop (the turn passed on: the job is out of the rotation) or a Go (it
// carries on). Once stopped that way, it says it has work again (`idle`
// false, at its launch at `at_ns`) and waits for its turn like any other.
struct Idle {
  static constexpr MsgType kType = MsgType::kIdle;
  uint64_t at_ns = 0;
  bool idle = true;
  template <typename V>
  bool Fields(V& v) {
    return v(at_ns) && v(idle);
  }
  Status Validate() const { return Status::Ok(); }
};

struct Stopped {
  static constexpr MsgType kType = MsgType::kStopped;
  uint64_t now_ns = 0;       // after the drain and the evictions were queued
  uint64_t resident = 0;     // bytes the job now holds in HBM (its estimate)
  uint64_t working_set = 0;  // bytes the job used in the slice that ended
  uint64_t loaded = 0;       // bytes its last Go brought in, and how long that took
  uint64_t load_ns = 0;
  JobCounters counters;
  template <typename V>
  bool Fields(V& v) {
    return v(now_ns) && v(resident) && v(working_set) && v(loaded) && v(load_ns) && counters.Fields(v);
  }
  Status Validate() const { return Status::Ok(); }
};

struct Goodbye {
  static constexpr MsgType kType = MsgType::kGoodbye;
  uint64_t now_ns = 0;
  JobCounters counters;  // the final totals
  template <typename V>
  bool Fields(V& v) {
    return v(now_ns) && counters.Fields(v);
  }
  Status Validate() const { return Status::Ok(); }
};

// Sent with a read-only descriptor of the coordinator's shared memory
// (SCM_RIGHTS): only connected jobs can map it, and none can write it.
struct Welcome {
  static constexpr MsgType kType = MsgType::kWelcome;
  uint64_t job = 0;
  uint32_t slot = 0;           // the job's slot in the coordinator's shared memory
  bool admitted = false;       // false: queued; a Go follows when it may run
  uint64_t idle_yield_ns = 0;  // a turn held this long without work is given up (Idle); 0: never
  template <typename V>
  bool Fields(V& v) {
    return v(job) && v(slot) && v(admitted) && v(idle_yield_ns);
  }
  Status Validate() const { return Status::Ok(); }
};

struct Refused {
  static constexpr MsgType kType = MsgType::kRefused;
  std::string reason;
  template <typename V>
  bool Fields(V& v) {
    return v.Text(reason, kMaxReason);
  }
  Status Validate() const { return Status::Ok(); }
};

struct Go {
  static constexpr MsgType kType = MsgType::kGo;
  uint64_t start_ns = 0;  // the device time the job's turn begins
  uint64_t budget = 0;    // HBM bytes it may hold
  uint64_t slice_end_ns = kNever;
  uint64_t idle_yield_ns = 0;  // the idle yield for this turn (replaces the welcome's); 0: never
  bool load = false;           // bring the last slice's working set back first
  template <typename V>
  bool Fields(V& v) {
    return v(start_ns) && v(budget) && v(slice_end_ns) && v(idle_yield_ns) && v(load);
  }
  Status Validate() const;
};

enum class StopReason : uint8_t { kSlice, kPause, kPreempt, kEvictOnly };

struct Stop {
  static constexpr MsgType kType = MsgType::kStop;
  uint64_t evict_bytes = 0;  // kNever: everything
  StopReason reason = StopReason::kSlice;
  template <typename V>
  bool Fields(V& v) {
    return v(evict_bytes) && v(reason);
  }
  Status Validate() const;
};

// The job's grant changed (`budget`, 0: unchanged), or `answers` a usage
// report's ask, after any other order that report caused.
struct Budget {
  static constexpr MsgType kType = MsgType::kBudget;
  uint64_t budget = 0;
  uint64_t answers = 0;  // the Usage::ask answered; 0: none
  template <typename V>
  bool Fields(V& v) {
    return v(budget) && v(answers);
  }
  Status Validate() const { return Status::Ok(); }
};

enum class ControlOp : uint8_t { kStatus, kPause, kResume, kPriority };

struct Control {
  static constexpr MsgType kType = MsgType::kControl;
  ControlOp op = ControlOp::kStatus;
  uint64_t job = 0;      // pause, resume, priority
  int32_t priority = 0;  // priority
  template <typename V>
  bool Fields(V& v) {
    return v(op) && v(job) && v(priority);
  }
  Status Validate() const;
};

struct ControlReply {
  static constexpr MsgType kType = MsgType::kControlReply;
  bool ok = false;
  std::string text;  // status: JSON; otherwise a sentence
  template <typename V>
  bool Fields(V& v) {
    return v(ok) && v.Text(text, kMaxPayload - 8);
  }
  Status Validate() const { return Status::Ok(); }
};

using Message = std::variant<Hello, Usage, SliceEnd, Idle, Stopped, Goodbye, Welcome, Refused, Go, Stop, Budget,
                             Control, ControlReply>;

// The whole frame, header included.
std::string Encode(const Message& m);
MsgType TypeOf(const Message& m);

struct Header {
  MsgType type;
  uint32_t size;  // payload bytes that follow
};
// The largest payload a frame of type `t` can have.
uint32_t MaxPayloadOf(MsgType t);
// Checks the header's magic, version, type and that type's size limit.
Result<Header> DecodeHeader(const uint8_t (&bytes)[kHeaderSize]);
// Decodes and validates a payload of the type the header named.
Result<Message> DecodePayload(const Header& header, const std::string& payload);

const char* MsgTypeName(MsgType t);

// `name` as a job name the protocol accepts: every byte that is not part of
// a printable UTF-8 character becomes '?', and it is cut to kMaxName bytes
// on a character boundary. Jobs send their names through this, so a name
// from the environment never makes a Hello malformed.
std::string SanitizeName(std::string_view name);
// Whether `text` is valid UTF-8 with no control characters, except newlines
// and tabs when `multiline`.
bool IsCleanText(std::string_view text, bool multiline);

}  // namespace msched::proto

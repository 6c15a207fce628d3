// File: msched/gate_layout.h
// The coordinator's gate page as every program sees it: one slot per job,
// written only by mschedd, mapped read-only by each job (coord/coord_shm.h
// creates and maps it). The layout is a contract between programs that may
// be built apart: change it only with kShmVersion, which both ends check.
// The fields are independent atomics, lock-free across processes.
#pragma once

#include <atomic>
#include <cstdint>

namespace msched {

inline constexpr uint32_t kShmMagic = 0x4d534853;  // "SHSM"
// 4: messages_handled (every message; 3's asks_handled counted asks), orders_sent, pid; 3: asks_handled;
// 2: no budget word (Go and Budget messages carry it)
inline constexpr uint32_t kShmVersion = 4;
inline constexpr uint32_t kShmSlots = 256;

struct ShmSlot {
  std::atomic<uint64_t> job{0};           // 0: free
  std::atomic<uint32_t> may_run{0};       // 1: the job may launch (until slice_end_ns)
  std::atomic<uint64_t> slice_end_ns{0};  // UINT64_MAX: no end
  // How many of the job's messages since its hello (Usage, SliceEnd, Idle,
  // Stopped, Goodbye) the coordinator has handled: their orders sent and
  // the gates published.
  std::atomic<uint64_t> messages_handled{0};
  // Orders (Go, Stop, Budget) sent to the job since its welcome, counted
  // before each is written: one the job has not received is on its way.
  std::atomic<uint64_t> orders_sent{0};
  // The job's process (simulated runs: peers woken together wait for each
  // other, coord_client.cc).
  std::atomic<int32_t> pid{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "slots are shared between processes");

struct ShmLayout {
  uint32_t magic;
  uint32_t version;
  uint32_t slot_size;
  uint32_t slots;
  uint64_t coordinator_pid;
  ShmSlot slot[kShmSlots];
};

}  // namespace msched

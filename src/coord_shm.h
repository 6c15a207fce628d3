// The coordinator's hot state in POSIX shared memory: one slot per job,
// written only by mschedd, mapped read-only by each job so that its launch
// path can check whether it may run without a system call. The file is
// created 0644 by the coordinator (clients cannot write it, so no client can
// touch another's state) and carries a magic, a layout version and its size;
// a client refuses a mapping it does not understand.
// A slot's fields are independent atomics: a reader may see a gate opened
// a moment before the matching slice end; the protocol's Go message, not the
// slot, is what starts a job, so that is harmless.
// Thread-safe (atomics). Used by mschedd and the hook's coordinator client.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "msched/status.h"

namespace msched {

inline constexpr uint32_t kShmMagic = 0x4d534853;  // "SHSM"
inline constexpr uint32_t kShmVersion = 1;
inline constexpr uint32_t kShmSlots = 256;

struct ShmSlot {
  std::atomic<uint64_t> job{0};           // 0: free
  std::atomic<uint32_t> may_run{0};       // 1: the job may launch (until slice_end_ns)
  std::atomic<uint64_t> slice_end_ns{0};  // UINT64_MAX: no end
  std::atomic<uint64_t> budget{0};
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

class CoordShm {
 public:
  // mschedd: a fresh mapping under `name` ("/..."), replacing a stale one.
  static Result<CoordShm> Create(const std::string& name);
  // A job: the coordinator's mapping, read-only.
  static Result<CoordShm> OpenReadOnly(const std::string& name);
  CoordShm(CoordShm&& o) noexcept : layout_(o.layout_), name_(std::move(o.name_)), owner_(o.owner_) {
    o.layout_ = nullptr;
  }
  CoordShm& operator=(CoordShm&&) = delete;
  CoordShm(const CoordShm&) = delete;
  ~CoordShm();

  ShmSlot& slot(uint32_t i) { return layout_->slot[i]; }
  const ShmSlot& slot(uint32_t i) const { return layout_->slot[i]; }
  const std::string& name() const { return name_; }

 private:
  CoordShm(ShmLayout* layout, std::string name, bool owner) : layout_(layout), name_(std::move(name)), owner_(owner) {}
  ShmLayout* layout_;
  std::string name_;
  bool owner_;  // the coordinator unlinks the name when it goes
};

// The shared memory name for a coordinator socket path.
std::string ShmNameFor(const std::string& socket_path);

}  // namespace msched

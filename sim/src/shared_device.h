// SharedDevice: the state of one modelled GPU that every process using it
// shares: HBM accounting, managed-memory chunk records and their lists,
// the copy and compute engines' virtual timelines, and the process slots. It
// lives in a shared memory segment named by MSIM_DEVICE (or in private
// memory when unset) and is guarded by one robust, process-shared mutex: a
// process that dies holding it leaves the state repaired, not wedged.
// Thread-safe through DeviceLock; every method below REQUIRES the lock
// unless it says otherwise. Used by sim/ only.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "device_profile.h"

namespace msim {

inline constexpr uint64_t kPage = 4096;
inline constexpr uint64_t kUnit = 64 * 1024;                // residency granule (a serviced fault)
inline constexpr uint64_t kChunk = 2 * 1024 * 1024;         // VA block, eviction unit
inline constexpr uint32_t kUnitsPerChunk = kChunk / kUnit;  // 32
inline constexpr uint32_t kNone = UINT32_MAX;
inline constexpr int kMaxProcs = 64;
inline constexpr uint32_t kMaxReleases = 8192;

enum ChunkFlags : uint32_t {
  kInLru = 1u << 0,
  kRemoteHost = 1u << 2,  // preferred location host or accessed-by: GPU reads it in place
  kInRetained = 1u << 3,
};

// One 2 MiB block of one process's managed allocation. Per 64 KiB unit:
//   resident  the device holds a copy;
//   host      the host holds a valid copy (both: a read duplicate, which
//             eviction drops without copying back);
//   read-mostly  advised read-mostly: migrating it in leaves the host
//             copy valid (a read duplicate), as the driver's advice is per
//             page, not per allocation;
//   known     the model tracks the unit. An unknown unit was never written
//             through the driver; whether the host wrote it with plain
//             stores is learnt once, when the device first needs it. A known
//             unit with neither copy holds nothing (never written, or
//             discarded): the device populates it without a transfer;
//   retained  not resident, but its HBM is still the block's: a prefetch to
//             the host or a discard emptied it, and the driver keeps the
//             emptied chunk allocated to the block until an allocation
//             needs the memory (SharedDevice::ReclaimRetained) or the
//             block is freed. Counted as used (cuMemGetInfo reports it so);
//             the block migrating the unit back in reuses it.
// Invariants: kInLru is set iff resident_mask != 0; kInRetained is set iff
// retained_mask != 0; resident_mask, host_mask, retained_mask ⊆ valid_mask;
// resident_mask ∩ retained_mask = ∅; resident_mask | host_mask ⊆ known_mask;
// host_mask ⊆ host_pages_mask.
struct ChunkRec {
  uint64_t va;             // block base in the owner's address space
  uint64_t migrated_at;    // virtual time of the last migration in (LRU order)
  uint64_t ready_at;       // virtual time the last migration in completes
  uint64_t emptied_at;     // virtual time the copy out of its retained units completes
  int32_t owner;           // process slot, -1 when the record is free
  uint32_t valid_mask;     // 64 KiB units inside the allocation
  uint32_t resident_mask;  // units resident in HBM
  uint32_t host_mask;      // units with a valid host copy
  uint32_t known_mask;     // units whose contents the model tracks
  uint32_t flags;
  uint32_t lru_prev;
  uint32_t lru_next;
  uint32_t next_free;
  uint32_t host_pages_mask;   // units the host has pages for (it held them once; an eviction then allocates none)
  uint32_t read_mostly_mask;  // units advised read-mostly
  uint32_t retained_mask;     // units whose emptied HBM the block keeps
  uint32_t retained_prev;     // the list of chunks with retained units, in the order they came to have them
  uint32_t retained_next;
};

struct ProcSlot {
  int32_t pid;
  uint32_t in_use;
  uint64_t rank;          // tie-break between processes at equal virtual times
  uint64_t start_ticks;   // /proc/<pid>/stat start time: tells a reused pid apart
  uint64_t device_bytes;  // HBM held by its non-managed allocations
  uint64_t host_time;     // its virtual clock (written by its owner only)
  // Lockstep bookkeeping, read without the lock (aligned, atomic accesses):
  uint64_t last_active_ns;  // CLOCK_MONOTONIC of its last driver call
  uint32_t in_call;         // threads inside a driver call
  uint32_t blocked;         // waiting outside the simulator (msimSetBlocked)
  uint64_t wakeups_seen;    // what it had received when it blocked (msimSetBlocked)
};

struct ReleaseEntry {
  uint64_t at;     // virtual time the eviction's copy completes
  uint64_t bytes;  // HBM freed then
};

struct DeviceHeader;

class SharedDevice {
 public:
  // Attaches to the device `name` (creating it with `profile` if it does not
  // exist), or makes a private one when `name` is empty. `hbm_override` > 0
  // replaces the profile's capacity of a newly created device. Claims a
  // process slot ranked `rank` (WaitForTurn). Returns nullptr and sets
  // *error on failure. Takes the lock.
  static SharedDevice* Attach(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                              uint64_t rank, std::string* error);
  // The shared device `name`, created as Attach would, without a process
  // slot: for a coordinator that reads the device's size and clock and
  // takes no part in the lockstep (msimObserveDevice). slot() is -1.
  static SharedDevice* Observe(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                               std::string* error);

  void Lock();
  void Unlock();

  const DeviceProfile& profile() const;
  int slot() const { return slot_; }
  uint64_t capacity() const;
  // HBM held: device allocations, resident and retained units, evictions in
  // flight. Free() is what the driver reports free (cuMemGetInfo, with
  // evictions in flight): retained units count as used, although an
  // allocation may reclaim them at no cost.
  uint64_t used() const;
  uint64_t Free() const { return capacity() - used(); }

  // The latest virtual time any process sharing the device has reached:
  // device_now, or a process's own clock published since (ProcSlot::host_time).
  uint64_t LatestTime();

  // Engines: the virtual time each is next free.
  uint64_t& compute_free();
  uint64_t& h2d_free();
  uint64_t& d2h_free();
  uint64_t& device_now();
  ProcSlot& proc(int i);

  // HBM held outside managed memory (device, pitch, pool, VMM allocations).
  bool ReserveDevice(uint64_t bytes);  // false when it does not fit right now
  void ReleaseDevice(uint64_t bytes);

  // Chunk records.
  uint32_t AllocChunk(uint64_t va, uint32_t valid_mask);  // kNone when the table is full
  void FreeChunk(uint32_t idx);
  ChunkRec& chunk(uint32_t idx);

  // Residency bookkeeping; callers schedule the copies.
  // Makes `units` resident. Those the chunk retains are reused; the others'
  // HBM must be free (MakeRoom).
  void AddResident(uint32_t idx, uint32_t units, uint64_t migrated_at, uint64_t ready_at);
  // Clears `units`; the HBM they held is freed at `release_at` (or at once
  // when release_at is 0): an eviction's, or a freed block's.
  void DropResident(uint32_t idx, uint32_t units, uint64_t release_at);
  // Clears `units`, moved out on purpose (a prefetch to the host, a discard),
  // whose copy out completes at `emptied_at` (0: done). Their HBM stays the
  // chunk's: retained, still used.
  void RetainResident(uint32_t idx, uint32_t units, uint64_t emptied_at);
  // Gives retained HBM back, the chunk emptied first going first (as
  // nvidia-uvm's PMM evicts root chunks from its unused list, before any
  // in use), never `exclude`'s, until `bytes` fit in the free memory and
  // the evictions in flight. Returns when the memory it gave back is free:
  // `t`, or later when a copy out of it is still under way.
  uint64_t ReclaimRetained(uint64_t bytes, uint64_t t, uint32_t exclude);
  uint32_t LruHead() const;
  // Applies releases due by `t`; returns bytes still pending after.
  uint64_t ApplyReleases(uint64_t t);
  // Waits for the oldest pending release: returns its time, or 0 when none.
  uint64_t PopRelease();
  uint64_t pending_release_bytes() const;

  // Frees everything held by processes that no longer exist. Returns how
  // many slots were reclaimed.
  int ReclaimDeadProcesses();
  // The process that held slot `p` has exited (or its pid was reused).
  static bool Gone(const ProcSlot& p);
  // Called when this process detaches (at exit): frees its slot's holdings.
  void ReleaseSlot(int slot);

  // Lockstep across processes (no lock needed). Before a driver call at
  // virtual time `t`, waits in real time until no other active process is
  // behind t (or at t with a lower rank), so that processes sharing the
  // device interleave in virtual time order, as on a time-sliced GPU,
  // whatever their real-time speed, and calls at equal times go in a fixed
  // order: MSIM_RANK when set (launchers number their processes), else the
  // pid.
  // Blocked processes and ones idle for kIdleMs of real time do not hold
  // others back, nor does one that has stayed inside a single call, making
  // no other call, for kMaxStillMs (blocked outside the device without
  // saying so). A peer that is making calls, however slowly, is waited for:
  // giving up on it by the clock let a loaded host reorder the processes'
  // calls. kIdleMs is long enough that a process the OS has merely
  // descheduled on a loaded machine is not mistaken for an idle one.
  static constexpr uint64_t kIdleMs = 1000;
  static constexpr uint64_t kMaxStillMs = 5000;
  // A waiting process yields for kTurnYieldNs, then sleeps on a futex that
  // peers wake when they publish a change (NotifyTurn), for at most
  // kTurnRecheckNs before it looks at its peers again. After one yield that
  // took over kSlowYieldNs (the core went to another program for a slice),
  // it skips the yields for kBusyHostNs (AwaitChange).
  static constexpr uint64_t kTurnRecheckNs = 1000000;
  static constexpr uint64_t kTurnYieldNs = 50000;
  static constexpr uint64_t kSlowYieldNs = 500000;
  static constexpr uint64_t kBusyHostNs = 100000000;
  // A peer outside any call whose last activity was over kIdleMs before
  // `now_ns` (CLOCK_MONOTONIC). A peer may stamp its activity after `now_ns`
  // was read: such a stamp is recent, not 2^64 ns old (an unsigned
  // difference would let a process pass a peer between two of its launches,
  // so that the order of their kernels on the device would follow the
  // host's timing).
  static bool IdleAt(uint64_t now_ns, uint64_t last_active_ns, uint32_t in_call) {
    return in_call == 0 && now_ns > last_active_ns && now_ns - last_active_ns > kIdleMs * 1000000;
  }
  void WaitForTurn(uint64_t t);
  // Wakes the processes waiting in WaitForTurn: called after this process
  // published a change to its clock, its calls, its blocked flag or its slot.
  void NotifyTurn();
  // Waits for this process's turn at `t` as a driver call's entry and exit
  // would, without a call: no time passes and the idle alarm's count goes on.
  void WaitForTurnOutsideCall(uint64_t t) {
    EnterCall(t);
    WaitForTurn(t);
    LeaveCall(t);
  }
  // Publishes this process's clock; wakes the waiters when it moved.
  void PublishHostTime(uint64_t t);
  void EnterCall(uint64_t t);
  void LeaveCall(uint64_t t);
  void SetBlocked(bool blocked, uint64_t wakeups_seen);
  // Whether the live process `pid` on this device is blocked, and the
  // wake-ups it had seen then; false when no such process is attached.
  bool PeerBlocked(int32_t pid, uint64_t* wakeups_seen) const;

  // Start barrier for processes launched as a group (MSIM_START_BARRIER=n):
  // returns once n processes have arrived (counted in groups of n), so they
  // all begin at the same virtual time. Gives up after `timeout_ms`.
  void ArriveAndWait(uint32_t n, uint64_t timeout_ms);

 private:
  SharedDevice() = default;
  // Maps the segment of `name` (or a private one), creating and
  // initialising it first if need be; no process slot yet.
  static SharedDevice* Map(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                           std::string* error);
  // WaitForTurn's pause: returns once the turn sequence number is no longer
  // `seq` (a peer published a change), or after a while. `now` is when the
  // waiter last read its peers.
  void AwaitChange(uint32_t seq, uint64_t now);
  void LruUnlink(uint32_t idx);
  void LruAppend(uint32_t idx);
  void RetainedUnlink(uint32_t idx);
  void RetainedAppend(uint32_t idx);
  // Clears `units` of chunk idx's residency, taking it off the LRU list once
  // none is left; returns the units that were resident.
  uint32_t ClearResident(uint32_t idx, uint32_t units);
  // Clears `units` of chunk idx's retained ones; the caller says what
  // becomes of their HBM (freed, or resident again).
  void Unretain(uint32_t idx, uint32_t units);
  // Rebuilds derived state (the lists, totals) after a holder of the lock died.
  void Repair();

  DeviceHeader* h_ = nullptr;
  ChunkRec* chunks_ = nullptr;
  int slot_ = -1;
  // Peers WaitForTurn found dead or stopped, with the clock they had then.
  // Such a peer is passed over at once, not after kIdleMs on every call,
  // until its clock moves (it woke up) or its slot changes hands.
  struct StuckPeer {
    std::atomic<pid_t> pid{0};
    std::atomic<uint64_t> host_time{0};
  };
  std::array<StuckPeer, kMaxProcs> stuck_;
  // CLOCK_MONOTONIC until which WaitForTurn sleeps without yielding first.
  std::atomic<uint64_t> busy_host_until_{0};
};

// RAII holder of the device lock.
class DeviceLock {
 public:
  explicit DeviceLock(SharedDevice* d) : d_(d) { d_->Lock(); }
  ~DeviceLock() { d_->Unlock(); }
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

 private:
  SharedDevice* d_;
};

// The start time of process `pid` (field 22 of /proc/<pid>/stat), or 0.
uint64_t ProcessStartTicks(pid_t pid);
// The process is stopped (SIGSTOP, a debugger), from /proc.
bool ProcessStopped(pid_t pid);

}  // namespace msim

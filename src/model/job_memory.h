// JobMemory: the job side's memory policy, free of any driver, and the one
// owner of the job's memory:
//  - its allocations: one map of what pointers can point into, the
//    managed pool's chunks included, whose managed entries hold the memory
//    manager's chunks (it lives in the memory manager's ChunkTable);
//  - its HBM budget (what was configured, what the device reports, what the
//    coordinator granted, and what msched cannot move, each an explicit
//    field) and the memory manager that plans within it;
//  - every move of its memory: MakeResident for what an operation will
//    touch, EndSlice and StartSlice for a turn's end and start (its working
//    set taken, given back, brought back), FitBudget for a smaller grant.
// Every move goes through DeviceOps (the driver in the hook, a fake in
// tests) and one executor (Execute), and only bytes that really moved are
// counted. What launches touch counts as held from then on, whether msched
// loaded it or the launch faults it in, and the next launch planned evicts
// down to the budget.
// Externally synchronized (the hook holds its Runtime lock). Used by hook/.
#pragma once

#include <cstdint>
#include <vector>

#include "model/alloc_map.h"
#include "model/device_ops.h"
#include "model/memory_manager.h"
#include "model/template_eval.h"
#include "model/vmm_memory.h"
#include "msched/config.h"
#include "msched/status.h"

namespace msched {

struct JobBudget {
  uint64_t configured = 0;  // MSCHED_GPU_MEMORY; 0: not set
  uint64_t device = 0;      // the device's memory as its driver reports it; 0: not asked yet
  uint64_t granted = 0;     // the coordinator's grant while it coordinates the job; 0: none
  // Memory msched does not page (VMM memory on the device, memory shared
  // through IPC or an exportable pool): it counts against the total.
  uint64_t pinned = 0;

  // What the job may hold in HBM: the grant, else the configured size, else
  // the device's memory; 0 while none is known (nothing can be planned).
  uint64_t Total() const { return granted ? granted : configured ? configured : device; }
  // What the memory manager may fill.
  uint64_t Managed() const { return Total() > pinned ? Total() - pinned : 0; }
  // How far `managed_resident` bytes of managed memory on the device, with
  // the pinned memory beside them, exceed the total; 0 while none is known.
  uint64_t Over(uint64_t managed_resident) const {
    const uint64_t held = managed_resident + pinned;
    return Total() != 0 && held > Total() ? held - Total() : 0;
  }
};

// The bytes whose transfers were queued without error.
struct MovedBytes {
  uint64_t loaded = 0;
  uint64_t evicted = 0;
};

// What one move did.
struct MoveOutcome {
  uint64_t loaded = 0;    // bytes that reached the device
  uint64_t evicted = 0;   // bytes that went back to the host
  uint64_t unserved = 0;  // predicted bytes the budget cannot hold: left to fault
  Status status;          // the first transfer that failed (the rest were still tried)
};

class JobMemory {
 public:
  explicit JobMemory(EvictionPolicy policy);
  JobMemory(const JobMemory&) = delete;
  JobMemory& operator=(const JobMemory&) = delete;

  const JobBudget& budget() const { return budget_; }
  void SetConfigured(uint64_t bytes);
  void SetDevice(uint64_t bytes);
  // 0 withdraws the grant (the coordinator went away).
  void SetGranted(uint64_t bytes);
  // Memory shared with another process outside VMM came or went: imported
  // (cuIpcOpenMemHandle), or a block of a pool created to be exported.
  void AddShared(int64_t delta);

  // The job's VMM memory (vmm_memory.h). Every change goes through
  // ChangeVmm, whose result keeps what the job holds on the device counted
  // as pinned once the change is made:
  //   job.ChangeVmm()->Mapped(va, size, offset, id);
  const VmmMemory& vmm() const { return vmm_; }
  // Memory shared with another process through a handle, which never
  // moves: VMM handles exported or imported, and IPC imports.
  uint64_t shared_bytes() const { return shared_ + vmm_.shared_bytes(); }
  // Memory that cannot page, wherever it is now: VMM memory (on the device
  // or moved out between turns) and the other shared memory. The job needs
  // all of it on the device to run.
  uint64_t unpaged_bytes() const { return shared_ + vmm_.device_bytes() + vmm_.moved_bytes(); }
  class VmmChange {
   public:
    explicit VmmChange(JobMemory& job) : job_(job) {}
    VmmChange(const VmmChange&) = delete;
    VmmChange& operator=(const VmmChange&) = delete;
    ~VmmChange() { job_.CountPinned(); }
    VmmMemory* operator->() { return &job_.vmm_; }

   private:
    JobMemory& job_;
  };
  VmmChange ChangeVmm() { return VmmChange(*this); }

  // What the manager knows, to read: every change goes through JobMemory.
  const MemoryManager& manager() const { return manager_; }
  // For tests that build a manager's plans by hand for Execute.
  MemoryManager& mutable_manager_for_tests() { return manager_; }

  // A synchronisation succeeded with every launch up to `completed` (a
  // sequence number) in its scope: their chunks can be evicted without
  // waiting for them.
  void Synchronized(uint64_t completed) { manager_.MarkCompleted(completed); }

  // The job's allocations, whatever their kind.
  const AllocationMap& allocations() const { return manager_.allocations(); }
  // Records an allocation (replacing a stale entry at `base`, one freed
  // behind msched's back); managed ones are cut into the memory manager's
  // chunks. A pool block (kPooled) lies in a pool chunk recorded before.
  // Fails as AllocationMap::Insert does (empty, wrapping, overlapping).
  Status RecordAllocation(uint64_t base, uint64_t size, AllocKind kind) {
    return manager_.AddAllocation(base, size, kind);
  }
  // Forgets the allocation at `base`; NotFound if msched knows none there.
  Result<Allocation> ForgetAllocation(uint64_t base) { return manager_.RemoveAllocation(base); }
  // A managed pool's chunk: managed memory the job holds whose blocks, not
  // the chunk, are the program's allocations. Forgetting it forgets them.
  Status RecordPoolChunk(uint64_t base, uint64_t size) {
    return manager_.AddAllocation(base, size, AllocKind::kPoolChunk);
  }
  Status ForgetPoolChunk(uint64_t base) { return manager_.RemovePoolChunk(base); }

  // Makes `regions`, which operation number `seq` on `stream` will touch,
  // resident within the budget: evictions ordered after what `stream` has
  // queued when a victim may still be in use, loads in access order, and
  // `stream` made to wait for them. Nothing moves while the budget is unknown.
  // With `load` kLeaveToFaults the regions are not loaded: the launch faults
  // them in, and only the evictions that keep that within the budget are
  // made (MSCHED_UNKNOWN=fault).
  enum class Load : uint8_t { kPrefetch, kLeaveToFaults };
  MoveOutcome MakeResident(const std::vector<PredictedRegion>& regions, uint64_t seq, StreamHandle stream,
                           DeviceOps& ops, Load load = Load::kPrefetch);
  // The job's turn ends, every operation numbered up to `completed` having
  // run: takes the slice's working set (what its operations touched, kept
  // for its next turn) and gives back `evict_bytes`, what the next slice
  // needs last first. Asked for at least what it counts as held, it gives
  // back everything it may hold on the device, predicted or not: every
  // managed allocation in one pass (read-mostly duplicates dropped, then
  // their advice taken off and what the driver kept moved out too; `evicted`
  // counts what the manager knew to be there). With `wait` (a pause) it
  // returns once the transfers are complete; otherwise they overlap what
  // comes next.
  struct SliceEnd {
    MoveOutcome moved;
    uint64_t working_set = 0;  // bytes of the working set kept for the next turn
  };
  SliceEnd EndSlice(uint64_t completed, uint64_t evict_bytes, bool wait, DeviceOps& ops);
  // The job's turn starts: the future beyond its own operations is unknown
  // again, and with `load` the last slice's working set comes back in access
  // order, waited for. Other jobs ran meanwhile and the driver may have
  // evicted any of it, so all of it is asked for (a prefetch of resident
  // pages moves nothing). `loaded` counts only what it did not hold by its
  // own account (what it asked for less what it held; at least what crossed
  // the link unless the driver evicted more), so that the coordinator,
  // which times the load, does not take a load of resident pages, done in
  // microseconds, for a link of terabytes a second.
  MoveOutcome StartSlice(bool load, DeviceOps& ops);
  // Evicts down to the budget after it shrank.
  MoveOutcome FitBudget(DeviceOps& ops);
  // Takes all read-mostly advice back for good (MemoryManager::ForgoReadMostly).
  MoveOutcome ForgoReadMostly(DeviceOps& ops);

  // Carries out a plan of the manager's: read-mostly advice, then evictions
  // (ordered after the last queued operation that used a victim, when it
  // may not have run yet) and loads in access order (after earlier plans'
  // evictions; beside this plan's), then `stream` waits for the loads. A
  // transfer that fails is undone in the manager's view, and the first
  // error is returned; the operation itself goes on (missing data faults in).
  Status Execute(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, MovedBytes* moved = nullptr);
  // The device memory the budget leaves free: what a plan may load before
  // its evictions have made room.
  uint64_t Headroom() const { return budget_.device > budget_.Total() ? budget_.device - budget_.Total() : 0; }
  // Notes that evicting `bytes` held the caller `held_ns`, and prices
  // victims (ResidencyPlanner::kDropPreference) once the evictions so far,
  // kMinEvictionSample of them at least, held it as long as their bytes
  // take at kFastLinkBytesPerNs: then a copy back costs the program (on
  // driver 580 a prefetch to the host returns only once its copy is done,
  // and an H200 copies at 4.9-11.9 GB/s), and a duplicate dropped instead
  // saves it. Where evictions are queued and overlap (the paper's testbed),
  // victims go by next use alone.
  void NoteEvictionTime(uint64_t bytes, uint64_t held_ns);
  static constexpr uint64_t kFastLinkBytesPerNs = 100;  // 100 GB/s
  static constexpr uint64_t kMinEvictionSample = 64ull << 20;

 private:
  // While the job's memory fills its budget, a later plan may evict what an
  // operation uses now, and that eviction waits at the first mark in the
  // launch stream's queue after the operation (DeviceOps::EvictionsAfter).
  // Plans that move memory mark their own operation; with nothing else
  // marked, a victim last used by an operation that needed no plan waits
  // for the next plan that did: in a training step's backward pass, for
  // every layer that forward left resident, while the link stands idle
  // (E-train 150%: 606 ms a step, 516 ms with every operation marked).
  // So once a plan has evicted, every operation is marked while the job
  // holds at least 7/8 of its budget; a job that fits never pays the event.
  bool UnderPressure() const {
    return evicted_ && manager_.resident_bytes() >= manager_.budget() - manager_.budget() / 8;
  }
  void ApplyBudget() { manager_.set_budget(budget_.Managed()); }
  void CountPinned() {
    budget_.pinned = shared_ + vmm_.device_bytes();
    ApplyBudget();
  }
  MoveOutcome Carry(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, bool wait);
  MoveOutcome Evict(uint64_t bytes, DeviceOps& ops);
  MoveOutcome EvictAll(DeviceOps& ops, bool wait);

  JobBudget budget_;
  uint64_t shared_ = 0;  // AddShared's memory, of budget_.pinned
  VmmMemory vmm_;
  MemoryManager manager_{0};
  std::vector<ByteRange> last_working_set_;             // the last slice's, in first-use order
  bool evicted_ = false;                                // a plan of the manager's has evicted (UnderPressure)
  uint64_t eviction_bytes_ = 0, eviction_held_ns_ = 0;  // NoteEvictionTime's totals
};

}  // namespace msched

// JobMemory: the job side's memory policy, free of any driver. It is the one
// owner of the job's HBM budget (what was configured, what the device
// reports, what the coordinator granted, and what msched cannot move, each
// an explicit field) and of the memory manager that plans within it, and the
// one way the job's memory moves: MakeResident for what an operation will
// touch, Reload for the working set a returning slice needs, Evict and
// FitBudget for what a stop or a smaller grant gives back. Every move goes
// through DeviceOps (the driver in the hook, a fake in tests) and one
// executor, and only bytes that really moved are counted. What launches
// touch counts as held from then on, whether msched loaded it or the launch
// faults it in, and the next launch planned evicts down to the budget.
// Externally synchronized (the hook holds its Runtime lock). Used by hook/.
#pragma once

#include <cstdint>
#include <vector>

#include "model/device_ops.h"
#include "model/memory_manager.h"
#include "msched/config.h"
#include "msched/status.h"
#include "model/template_eval.h"

namespace msched {

struct JobBudget {
  uint64_t configured = 0;  // MSCHED_GPU_MEMORY; 0: not set
  uint64_t device = 0;      // the device's memory as its driver reports it; 0: not asked yet
  uint64_t granted = 0;     // the coordinator's grant while it coordinates the job; 0: none
  uint64_t pinned = 0;      // memory msched cannot move (VMM, IPC): it counts against the total

  // What the job may hold in HBM: the grant, else the configured size, else
  // the device's memory; 0 while none is known (nothing can be planned).
  uint64_t Total() const { return granted ? granted : configured ? configured : device; }
  // What the memory manager may fill.
  uint64_t Managed() const { return Total() > pinned ? Total() - pinned : 0; }
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
  void AddPinned(int64_t delta);

  MemoryManager& manager() { return manager_; }
  const MemoryManager& manager() const { return manager_; }

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
  // Brings `ranges` (the last slice's working set) back in order and waits
  // for them. Other jobs ran meanwhile and the driver may have evicted any of
  // it, so all of it is asked for (a prefetch of resident pages moves nothing).
  MoveOutcome Reload(const std::vector<ByteRange>& ranges, DeviceOps& ops);
  // Gives back `bytes` (UINT64_MAX: everything), what is needed furthest in
  // the future first; does not wait (the transfers overlap what comes next).
  MoveOutcome Evict(uint64_t bytes, DeviceOps& ops);
  // Gives back everything the job may hold on the device, predicted or not:
  // every managed allocation in one pass (read-mostly duplicates dropped,
  // then their advice taken off and what the driver kept moved out too), and
  // waits for the transfers when `wait`. `evicted` counts what the manager
  // knew to be resident.
  MoveOutcome EvictAll(DeviceOps& ops, bool wait);
  // Evicts down to the budget after it shrank.
  MoveOutcome FitBudget(DeviceOps& ops);
  // Takes all read-mostly advice back for good (MemoryManager::ForgoReadMostly).
  MoveOutcome ForgoReadMostly(DeviceOps& ops);

 private:
  void ApplyBudget() { manager_.set_budget(budget_.Managed()); }
  MoveOutcome Carry(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, bool wait);

  JobBudget budget_;
  MemoryManager manager_{0};
};

}  // namespace msched

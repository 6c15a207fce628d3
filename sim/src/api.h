// Helpers shared by the simulator's driver-API files (driver_*.cc): the one
// guard every entry point runs through, and declarations of the per-thread
// stream variants that cuda.h only declares under per-thread builds.
// Used by sim/ only.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <new>
#include <type_traits>

#include "fault_injection.h"
#include "process.h"

// cuda.h renames these base names to their newest ABI (cuMemAdvise ->
// cuMemAdvise_v2). The simulator exports the older ABIs under their plain
// names too, as the real driver does, so the renaming is undone here.
#undef cuDeviceGetUuid
#undef cuEventElapsedTime
#undef cuMemPrefetchAsync
#undef cuMemAdvise
#undef cuGetProcAddress

#define MSIM_EXPORT extern "C" __attribute__((visibility("default")))

// Declares `name` with the exact type of the PFN typedef, so a definition
// with a wrong signature fails to compile.
#define MSIM_DECLARE(name, pfn) MSIM_EXPORT std::remove_pointer_t<pfn> name

namespace msim {

enum class NeedCtx { kNo, kYes };

// REQUIRES: p.mu.
bool ValidContext(Process& p);

// Marks a driver call in progress for the lockstep between processes
// sharing the device: waits for its turn on entry, publishes the clock on exit.
class CallScope {
 public:
  explicit CallScope(Process& p) : p_(p) {
    const uint64_t t = p_.now_relaxed();
    p_.dev->EnterCall(t);
    p_.dev->WaitForTurn(t);
  }
  ~CallScope() {
    p_.NoteCallEnd(p_.now_relaxed());
    p_.dev->LeaveCall(p_.now_relaxed());
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  Process& p_;
};

// Runs `body(Process&)` with the process lock held, after checking that the
// driver is initialised (and that a context is current when asked), and
// charging the call's host time. No exception leaves it. `entry` is the
// entry point being served, for fault injection (MSIM_FAIL), which comes
// first so that a failed call has no effect: it defaults to the calling
// function's name, so a helper shared by several entry points takes
// `const char* entry = __builtin_FUNCTION()` itself and passes it on.
template <typename F>
CUresult Call(NeedCtx need, F&& body, const char* entry = __builtin_FUNCTION()) noexcept {
  if (const int injected = InjectedFault(entry)) return static_cast<CUresult>(injected);
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CallScope scope(*p);
  try {
    std::lock_guard<std::mutex> lock(p->mu);
    if (need == NeedCtx::kYes && !ValidContext(*p)) return CUDA_ERROR_INVALID_CONTEXT;
    p->Advance(UsToNs(p->dev->profile().api_call_us));
    return body(*p);
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

// Shared by the allocation files (driver_memory.cc, driver_vmm.cc).
// Maps `size` bytes of host memory (read-write, reserved lazily) at an
// address aligned to `align` (a multiple of 2 MiB), so chunks never straddle
// allocations, right after the previous mapping when that space is free: the
// driver packs allocations next to each other too, and programs (and msched)
// must cope with neighbours that touch (one prefetch may not span two).
// Returns the address, 0 when out of address space; *map_size is `size`
// rounded up to 2 MiB.
uint64_t MapAligned(uint64_t size, uint64_t* map_size, uint64_t align = kChunk);
// REQUIRES: p.mu. Holds `bytes` of HBM on the shared device for memory that
// never pages, evicting managed memory (the clock moves to when it is gone)
// or reclaiming dead processes' memory when it does not fit. False when it
// cannot fit.
bool ReserveHbm(Process& p, uint64_t bytes);
// The device's default memory pool (cuDeviceGetDefaultMemPool); handles are
// never dereferenced. Shared by driver_memory.cc and driver_export.cc.
inline CUmemoryPool DefaultPool() { return reinterpret_cast<CUmemoryPool>(uintptr_t{0x6d506f6f6c}); }
// REQUIRES: p.mu. Whether `pool` names a pool of the process: the default
// one, or one cuMemPoolCreate made and no cuMemPoolDestroy ended.
inline bool KnownPool(const Process& p, CUmemoryPool pool) { return pool == DefaultPool() || p.pools.count(pool) != 0; }

// Shared by the launch, copy and graph entry points. REQUIRE: p.mu.
// Schedules a device-side operation touching `ranges` on the compute engine:
// waits for the stream, serves faults, then runs for compute_ns. False (and
// nothing scheduled) when a range leaves the process's allocations.
bool DeviceOp(Process& p, Stream* s, const std::string& name, const std::vector<TouchedRange>& ranges,
              uint64_t compute_ns);
// Runs a kernel on stream `s` (start, faults, compute, host implementation).
CUresult RunKernel(Process& p, Stream* s, const KernelDecl* k, void* const* params, const msimLaunchInfo& dims);
// Records the touched ranges of the calling thread's last device operation.
void SetLastAccesses(const std::vector<TouchedRange>& ranges);
// What cuGetProcAddress returns for msched's device environment
// (msched/device_env.h): its MschedDeviceEnvFn (device_env_export.cc).
void* DeviceEnvEntry();

}  // namespace msim

// Profile mode (MSCHED_MODE=profile, set by msched-profile): every
// allocation msched records and every kernel launch, with its identity,
// argument bytes, launch configuration, latency and the memory it touched,
// go to the trace at MSCHED_PROFILE_TRACE (format: src/profile/trace.h), one line
// each, written as it happens so that a crash loses nothing before it.
//
// Where the touched memory comes from, chosen once when the trace opens:
//   - a driver that reports each launch's accesses (the simulator, through
//     the device environment, device_env.h): exact bytes;
//   - else CUPTI unified-memory records (cupti_faults.h): launches are
//     serialised, managed memory is moved to the host before each launch so
//     that its first touches fault, and the faults and migrations between
//     the launch and its completion are the kernel's (64 KiB precision).
// With neither, the trace says why and launches are recorded without
// touched memory (msched-profile then reports the reason).
// Launches are serialised and synchronised: profiling is slow by design.
// Thread-safe. Used by hook/ only.
#pragma once

#include <cuda.h>

#include <functional>

#include "job/kernel_cache.h"
#include "job/runtime.h"
#include "model/kernel_args.h"
#include "msched/no_destructor.h"

namespace msched::hook {

class ProfileRecorder {
 public:
  // The process's recorder; nullptr unless in profile mode with a trace
  // path. The trace opens on the first event (the driver is loaded by then).
  static ProfileRecorder* Get(Runtime& rt);

  // Called with the Runtime's lock held (the allocation map's order is the
  // trace's order); the lock is not named here, as these take no Runtime.
  void Alloc(uint64_t base, uint64_t size);
  void Free(uint64_t base);

  // Runs `launch` (the real driver call) and records it. Never holds the
  // Runtime's lock while the launch runs.
  CUresult Launch(Runtime& rt, const KernelInfo& kernel, const ArgView& args, const LaunchDims& dims,
                  const std::function<CUresult()>& launch);

 private:
  friend class NoDestructor<ProfileRecorder>;  // Get's one recorder
  struct State;
  explicit ProfileRecorder(State* s) : s_(s) {}
  State* const s_;
};

}  // namespace msched::hook

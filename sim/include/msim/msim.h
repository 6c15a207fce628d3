/* File: msim/msim.h
 * Entry points that only the simulated driver exports, beside the CUDA
 * driver API: the virtual clock, the accesses of the last launch (for the
 * profiler), and registration of kernels with host implementations. Tools
 * find them with dlsym on the driver handle; on a real driver they are
 * absent. Thread-safe. For tools, tests and benchmarks; msched's hook reads
 * them only through dlsym.
 */
#ifndef MSIM_MSIM_H_
#define MSIM_MSIM_H_

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest a kernel runs on the virtual clock: an hour. A modelled
 * kernel's time is cut there, and a replayed duration beyond it is refused,
 * so no launch can wrap the clock or carry it years ahead. */
#define MSIM_MAX_KERNEL_NS 3600000000000ull

/* The calling process's current virtual time, in nanoseconds. */
CUresult msimGetTime(uint64_t* now_ns);
/* The latest virtual time any process sharing the device has reached. */
CUresult msimDeviceTime(uint64_t* now_ns);
/* For a coordinator (mschedd) rather than a job: the shared device that
 * stands for machine GPU `machine_gpu` (MSIM_DEVICE, with ".gpu<N>" on a node
 * of several GPUs; created as a job would create it if it does not exist),
 * observed without taking part in it: no process slot, no lockstep, no
 * cuInit needed. Its HBM capacity, and the latest virtual time any process
 * sharing it has reached. CUDA_ERROR_NOT_FOUND when MSIM_DEVICE is unset
 * (each process then has a private device nobody else sees); one GPU per
 * observing process. */
CUresult msimObserveDevice(int machine_gpu, uint64_t* hbm_bytes, uint64_t* now_ns);

/* Declares that this process waited (for a coordinator's turn, say) until
 * virtual time t: its clock moves to t if it is behind. */
CUresult msimAdvanceTo(uint64_t t_ns);

/* A timer in virtual time for an interposer that acts when the process has
 * been idle for a while, as a timer thread would on a real GPU. Arms
 * (idle_ns > 0) or disarms (0) this process's idle alarm: when
 * msimAdvanceTo is about to carry the clock past the point where the
 * process has been idle for idle_ns (no driver call in progress, none
 * returned and no queued work completed in that time), the clock stops
 * there, `fn` runs on the calling thread with no simulator lock held (it may
 * call the driver, which starts a new idle period), and the advance then
 * goes on. It fires again every idle_ns while the process stays idle (a
 * timer thread looks again, too: what `fn` found may have changed since,
 * through another process), never from within `fn`. */
typedef void (*msimIdleAlarmFn)(void);
CUresult msimSetIdleAlarm(uint64_t idle_ns, msimIdleAlarmFn fn);

/* Declares that the calling process is (1) or is no longer (0) blocked on
 * something outside the simulator, such as a coordinator's turn. Processes
 * sharing a device advance in virtual-time order; a blocked one must not
 * hold the others back. On unblocking, call msimAdvanceTo with the time the
 * wait ended. `wakeups_seen` counts the messages that may end such a wait
 * that the process had received when it blocked: a peer that knows how many
 * were sent to it (msimPeerBlocked) can tell that one is on its way. */
CUresult msimSetBlocked(int blocked, uint64_t wakeups_seen);
/* Waits, as a driver call does on entry, until every other process sharing
 * the device has reached the calling process's virtual time (ties in
 * MSIM_RANK order), without making a call: no time passes. For an
 * interposer that reads or changes state outside the simulator that other
 * processes share (a coordinator's gates, its registrations), so that it
 * does so in virtual-time order, as on a real GPU in real time. */
CUresult msimWaitForTurn(void);
/* Whether process `pid`, attached to the same device, is blocked (*blocked
 * 1, with *wakeups_seen its count then), or not or not attached (0). A
 * process woken together with others waits, holding its place on the
 * clock, until those it knows to be woken have unblocked: otherwise it
 * would run on past their wake-up time by as much as the host's timing
 * allowed. */
CUresult msimPeerBlocked(int pid, int* blocked, uint64_t* wakeups_seen);

/* One byte range a launch touched (exact, not page-aligned): one per access
 * the kernel's declaration lists (one per piece of a strided access, one per
 * page of a gather). mode: 1 read, 2 write, 3 both. */
typedef struct msimRange {
  uint64_t begin;
  uint64_t end;
  uint32_t mode;
  uint32_t reserved;
} msimRange;

/* The ranges the calling thread's most recent kernel launch (or memset or
 * device-to-device copy) touched, exact to the byte, in access order.
 * *count receives the total; at most `capacity` are written. */
CUresult msimLastLaunchAccesses(msimRange* out, size_t capacity, size_t* count);

/* Replaying a recorded launch (msim-run --replay): the calling thread's
 * next launch of `f` touches exactly `ranges` (copied; `count` may be 0),
 * in place of the accesses its declaration lists, and computes for
 * `compute_ns`, or, with 0, for the device's kernel launch time plus the
 * touched bytes at its HBM bandwidth (the declaration's cost is not used).
 * A launch of another function leaves it pending; a second call replaces
 * it. A `compute_ns` past MSIM_MAX_KERNEL_NS is refused
 * (CUDA_ERROR_INVALID_VALUE). */
CUresult msimSetNextLaunch(CUfunction f, const msimRange* ranges, size_t count, uint64_t compute_ns);

/* A host implementation computes a kernel's results on the data (device
 * memory is host memory in the simulator). params[i] points to parameter i,
 * as in cuLaunchKernel's kernelParams. */
typedef struct msimLaunchInfo {
  unsigned int grid[3];
  unsigned int block[3];
} msimLaunchInfo;
typedef void (*msimHostKernel)(void* const* params, const msimLaunchInfo* info);

/* Makes `fn` the implementation named `impl` that module files can bind to
 * with "host": "<impl>". Registering an existing name replaces it. */
CUresult msimRegisterHostKernel(const char* impl, msimHostKernel fn);

/* Counters of the modelled device for this process, as JSON (the same text
 * MSIM_STATS writes at exit). *size receives the length including the NUL;
 * at most `capacity` bytes are written. */
CUresult msimStatsJson(char* out, size_t capacity, size_t* size);

/* The bytes of this process's managed memory resident in HBM now, as the
 * modelled driver counts them (whatever placed them: prefetches, faults). */
CUresult msimResidentBytes(uint64_t* bytes);

/* How many times this process has called driver entry point `name` so far,
 * all ABI versions and per-thread variants together ("cuMemAlloc" counts
 * cuMemAlloc_v2 too), counted as MSIM_FAIL counts them: a test reads it
 * just before a call to learn which call number MSIM_FAIL should fail.
 * CUDA_ERROR_NOT_FOUND when `name` is not a driver entry point. */
CUresult msimCallCount(const char* name, uint64_t* count);

#ifdef __cplusplus
}
#endif

#endif /* MSIM_MSIM_H_ */

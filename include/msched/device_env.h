/* File: msched/device_env.h
 * The seam between msched's hook and what only a driver that is not a
 * GPU's (the simulator in sim/) does, in LevelDB's manner of an Env: a
 * virtual clock shared by the processes on one device, the lockstep that
 * keeps their runs repeatable, and exact counts that a GPU cannot give (the
 * bytes a launch touched, faults, residency).
 *
 * Such a driver answers cuGetProcAddress(MSCHED_DEVICE_ENV_SYMBOL, ...) with
 * a function of type MschedDeviceEnvFn, which returns its table; a GPU's
 * driver knows no such symbol, and the hook then uses its plain environment
 * (CLOCK_MONOTONIC, no lockstep). The hook asks once, when it starts
 * (hook/src/job/device_env.h); nothing else of the driver's identity is looked
 * at. A C interface: the hook and the driver are built apart and meet only
 * here. Every function is thread-safe and returns CUDA_SUCCESS or an error;
 * none may be null.
 */
#ifndef MSCHED_DEVICE_ENV_H_
#define MSCHED_DEVICE_ENV_H_

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MSCHED_DEVICE_ENV_SYMBOL "mschedDeviceEnv"

/* One byte range a launch touched, exact: mode 1 read, 2 write, 3 both. */
typedef struct MschedAccessRange {
  uint64_t begin;
  uint64_t end;
  uint32_t mode;
  uint32_t reserved;
} MschedAccessRange;

typedef struct MschedDeviceEnv {
  /* sizeof(MschedDeviceEnv) as the driver was built: the table grows only
   * by appending members, and a reader uses none past `size`. */
  size_t size;
  /* The calling process's clock, in nanoseconds: virtual time. */
  CUresult (*now)(uint64_t* now_ns);
  /* The process waited (for a coordinator's turn) until t: its clock moves
   * there if it is behind, firing the idle alarm on the way. */
  CUresult (*advance_to)(uint64_t t_ns);
  /* Runs fn on the thread that carries the clock past idle_ns of the
   * process's idleness (0 disarms): a timer thread in virtual time. */
  CUresult (*set_idle_alarm)(uint64_t idle_ns, void (*fn)(void));
  /* The process blocks (1) on something outside the driver, or no longer
   * does (0), having received `wakeups_seen` messages that may end it. */
  CUresult (*set_blocked)(int blocked, uint64_t wakeups_seen);
  /* Returns once every other process on the device has reached this one's
   * time: what the caller reads or says next happens in time order. */
  CUresult (*wait_for_turn)(void);
  /* Whether process `pid` on the same device is blocked, and what it had
   * seen then. */
  CUresult (*peer_blocked)(int pid, int* blocked, uint64_t* wakeups_seen);
  /* The ranges the calling thread's last launch touched; *count receives
   * the total, at most `capacity` are written. */
  CUresult (*last_launch_accesses)(MschedAccessRange* out, size_t capacity, size_t* count);
  /* Page faults the process has taken so far. */
  CUresult (*faults)(uint64_t* count);
  /* The process's managed bytes resident in device memory now. */
  CUresult (*resident_bytes)(uint64_t* bytes);
} MschedDeviceEnv;

typedef const MschedDeviceEnv* (*MschedDeviceEnvFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* MSCHED_DEVICE_ENV_H_ */

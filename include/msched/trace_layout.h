// File: msched/trace_layout.h
// Where msched's timeline puts things, shared by the programs that write
// parts of it (mschedd, libmsched, msched bench) and those that read it
// (the bench report's Gantt plot, tests), so that files written apart merge
// into one timeline. Chrome trace events name a process (pid) and a thread
// (tid); msched uses:
//   - pid kGpuPid: the GPU, with one track per direction of the link;
//   - pid = the job's process id: the coordinator's view of the job (track
//     kJobStateTid), the job's own (kJobLaunchesTid, kJobMemoryTid, and
//     counters, which Perfetto draws per process), and, on the simulator,
//     what the device did for it (kSim*Tid).
// Times are the device clock (docs/tracing.md). Constants only.
#pragma once

#include <cstdint>

namespace msched::trace {

inline constexpr int64_t kGpuPid = int64_t{1} << 30;  // above any Linux pid (pid_max is at most 2^22)
inline constexpr int64_t kLinkToDeviceTid = 1;        // swap-ins
inline constexpr int64_t kLinkToHostTid = 2;          // swap-outs

inline constexpr int64_t kJobStateTid = 1;     // written by mschedd (or by msched bench for runs without one)
inline constexpr int64_t kJobLaunchesTid = 2;  // written by the job
inline constexpr int64_t kJobMemoryTid = 3;    // written by the job
// The simulated device's own tracks for the job (MSIM_TRACE, docs/simulator.md).
inline constexpr int64_t kSimComputeTid = 4;   // its kernels, device-side copies and memsets
inline constexpr int64_t kSimToDeviceTid = 5;  // its transfers to the device
inline constexpr int64_t kSimToHostTid = 6;    // its transfers to the host
inline constexpr int64_t kSimFaultsTid = 7;    // the fault batches that stalled its kernels

// The names of the state spans on kJobStateTid.
inline constexpr const char* kRunning = "running";
inline constexpr const char* kWaitingAdmission = "waiting for admission";
inline constexpr const char* kWaitingTurn = "waiting for its turn";
inline constexpr const char* kIdle = "idle";  // gave its turn up for want of work (mschedd --idle-yield)
inline constexpr const char* kDraining = "draining";
inline constexpr const char* kPaused = "paused";

// The category of the link spans (on kGpuPid) and of the job's own moves.
inline constexpr const char* kSwapCategory = "swap";

}  // namespace msched::trace

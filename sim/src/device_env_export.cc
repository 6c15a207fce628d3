// The simulator's side of msched's device environment (msched/device_env.h):
// the table its cuGetProcAddress hands out for MSCHED_DEVICE_ENV_SYMBOL, so
// that msched's hook finds the virtual clock and the lockstep through the
// driver's own lookup, without knowing the simulator's entry points. Each
// member is the msim.h entry point of the same meaning.
#include <mutex>
#include <vector>

#include "api.h"
#include "msched/device_env.h"
#include "msim/msim.h"

namespace msim {
namespace {

CUresult LastLaunchAccesses(MschedAccessRange* out, size_t capacity, size_t* count) {
  if (count == nullptr || (out == nullptr && capacity > 0)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<msimRange> ranges(capacity);
  const CUresult r = msimLastLaunchAccesses(ranges.data(), capacity, count);
  if (r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < capacity && i < *count; ++i) out[i] = {ranges[i].begin, ranges[i].end, ranges[i].mode, 0};
  return CUDA_SUCCESS;
}

CUresult Faults(uint64_t* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Process* p = Process::Current();
  if (p == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(p->mu);
  *count = p->counters.faults;
  return CUDA_SUCCESS;
}

const MschedDeviceEnv* Table() {
  static const MschedDeviceEnv table = {
      sizeof(MschedDeviceEnv), msimGetTime,     msimAdvanceTo,      msimSetIdleAlarm, msimSetBlocked,
      msimWaitForTurn,         msimPeerBlocked, LastLaunchAccesses, Faults,           msimResidentBytes,
  };
  return &table;
}

}  // namespace

void* DeviceEnvEntry() { return reinterpret_cast<void*>(static_cast<MschedDeviceEnvFn>(Table)); }

}  // namespace msim

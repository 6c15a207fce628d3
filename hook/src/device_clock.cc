#include "device_clock.h"

#include <cuda.h>
#include <time.h>

#include "driver_functions.h"

namespace msched::hook {

uint64_t DeviceNow() {
  uint64_t t = 0;
  if (auto now = RealDriver().msimGetTime; now != nullptr && now(&t) == CUDA_SUCCESS) return t;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool DeviceIsSimulated() { return RealDriver().msimGetTime != nullptr; }

void DeviceSetIdleAlarm(uint64_t idle_ns, void (*fn)()) {
  if (auto arm = RealDriver().msimSetIdleAlarm) arm(idle_ns, fn);
}

void DeviceSetBlocked(bool blocked, uint64_t wakeups_seen) {
  if (auto set = RealDriver().msimSetBlocked) set(blocked ? 1 : 0, wakeups_seen);
}

void DeviceWaitForTurn() {
  if (auto wait = RealDriver().msimWaitForTurn) wait();
}

bool DevicePeerAboutToWake(int32_t pid, uint64_t wakeups_sent) {
  auto peer = RealDriver().msimPeerBlocked;
  int blocked = 0;
  uint64_t seen = 0;
  return peer != nullptr && peer(pid, &blocked, &seen) == CUDA_SUCCESS && blocked != 0 && wakeups_sent > seen;
}

void DeviceAdvanceTo(uint64_t t) {
  if (auto advance = RealDriver().msimAdvanceTo) advance(t);
}

}  // namespace msched::hook

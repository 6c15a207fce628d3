#include "device_clock.h"

#include <cuda.h>
#include <time.h>

#include "real_driver.h"

namespace msched::hook {
namespace {

struct SimClock {
  CUresult (*now)(uint64_t*) = nullptr;
  CUresult (*blocked)(int) = nullptr;
  CUresult (*advance)(uint64_t) = nullptr;
};

const SimClock& Sim() {
  static const SimClock sim = [] {
    SimClock s;
    s.now = reinterpret_cast<CUresult (*)(uint64_t*)>(RealSymbol("msimGetTime"));
    s.blocked = reinterpret_cast<CUresult (*)(int)>(RealSymbol("msimSetBlocked"));
    s.advance = reinterpret_cast<CUresult (*)(uint64_t)>(RealSymbol("msimAdvanceTo"));
    return s;
  }();
  return sim;
}

}  // namespace

uint64_t DeviceNow() {
  uint64_t t = 0;
  if (Sim().now != nullptr && Sim().now(&t) == CUDA_SUCCESS) return t;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void DeviceSetBlocked(bool blocked) {
  if (Sim().blocked != nullptr) Sim().blocked(blocked ? 1 : 0);
}

void DeviceAdvanceTo(uint64_t t) {
  if (Sim().advance != nullptr) Sim().advance(t);
}

}  // namespace msched::hook

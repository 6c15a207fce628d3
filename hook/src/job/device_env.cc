#include "job/device_env.h"

#include <cuda.h>
#include <time.h>

#include "interpose/driver_functions.h"
#include "msched/device_env.h"
#include "msched/no_destructor.h"

namespace msched::hook {
namespace {

// A GPU's: the monotonic clock, no lockstep, nothing counted by the driver.
class PlainEnv final : public DeviceEnv {
 public:
  bool lockstep() const override { return false; }
  uint64_t Now() override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  void AdvanceTo(uint64_t) override {}
  void SetIdleAlarm(uint64_t, void (*)()) override {}
  void SetBlocked(bool, uint64_t) override {}
  void WaitForTurn() override {}
  bool PeerAboutToWake(int32_t, uint64_t) override { return false; }
  std::optional<std::vector<TouchedRange>> LastLaunchAccesses() override { return std::nullopt; }
  std::optional<uint64_t> Faults() override { return std::nullopt; }
  std::optional<uint64_t> ResidentBytes() override { return std::nullopt; }
};

// Over the table a driver offered (the simulator's). The table's calls fail
// only before the driver is initialised: the clock then reads 0, as the
// process's virtual time does at its start.
class DriverEnv final : public DeviceEnv {
 public:
  explicit DriverEnv(const MschedDeviceEnv& t) : t_(t) {}
  bool lockstep() const override { return true; }
  uint64_t Now() override {
    uint64_t t = 0;
    return t_.now(&t) == CUDA_SUCCESS ? t : 0;
  }
  void AdvanceTo(uint64_t t) override { t_.advance_to(t); }
  void SetIdleAlarm(uint64_t idle_ns, void (*fn)()) override { t_.set_idle_alarm(idle_ns, fn); }
  void SetBlocked(bool blocked, uint64_t wakeups_seen) override { t_.set_blocked(blocked ? 1 : 0, wakeups_seen); }
  void WaitForTurn() override { t_.wait_for_turn(); }
  bool PeerAboutToWake(int32_t pid, uint64_t wakeups_sent) override {
    int blocked = 0;
    uint64_t seen = 0;
    return t_.peer_blocked(pid, &blocked, &seen) == CUDA_SUCCESS && blocked != 0 && wakeups_sent > seen;
  }
  std::optional<std::vector<TouchedRange>> LastLaunchAccesses() override {
    std::vector<MschedAccessRange> ranges(256);
    size_t count = 0;
    if (t_.last_launch_accesses(ranges.data(), ranges.size(), &count) != CUDA_SUCCESS)
      return std::vector<TouchedRange>{};
    if (count > ranges.size()) {
      ranges.resize(count);
      if (t_.last_launch_accesses(ranges.data(), ranges.size(), &count) != CUDA_SUCCESS)
        return std::vector<TouchedRange>{};
    }
    ranges.resize(std::min(count, ranges.size()));
    std::vector<TouchedRange> touched;
    touched.reserve(ranges.size());
    for (const MschedAccessRange& x : ranges) touched.push_back({{x.begin, x.end}, static_cast<AccessMode>(x.mode)});
    return touched;
  }
  std::optional<uint64_t> Faults() override {
    uint64_t n = 0;
    return t_.faults(&n) == CUDA_SUCCESS ? std::optional<uint64_t>(n) : std::nullopt;
  }
  std::optional<uint64_t> ResidentBytes() override {
    uint64_t bytes = 0;
    return t_.resident_bytes(&bytes) == CUDA_SUCCESS ? std::optional<uint64_t>(bytes) : std::nullopt;
  }

 private:
  const MschedDeviceEnv& t_;
};

// The driver's table, if it offers a whole one (every member this hook
// knows of); else null.
const MschedDeviceEnv* OfferedTable() {
  auto lookup = RealDriver().cuGetProcAddress_v2;
  if (lookup == nullptr) return nullptr;
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (lookup(MSCHED_DEVICE_ENV_SYMBOL, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS || fn == nullptr) {
    return nullptr;
  }
  const MschedDeviceEnv* t = reinterpret_cast<MschedDeviceEnvFn>(fn)();
  return t != nullptr && t->size >= sizeof(MschedDeviceEnv) ? t : nullptr;
}

}  // namespace

DeviceEnv& DeviceEnv::Get() {
  // Never destroyed: calls made during exit still find it.
  static const MschedDeviceEnv* const table = OfferedTable();
  if (table == nullptr) {
    static NoDestructor<PlainEnv> plain;
    return *plain.get();
  }
  static NoDestructor<DriverEnv> offered(*table);
  return *offered.get();
}

}  // namespace msched::hook

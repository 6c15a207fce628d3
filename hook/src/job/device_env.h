// The device environment: the clock the coordinator schedules by, and what
// only a simulated driver does (its lockstep between the processes sharing
// a device, its idle alarm, exact counts of accesses, faults and
// residency), behind one interface, in LevelDB's manner of an Env. Chosen
// once, at its first use, through the driver's own lookup
// (cuGetProcAddress, msched/device_env.h): a driver that offers a table gets an
// environment over it; a GPU's driver, which offers none, gets the plain
// one, whose clock is CLOCK_MONOTONIC and whose lockstep calls do nothing,
// so no caller asks which driver it has. Thread-safe; never destroyed.
// Used by hook/ only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "profile/trace.h"

namespace msched::hook {

class DeviceEnv {
 public:
  // The environment of the loaded driver.
  static DeviceEnv& Get();

  virtual ~DeviceEnv() = default;

  // Whether processes sharing the device advance in lockstep on a virtual
  // clock that only the driver's calls move (the simulator): then the
  // calls below matter; on a GPU they do nothing.
  virtual bool lockstep() const = 0;
  // The process's clock, in nanoseconds.
  virtual uint64_t Now() = 0;
  // The process waited until device time `t`: its clock moves there.
  virtual void AdvanceTo(uint64_t t) = 0;
  // `fn` runs on the thread that moves the process's clock past `idle_ns`
  // of idleness, as a timer thread would in real time; 0 disarms it.
  virtual void SetIdleAlarm(uint64_t idle_ns, void (*fn)()) = 0;
  // The process waits (true) or no longer waits (false) for something
  // outside the device: the others sharing it must not wait for it.
  // `wakeups_seen`: the coordinator's orders it had received then.
  virtual void SetBlocked(bool blocked, uint64_t wakeups_seen) = 0;
  // Returns once every other process sharing the device has reached this
  // one's time, so that what it reads or says to the coordinator next
  // happens in time order.
  virtual void WaitForTurn() = 0;
  // Process `pid` is blocked and has been sent more orders
  // (`wakeups_sent`) than it had seen when it blocked: it is about to wake.
  virtual bool PeerAboutToWake(int32_t pid, uint64_t wakeups_sent) = 0;
  // The exact ranges the calling thread's last launch touched, or nullopt
  // when the driver cannot say (a GPU: CUPTI's faults stand in).
  virtual std::optional<std::vector<TouchedRange>> LastLaunchAccesses() = 0;
  // Page faults the process has taken, or nullopt when the driver cannot say.
  virtual std::optional<uint64_t> Faults() = 0;
  // The process's managed bytes resident on the device, as the driver
  // counts them, or nullopt when it cannot say.
  virtual std::optional<uint64_t> ResidentBytes() = 0;
};

}  // namespace msched::hook

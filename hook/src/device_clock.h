// The device clock the coordinator schedules by: the simulated device's
// virtual time when the driver is the simulator (so that slices and waits
// are measured in the time the simulation models), CLOCK_MONOTONIC on a real
// GPU. Also the simulator's lockstep calls for a process that waits on the
// coordinator, and its idle alarm; no-ops on a real driver. Thread-safe.
// Used by hook/ only.
#pragma once

#include <cstdint>

namespace msched::hook {

uint64_t DeviceNow();
// The driver is the simulator: its clock is virtual, and only the
// simulator's own timers see it pass.
bool DeviceIsSimulated();
// Simulator only: `fn` runs on the thread that moves the process's clock
// past `idle_ns` of idleness (msimSetIdleAlarm); 0 disarms it.
void DeviceSetIdleAlarm(uint64_t idle_ns, void (*fn)());
// The process waits (true) or no longer waits (false) for something outside
// the device: other processes sharing the simulated device must not wait for
// it. `wakeups_seen`: the coordinator's orders it had received then.
void DeviceSetBlocked(bool blocked, uint64_t wakeups_seen);
// Simulator only: returns once every other process sharing the device has
// reached this one's virtual time, so that what it reads or says to the
// coordinator next happens in virtual-time order (msimWaitForTurn).
void DeviceWaitForTurn();
// Simulator only: process `pid` is blocked and has been sent more orders
// (`wakeups_sent`) than it had seen when it blocked, so it is about to wake.
bool DevicePeerAboutToWake(int32_t pid, uint64_t wakeups_sent);
// The wait ended at device time `t`: the process's clock moves there.
void DeviceAdvanceTo(uint64_t t);

}  // namespace msched::hook

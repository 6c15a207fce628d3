#include "job/machine_gpu_of_context.h"

#include <cstdlib>

#include "base/machine_gpu.h"
#include "interpose/driver_functions.h"

namespace msched::hook {

Result<int> MachineGpuOfCurrentContext() {
  const DriverFunctions& real = RealDriver();
  CUdevice device = 0;
  if (real.cuCtxGetDevice == nullptr || real.cuCtxGetDevice(&device) != CUDA_SUCCESS) {
    return Status::Unavailable("no context is current");
  }
  // "0000:41:00.0" plus its terminator; a driver that cannot say leaves the
  // bus id empty, and CUDA_VISIBLE_DEVICES decides.
  char bus_id[32] = {};
  if (real.cuDeviceGetPCIBusId == nullptr ||
      real.cuDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof bus_id), device) != CUDA_SUCCESS) {
    bus_id[0] = '\0';
  }
  return MachineGpuIndex(device, bus_id, std::getenv("CUDA_VISIBLE_DEVICES"));
}

}  // namespace msched::hook

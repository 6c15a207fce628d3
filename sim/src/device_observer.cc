// msimObserveDevice: a coordinator's own view of the simulated GPU its jobs
// share, so that it learns the GPU's size and clock from the device rather
// than from what any job says. The device is mapped once, without a process
// slot: the observer never takes part in the lockstep, and its reads never
// hold a job back.
#include <mutex>

#include "api.h"

namespace msim {
namespace {

struct Observed {
  std::mutex mu;
  int gpu = -1;
  SharedDevice* dev = nullptr;  // never unmapped: the view lasts the process's life
};

Observed& TheObserved() {
  static auto* o = new Observed();  // never destroyed: read during exit
  return *o;
}

}  // namespace
}  // namespace msim

MSIM_EXPORT CUresult msimObserveDevice(int machine_gpu, uint64_t* hbm_bytes, uint64_t* now_ns) {
  if (hbm_bytes == nullptr || now_ns == nullptr || machine_gpu < 0) return CUDA_ERROR_INVALID_VALUE;
  msim::Observed& o = msim::TheObserved();
  std::lock_guard<std::mutex> lock(o.mu);
  if (o.dev == nullptr) {
    const std::string name = msim::SharedDeviceName(machine_gpu);
    if (name.empty()) return CUDA_ERROR_NOT_FOUND;  // private devices: nothing shared to observe
    msim::DeviceProfile profile;
    std::string error;
    if (!msim::LoadEnvironmentProfile(&profile, &error)) {
      msim::ReportError(error);
      return CUDA_ERROR_NO_DEVICE;
    }
    o.dev = msim::SharedDevice::Observe(name, profile, msim::EnvBytes("MSIM_HBM_BYTES"), &error);
    if (o.dev == nullptr) {
      msim::ReportError(error);
      return CUDA_ERROR_NO_DEVICE;
    }
    o.gpu = machine_gpu;
  } else if (o.gpu != machine_gpu) {
    return CUDA_ERROR_INVALID_VALUE;  // one device per observer
  }
  msim::DeviceLock dl(o.dev);
  *hbm_bytes = o.dev->capacity();
  *now_ns = o.dev->LatestTime();
  return CUDA_SUCCESS;
}

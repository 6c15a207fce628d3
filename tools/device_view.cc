#include "device_view.h"

#include <dlfcn.h>
#include <time.h>

#include <cstdlib>

namespace msched {
namespace {

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The simulated driver's observer (msim/msim.h); a real driver has none.
using ObserveFn = int (*)(int machine_gpu, uint64_t* hbm_bytes, uint64_t* now_ns);

bool ObserveSimulated(int machine_gpu, DeviceView* view) {
  const char* device = std::getenv("MSIM_DEVICE");
  if (device == nullptr || *device == '\0') return false;
  const char* driver = std::getenv("MSCHED_REAL_LIBCUDA");
  void* lib = dlopen(driver != nullptr && *driver != '\0' ? driver : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto observe = reinterpret_cast<ObserveFn>(dlsym(lib, "msimObserveDevice"));
  uint64_t hbm = 0, now = 0;
  if (observe == nullptr || observe(machine_gpu, &hbm, &now) != 0) {
    dlclose(lib);
    return false;
  }
  // The library stays loaded: the clock reads through it for the process's life.
  view->total_bytes = hbm;
  view->source = std::string("the simulated GPU '") + device + "'";
  view->clock = [observe, machine_gpu] {
    uint64_t bytes = 0, t = 0;
    return observe(machine_gpu, &bytes, &t) == 0 ? t : 0;
  };
  return true;
}

// NVML's ABI for the calls used here (nvml.h, which the CUDA toolkit does
// not always ship): NVML_SUCCESS is 0, a device handle is opaque, and
// nvmlMemory_t is three unsigned long longs, total first.
struct NvmlMemory {
  unsigned long long total, free, used;
};
using NvmlInitFn = int (*)();
using NvmlHandleFn = int (*)(unsigned int index, void** device);
using NvmlMemoryFn = int (*)(void* device, NvmlMemory* memory);
using NvmlShutdownFn = int (*)();

bool ObserveNvml(int machine_gpu, DeviceView* view) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto init = reinterpret_cast<NvmlInitFn>(dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<NvmlHandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto memory = reinterpret_cast<NvmlMemoryFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto shutdown = reinterpret_cast<NvmlShutdownFn>(dlsym(lib, "nvmlShutdown"));
  bool found = false;
  if (init != nullptr && handle != nullptr && memory != nullptr && shutdown != nullptr && init() == 0) {
    void* device = nullptr;
    NvmlMemory m{};
    if (handle(static_cast<unsigned int>(machine_gpu), &device) == 0 && memory(device, &m) == 0 && m.total > 0) {
      view->total_bytes = m.total;
      view->source = "NVML (GPU " + std::to_string(machine_gpu) + ")";
      found = true;
    }
    shutdown();
  }
  dlclose(lib);
  return found;
}

}  // namespace

DeviceView ObserveDevice(int machine_gpu) {
  DeviceView view;
  if (ObserveSimulated(machine_gpu, &view)) return view;
  view.clock = MonotonicNs;
  ObserveNvml(machine_gpu, &view);
  return view;
}

}  // namespace msched

// Which GPU of the machine a CUDA device is. CUDA numbers devices per
// process (CUDA_VISIBLE_DEVICES=2,3 makes the machine's GPU 2 device 0), but
// a coordinator serves one GPU of the machine, under the number nvidia-smi
// shows (the GPU's place in PCI bus order), which mschedd@<N> and, with the
// usual gres.conf, Slurm use too. A job on the machine's GPU N joins
// gpu<N>.sock.
// Plain functions of their inputs (the folder they read is named by the
// caller), so tests drive them without a driver. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msched/status.h"

namespace msched {

// Where the NVIDIA kernel module describes each GPU, by PCI bus id.
inline constexpr char kNvidiaProcGpus[] = "/proc/driver/nvidia/gpus";

// The highest machine GPU index the programs accept (--gpu N).
inline constexpr int kMaxGpuIndex = 1023;

// The machine's number for CUDA device `ordinal` of this process, whose PCI
// bus id (cuDeviceGetPCIBusId) is `pci_bus_id`:
//   1. its place, in bus id order, among the GPUs the NVIDIA module lists
//      in `proc_gpus` (one folder per bus id), where the module runs: the
//      order nvidia-smi numbers them in, in a container too, whose list
//      holds only its own GPUs;
//   2. else entry `ordinal` of `visible_devices` (CUDA_VISIBLE_DEVICES,
//      nullptr when unset), when the entries up to it are indices;
//   3. else, with no CUDA_VISIBLE_DEVICES, `ordinal` itself.
// NotFound when none applies (a GPU named by UUID, or fewer entries).
Result<int> MachineGpuIndex(int ordinal, std::string_view pci_bus_id, const char* visible_devices,
                            const std::string& proc_gpus = kNvidiaProcGpus);

// The simulator's number of GPUs on its node (docs/simulator.md).
inline constexpr char kSimulatedGpusVariable[] = "MSIM_GPUS";

// How many GPUs the machine has, as nvidia-smi counts them: a simulated
// node's, when `simulated_gpus` (MSIM_GPUS, docs/simulator.md) is a count,
// since the simulator is then the driver whatever GPUs the machine holds;
// else the GPUs the NVIDIA module lists in `proc_gpus`. nullopt when
// neither tells (no module files: no NVIDIA driver, or a container that
// hides them).
std::optional<int> MachineGpuCount(const char* simulated_gpus, const std::string& proc_gpus = kNvidiaProcGpus);

// The machine GPUs CUDA_VISIBLE_DEVICES gives a process, known by number
// without the driver. As the driver reads the list: its entries up to the
// first that is not the index of a GPU of the machine's `gpu_count` named
// for the first time (a UUID, a MIG instance, nothing, an index the machine
// has no GPU for, a repeat). With `gpu_count` unknown, any index counts.
// NotFound when the variable is unset.
Result<std::vector<int>> VisibleGpuIndices(const char* visible_devices, std::optional<int> gpu_count);

}  // namespace msched

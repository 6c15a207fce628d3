#include "base/machine_gpu.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "base/text.h"
#include "msched/config.h"

namespace msched {
namespace {

// A GPU index: a whole non-negative decimal number that fits an int, or -1.
int Index(std::string_view s) {
  const Result<int64_t> v = ParseInteger(s, 0, std::numeric_limits<int>::max());
  return v.ok() ? static_cast<int>(*v) : -1;
}

// The module names its folders "0000:41:00.0": a four-digit domain, lower
// case. CUDA gives the same form in upper case; NVML pads the domain to
// eight digits.
std::string ProcDirName(std::string_view bus_id) {
  std::string s = Lower(Trim(bus_id));
  const size_t colon = s.find(':');
  if (colon != std::string::npos && colon > 4 && s.find_first_not_of('0') >= colon - 4) s.erase(0, colon - 4);
  return s;
}

// The device's place among the module's GPUs in bus id order, or -1 when
// the module does not list it.
int PlaceInBusOrder(const std::string& proc_gpus, std::string_view bus_id) {
  if (bus_id.empty()) return -1;
  std::error_code ec;
  std::vector<std::string> listed;
  // The forms that report errors through `ec`: nothing here throws.
  for (std::filesystem::directory_iterator it(proc_gpus, ec), end; !ec && it != end; it.increment(ec)) {
    listed.push_back(ProcDirName(it->path().filename().string()));
  }
  std::sort(listed.begin(), listed.end());
  const auto it = std::find(listed.begin(), listed.end(), ProcDirName(bus_id));
  return it == listed.end() ? -1 : static_cast<int>(it - listed.begin());
}

// CUDA_VISIBLE_DEVICES's entries, trimmed; "" has one empty entry.
std::vector<std::string_view> Entries(std::string_view list) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t comma = list.find(',');
    out.push_back(Trim(list.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

}  // namespace

std::optional<int> MachineGpuCount(const char* simulated_gpus, const std::string& proc_gpus) {
  if (simulated_gpus != nullptr) {
    if (const int n = Index(simulated_gpus); n > 0) return n;
  }
  std::error_code ec;
  int listed = 0;
  for (std::filesystem::directory_iterator it(proc_gpus, ec), end; !ec && it != end; it.increment(ec)) ++listed;
  if (listed == 0) return std::nullopt;
  return listed;
}

Result<std::vector<int>> VisibleGpuIndices(const char* visible_devices, std::optional<int> gpu_count) {
  if (visible_devices == nullptr) return Status::NotFound("CUDA_VISIBLE_DEVICES is not set");
  std::vector<int> out;
  for (std::string_view entry : Entries(visible_devices)) {
    const int index = Index(entry);
    if (index < 0 || (gpu_count && index >= *gpu_count) || std::find(out.begin(), out.end(), index) != out.end()) {
      break;
    }
    out.push_back(index);
  }
  return out;
}

Result<int> MachineGpuIndex(int ordinal, std::string_view pci_bus_id, const char* visible_devices,
                            const std::string& proc_gpus) {
  if (const int place = PlaceInBusOrder(proc_gpus, pci_bus_id); place >= 0) return place;
  if (visible_devices == nullptr) return ordinal;
  // Entries past the ordinal do not matter: the driver stops reading the
  // list at the first it cannot use, and this device came before it.
  const std::vector<std::string_view> entries = Entries(visible_devices);
  for (size_t i = 0; i < entries.size(); ++i) {
    const int index = Index(entries[i]);
    if (index < 0) {
      return Status::NotFound("CUDA device " + std::to_string(ordinal) + " comes after CUDA_VISIBLE_DEVICES entry '" +
                              std::string(entries[i]) + "', which is not a GPU index, and " + proc_gpus +
                              " does not describe it");
    }
    if (static_cast<int>(i) == ordinal) return index;
  }
  return Status::NotFound("CUDA device " + std::to_string(ordinal) + " is beyond CUDA_VISIBLE_DEVICES='" +
                          std::string(visible_devices) + "'");
}

}  // namespace msched

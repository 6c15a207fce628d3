// DeviceProfile: the numbers of one modelled GPU (capacity, bandwidths,
// fault costs, compute rates), loaded from a JSON profile in
// templates/devices/. A plain value type (trivially copyable: it is stored in
// the shared device segment). Thread-compatible. Used by sim/ only.
#pragma once

#include <cstdint>
#include <string>

namespace msim {

struct DeviceProfile {
  char name[64] = {};         // profile name, e.g. "rtx5080-pcie5"
  char device_name[96] = {};  // what cuDeviceGetName reports
  uint64_t hbm_bytes = 0;
  double hbm_gbps = 0;  // device memory bandwidth, for kernel cost
  double tflops = 0;    // compute rate, for kernel cost
  double h2d_gbps = 0;  // copy engine, host to device: loading data the host holds
  double d2h_gbps = 0;  // copy engine, device to host: evicting data whose host pages exist
  // The other kinds of move (profile version 2, "link"; a version 1 profile
  // gets what they meant before: fills at hbm_gbps, every eviction at
  // d2h_gbps, faults' data at h2d_gbps, read duplicates and discards
  // dropped for nothing, the two directions fully overlapped).
  double first_touch_gbps = 0;           // populating never-written memory on the device (no transfer)
  double first_eviction_gbps = 0;        // evicting data the host has no pages for yet (its first time out)
  double fault_migration_gbps = 0;       // the data a fault batch brings in from the host
  double duplicate_drop_us = 0;          // dropping read duplicates: once per call that drops any...
  double duplicate_drop_us_per_gib = 0;  // ...and per GiB dropped
  double discard_gbps = 0;               // discarding resident data (cuMemDiscardBatchAsync); 0: at once
  double duplex_gbps = 0;                // both directions at once, in all; 0: each at its own rate
  double prefetch_move_us = 0;           // what a prefetch that moves any data adds to prefetch_call_us
  double batch_range_us = 0;             // what each range of a batched prefetch adds to the call's cost
  double collapse_us_per_page = 0;       // a GPU write collapsing a read duplicate: each 4 KiB page's fault
  double unset_duplicate_gbps = 0;       // unsetting read-mostly over duplicated data: the copies it drops
  // A prefetch to the host returns to its caller only when its copy is done:
  // nvidia-uvm's UVM_MIGRATE ioctl maps the CPU pages after the copy and
  // waits for it to do so (uvm_va_block.c, block_map_cpu_page_to). The
  // calling thread, not only the stream, waits.
  bool host_prefetch_waits = false;
  double fault_control_us = 0;       // control-plane round trip of one fault batch (one lone fault: one batch)
  double fault_min_transfer_us = 0;  // floor on one batch's data transfer
  uint32_t fault_batch_size = 256;   // fault entries (4 KiB pages) serviced per batch
  double prefetch_call_us = 0;       // device-side setup of one prefetch call
  double kernel_launch_us = 0;       // fixed device-side cost of a kernel
  double launch_api_us = 0;          // host cost of a launch call
  // Host cost of other driver calls. At least 1 ns: a process that polls
  // the driver must move its clock, or peers waiting their turn behind it
  // (SharedDevice::WaitForTurn) would wait for ever.
  double api_call_us = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
};

// Parses a profile; on failure returns false and says why in *error.
bool ParseDeviceProfile(const std::string& json_text, DeviceProfile* out, std::string* error);
// Loads `name_or_path`: a path when it contains '/', otherwise
// <dir>/<name>.json for dir in $MSIM_PROFILE_DIR, then the shipped directory.
bool LoadDeviceProfile(const std::string& name_or_path, DeviceProfile* out, std::string* error);

// Nanoseconds to move `bytes` at `gbps` (10^9 bytes per second).
inline uint64_t TransferNs(uint64_t bytes, double gbps) {
  return gbps <= 0 ? 0 : static_cast<uint64_t>(static_cast<double>(bytes) / gbps);
}
inline uint64_t UsToNs(double us) { return static_cast<uint64_t>(us * 1000.0); }

}  // namespace msim

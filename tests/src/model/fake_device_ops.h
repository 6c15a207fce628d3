// A DeviceOps for tests: records every call as a short line ("in 4": a load
// of the range that starts at 4 MiB, "out 0", "mark S N": operations below
// N queued on stream S, "after S N": evictions after operation N of S,
// "wait S", "sync",
// "loads after evictions",
// "read-mostly 4" / "not read-mostly 4": advice for the allocation at 4 MiB)
// and fails call number `fail_at` (counting from 1) when it is set. Its
// clock moves only by `ns_per_eviction` at each prefetch to the host.
// Confined to one thread.
#pragma once

#include <string>
#include <vector>

#include "model/device_ops.h"

namespace msched {

class FakeDeviceOps : public DeviceOps {
 public:
  Status Prefetch(const ByteRange& r, bool to_device) override {
    if (!to_device) now_ns += ns_per_eviction;
    return Record((to_device ? "in " : "out ") + std::to_string(r.begin >> 20));
  }
  Status MarkQueued(StreamHandle s, uint64_t next) override {
    return Record("mark " + std::to_string(s) + " " + std::to_string(next));
  }
  Status EvictionsAfter(StreamHandle s, uint64_t op) override {
    return Record("after " + std::to_string(s) + " " + std::to_string(op));
  }
  Status StreamAfterTransfers(StreamHandle s) override { return Record("wait " + std::to_string(s)); }
  Status LoadsAfterEvictions() override { return Record("loads after evictions"); }
  Status SynchronizeTransfers() override { return Record("sync"); }
  Status SetReadMostly(const ByteRange& r, bool on) override {
    return Record((on ? "read-mostly " : "not read-mostly ") + std::to_string(r.begin >> 20));
  }

  uint64_t NowNs() override { return now_ns; }

  std::vector<std::string> calls;
  int fail_at = 0;
  // The clock, and how long each prefetch to the host holds the caller.
  uint64_t now_ns = 0;
  uint64_t ns_per_eviction = 0;

 private:
  Status Record(std::string call) {
    calls.push_back(std::move(call));
    if (static_cast<int>(calls.size()) == fail_at) return Status::Unavailable("injected failure");
    return Status::Ok();
  }
};

}  // namespace msched

// The runner behind RunWorkload (workload_run.h): one run of a Workload's
// steps through the driver API, with the state it keeps (modules, streams,
// buffers, kernels, the serve step's loaded models). Every step returns a
// Status; the first failure ends the run. The serve step is defined apart,
// in workload_serve.cc. Confined to one thread. Internal to
// workload_run.cc and workload_serve.cc.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "msched/status.h"
#include "workload.h"
#include "workload_run.h"

namespace msim {

class Runner {
 public:
  Runner(const Workload& w, const RunOptions& options) : w_(w), options_(options), vars_(w.vars) {}
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  RunResult Run();

 private:
  using Status = msched::Status;
  template <typename T>
  using Result = msched::Result<T>;
  using Span = std::pair<CUdeviceptr, uint64_t>;  // a device address and a byte count

  // OK on CUDA_SUCCESS; else `what` and the error's name, as a
  // ResourceExhausted for CUDA_ERROR_OUT_OF_MEMORY (an attempt Run may
  // repeat) and an Internal for any other error.
  static Status Check(CUresult r, const std::string& what);
  static bool OutOfMemory(const Status& s) { return s.code() == msched::StatusCode::kResourceExhausted; }
  static uint64_t Now();
  Result<int64_t> Eval(const ExprPtr& e, const std::string& what);

  Status Setup();
  Status Arrive();
  Status Attempt();
  Status Discard();

  Status Exec(const std::vector<Step>& steps);
  Status ExecStep(const Step& s);
  Status Launch(const Step& s);
  Status LaunchAs(const Step& s, CUfunction f, const unsigned dims[6], CUstream stream, void** kp, void** ex);
  Status Graph(const Step& s);
  Status Write(const Step& s);
  // workload_serve.cc
  Status Serve(const Step& s);
  Status Load(const ServeSpec& sp, const std::string& name, int64_t resident, std::vector<std::string>* held);

  // Frees buffer `name` the way it was allocated: the driver's answer.
  Result<CUresult> Free(const std::string& name);
  Result<const BufferSpec*> Spec(const std::string& name);
  // The kind buffer `b` is allocated as: its own, or what RunOptions'
  // force_managed or force_vmm make of a device buffer (plain, pitch or
  // async; host memory and the other kinds stay as they are).
  std::string KindOf(const BufferSpec& b) const;
  Status Alloc(const BufferSpec& b);
  // A "vmm" buffer: physical memory created, mapped at an address range of
  // its own and made readable and writable, as a VMM allocator does (the
  // handle kept until the buffer is freed). Freed by unmapping, releasing
  // the handle and freeing the range. `exported` ("vmm_exported"): its
  // handle is also exported as a file descriptor, as NCCL hands its buffers
  // to a peer (the descriptor is kept open until the buffer is freed).
  Status AllocVmm(uint64_t size, bool exported, CUdeviceptr* p, const std::string& what);
  CUresult FreeVmm(CUdeviceptr p);
  // An "expandable" buffer, as PyTorch's expandable segments place tensors:
  // one address range reserved once (the device's size) and grown in
  // pieces of one granule, each its own handle, mapped end to end as
  // buffers are allocated. Freed by unmapping its pieces in one call and
  // releasing them; the range goes once no buffer is left in it.
  Status AllocExpandable(uint64_t size, CUdeviceptr* p, const std::string& what);
  CUresult FreeExpandable(CUdeviceptr p);
  Result<Span> Buffer(const std::string& name);
  Result<CUstream> Stream(const std::string& name);
  Result<Span> Slice(const Step& s, const std::string& name);
  Result<size_t> Pack(const ArgSpec& a, std::vector<uint8_t>* out, size_t at);
  Result<CUfunction> Function(const std::string& name);
  Result<uint64_t> Checksum(const std::string& name);

  const Workload& w_;
  const RunOptions options_;
  std::map<std::string, int64_t> vars_;
  std::vector<CUmodule> modules_;
  std::map<std::string, CUstream> streams_;
  std::map<std::string, Span> ptrs_;
  struct VmmBuffer {
    CUmemGenericAllocationHandle handle = 0;
    uint64_t mapped = 0;  // bytes mapped (the size rounded up to the granularity)
    int exported_fd = -1;
  };
  std::map<CUdeviceptr, VmmBuffer> vmm_;  // the "vmm" buffers, by address
  struct Segment {
    CUdeviceptr base = 0;            // 0: not reserved
    uint64_t reserved = 0, end = 0;  // bytes reserved, and mapped from base (the next buffer's offset)
    std::map<CUdeviceptr, std::vector<CUmemGenericAllocationHandle>> pieces;  // each buffer's, by address
  };
  Segment segment_;                             // the "expandable" buffers'
  std::map<std::string, std::string> aliases_;  // a serve step's swap_as: the model buffer it names now
  std::vector<uint64_t> latencies_;
  std::map<std::string, CUfunction> functions_;
  uint64_t started_ns_ = 0;             // the clock once the driver is initialised (Setup)
  std::optional<uint64_t> free_bytes_;  // the last "meminfo" step's
  uint64_t launches_ = 0;
  uint64_t first_launch_ns_ = 0;
  std::map<std::string, uint64_t> marks_;
};

}  // namespace msim

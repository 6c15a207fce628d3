#include "workload_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "msim/msim.h"
#include "workload_runner.h"

namespace msim {
namespace {

// The replayed launch being made, for the stamp kernel: the simulator runs
// a host implementation within the launch call, on the calling thread.
struct ReplayStamp {
  uint64_t launch = 0;    // its place among the run's launches
  uint64_t identity = 0;  // of its kernel and ranges, so that launches in another order stamp otherwise
  std::vector<msimRange> ranges;
};
thread_local const ReplayStamp* current_stamp = nullptr;

// kReplayStampKernel: mixes each written range's first word with the
// launch's place, so that the final contents depend on every write and
// their order.
void StampWrites(void* const*, const msimLaunchInfo*) {
  if (current_stamp == nullptr) return;
  for (size_t i = 0; i < current_stamp->ranges.size(); ++i) {
    const msimRange& r = current_stamp->ranges[i];
    if ((r.mode & 2) == 0 || r.end - r.begin < 8) continue;
    uint64_t z;
    std::memcpy(&z, reinterpret_cast<const void*>(r.begin), 8);
    z ^= (current_stamp->launch << 20 | i) + current_stamp->identity;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finaliser
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(reinterpret_cast<void*>(r.begin), &z, 8);
  }
}

}  // namespace

RunResult Runner::Run() {
  RunResult result;
  // The failure that ended the run; the counts so far stay in `result`.
  auto failed = [&](const Status& s) {
    result.error = s.message();
    result.virtual_ns = Now();
    result.free_bytes = free_bytes_;
    return result;
  };
  if (Status s = Setup(); !s.ok()) return failed(s);
  result.started_ns = started_ns_;
  if (Status s = Arrive(); !s.ok()) return failed(s);
  result.arrival_ns = Now();
  for (int attempt = 1;; ++attempt) {
    const uint64_t started = Now();
    ++result.attempts;
    const Status s = Attempt();
    if (s.ok()) break;
    // A program that runs out of device memory crashes and loses its
    // work; a user (or the cluster's requeue) submits it again later.
    if (!OutOfMemory(s)) return failed(s);
    ++result.ooms;
    result.lost_ns += Now() - started;
    if (attempt >= options_.max_attempts) return failed(s);
    if (Status d = Discard(); !d.ok()) return failed(d);
    msimAdvanceTo(Now() + options_.retry_delay_ns);
  }
  if (options_.checksums) {
    for (const std::string& name : w_.checksum) {
      Result<uint64_t> sum = Checksum(name);
      if (!sum.ok()) return failed(sum.status());
      result.checksums[name] = *sum;
    }
  }
  result.launches = launches_;
  result.first_launch_ns = first_launch_ns_;
  result.marks = marks_;
  result.latencies_ns = latencies_;
  result.free_bytes = free_bytes_;
  result.virtual_ns = Now();
  return result;
}

msched::Status Runner::Check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::string message = what + ": " + (name ? name : std::to_string(r));
  return r == CUDA_ERROR_OUT_OF_MEMORY ? Status::ResourceExhausted(std::move(message))
                                       : Status::Internal(std::move(message));
}

uint64_t Runner::Now() {
  uint64_t now = 0;
  msimGetTime(&now);
  return now;
}

msched::Result<int64_t> Runner::Eval(const ExprPtr& e, const std::string& what) {
  int64_t v = 0;
  if (!e->Eval(VarContext(vars_), &v)) return Status::InvalidArgument(what + ": cannot evaluate '" + e->text() + "'");
  return v;
}

msched::Status Runner::Setup() {
  MSCHED_RETURN_IF_ERROR(Check(cuInit(0), "cuInit"));
  started_ns_ = Now();  // the process's clock joins the device's at its first driver call
  CUdevice dev;
  MSCHED_RETURN_IF_ERROR(Check(cuDeviceGet(&dev, 0), "cuDeviceGet"));
  CUcontext ctx;
  MSCHED_RETURN_IF_ERROR(Check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"));
  MSCHED_RETURN_IF_ERROR(Check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent"));
  MSCHED_RETURN_IF_ERROR(Check(msimRegisterHostKernel(kReplayStampKernel, &StampWrites), "registering the stamp"));
  for (const std::string& text : w_.module_texts) {
    CUmodule m;
    MSCHED_RETURN_IF_ERROR(Check(cuModuleLoadData(&m, text.c_str()), "cuModuleLoadData"));
    modules_.push_back(m);
  }
  for (const std::string& s : w_.streams) {
    MSCHED_RETURN_IF_ERROR(Check(cuStreamCreate(&streams_[s], CU_STREAM_DEFAULT), "cuStreamCreate"));
  }
  return Status::Ok();
}

// The job is submitted at RunOptions::arrival_ns: its clock moves there,
// and the synchronisation returns once every process sharing the device
// has reached that time, so that whatever it does next (a coordinator
// hears of it at its first allocation) happens in virtual-time order.
msched::Status Runner::Arrive() {
  if (options_.arrival_ns == 0) return Status::Ok();
  msimAdvanceTo(options_.arrival_ns);
  return Check(cuCtxSynchronize(), "arriving");
}

// One run of the program from its first allocation to its end.
msched::Status Runner::Attempt() {
  vars_ = w_.vars;
  for (const BufferSpec& b : w_.buffers) {
    if (!b.deferred) MSCHED_RETURN_IF_ERROR(Alloc(b));
  }
  MSCHED_RETURN_IF_ERROR(Exec(w_.steps));
  return Check(cuCtxSynchronize(), "final synchronisation");
}

// What a crashed attempt held is released, as the process's exit would:
// its queued work finishes or fails, and its memory is freed (the driver's
// answers do not matter).
msched::Status Runner::Discard() {
  (void)cuCtxSynchronize();
  for (const auto& entry : ptrs_) {
    if (Result<CUresult> r = Free(entry.first); !r.ok()) return r.status();
  }
  ptrs_.clear();
  return Status::Ok();
}

msched::Result<CUresult> Runner::Free(const std::string& name) {
  Result<Span> buffer = Buffer(name);
  if (!buffer.ok()) return buffer.status();
  Result<const BufferSpec*> spec = Spec(name);
  if (!spec.ok()) return spec.status();
  const CUdeviceptr p = buffer->first;
  const std::string kind = KindOf(**spec);
  if (kind == "host") return cuMemFreeHost(reinterpret_cast<void*>(p));
  if (kind == "vmm" || kind == "vmm_exported") return FreeVmm(p);
  if (kind == "expandable") return FreeExpandable(p);
  return kind == "async" ? cuMemFreeAsync(p, nullptr) : cuMemFree(p);
}

msched::Result<const BufferSpec*> Runner::Spec(const std::string& name) {
  for (const BufferSpec& b : w_.buffers) {
    if (b.name == name) return &b;
  }
  return Status::InvalidArgument("no buffer " + name);
}

std::string Runner::KindOf(const BufferSpec& b) const {
  const bool device = b.kind == "device" || b.kind == "pitch" || b.kind == "async";
  if (device && options_.force_managed) return "managed";
  if (device && options_.force_vmm) return "vmm";
  if (device && options_.force_expandable) return "expandable";
  return b.kind;
}

msched::Status Runner::Alloc(const BufferSpec& b) {
  Result<int64_t> evaluated = Eval(b.size, "size of " + b.name);
  if (!evaluated.ok()) return evaluated.status();
  const int64_t size = *evaluated;
  if (size <= 0) return Status::InvalidArgument("buffer " + b.name + " has size " + std::to_string(size));
  CUdeviceptr p = 0;
  const std::string kind = KindOf(b);
  const std::string what = "allocating " + b.name + " (" + kind + ", " + std::to_string(size) + " bytes)";
  if (kind == "vmm" || kind == "vmm_exported") {
    MSCHED_RETURN_IF_ERROR(AllocVmm(static_cast<uint64_t>(size), kind == "vmm_exported", &p, what));
  } else if (kind == "expandable") {
    MSCHED_RETURN_IF_ERROR(AllocExpandable(static_cast<uint64_t>(size), &p, what));
  } else if (kind == "managed") {
    MSCHED_RETURN_IF_ERROR(Check(cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL), what));
  } else if (kind == "pitch") {
    size_t pitch = 0;
    MSCHED_RETURN_IF_ERROR(Check(cuMemAllocPitch(&p, &pitch, 4096, (size + 4095) / 4096, 4), what));
  } else if (kind == "async") {
    MSCHED_RETURN_IF_ERROR(Check(cuMemAllocAsync(&p, size, nullptr), what));
  } else if (kind == "host") {
    void* h = nullptr;
    MSCHED_RETURN_IF_ERROR(Check(cuMemAllocHost(&h, size), what));
    p = reinterpret_cast<CUdeviceptr>(h);
  } else {
    MSCHED_RETURN_IF_ERROR(Check(cuMemAlloc(&p, size), what));
  }
  ptrs_[b.name] = {p, static_cast<uint64_t>(size)};
  return Status::Ok();
}

msched::Status Runner::AllocVmm(uint64_t size, bool exported, CUdeviceptr* p, const std::string& what) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  if (exported) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  MSCHED_RETURN_IF_ERROR(
      Check(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), what));
  VmmBuffer b;
  b.mapped = (size + granularity - 1) / granularity * granularity;
  MSCHED_RETURN_IF_ERROR(Check(cuMemCreate(&b.handle, b.mapped, &prop, 0), what));
  CUresult r = cuMemAddressReserve(p, b.mapped, 0, 0, 0);
  if (r == CUDA_SUCCESS) {
    r = cuMemMap(*p, b.mapped, 0, b.handle, 0);
    if (r != CUDA_SUCCESS) (void)cuMemAddressFree(*p, b.mapped);
  }
  if (r == CUDA_SUCCESS) {
    const CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = cuMemSetAccess(*p, b.mapped, &access, 1);
    if (r == CUDA_SUCCESS && exported) {
      r = cuMemExportToShareableHandle(&b.exported_fd, b.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    }
    if (r != CUDA_SUCCESS) (void)cuMemUnmap(*p, b.mapped), (void)cuMemAddressFree(*p, b.mapped);
  }
  if (r != CUDA_SUCCESS) {
    (void)cuMemRelease(b.handle);
    return Check(r, what);
  }
  vmm_[*p] = b;
  return Status::Ok();
}

CUresult Runner::FreeVmm(CUdeviceptr p) {
  auto it = vmm_.find(p);
  if (it == vmm_.end()) return CUDA_ERROR_INVALID_VALUE;
  const VmmBuffer b = it->second;
  vmm_.erase(it);
  if (b.exported_fd >= 0) close(b.exported_fd);
  CUresult r = cuMemUnmap(p, b.mapped);
  if (const CUresult released = cuMemRelease(b.handle); r == CUDA_SUCCESS) r = released;
  if (const CUresult freed = cuMemAddressFree(p, b.mapped); r == CUDA_SUCCESS) r = freed;
  return r;
}

msched::Status Runner::AllocExpandable(uint64_t size, CUdeviceptr* p, const std::string& what) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t granularity = 0;
  MSCHED_RETURN_IF_ERROR(
      Check(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), what));
  if (segment_.base == 0) {
    size_t total = 0;
    MSCHED_RETURN_IF_ERROR(Check(cuDeviceTotalMem(&total, 0), what));
    segment_.reserved = (total + granularity - 1) / granularity * granularity;
    MSCHED_RETURN_IF_ERROR(Check(cuMemAddressReserve(&segment_.base, segment_.reserved, 0, 0, 0), what));
    segment_.end = 0;
  }
  const uint64_t bytes = (size + granularity - 1) / granularity * granularity;
  if (bytes > segment_.reserved - segment_.end) return Status::ResourceExhausted(what + ": the segment is full");
  const CUdeviceptr at = segment_.base + segment_.end;
  std::vector<CUmemGenericAllocationHandle> pieces;
  CUresult r = CUDA_SUCCESS;
  for (uint64_t off = 0; off < bytes && r == CUDA_SUCCESS; off += granularity) {
    CUmemGenericAllocationHandle h = 0;
    r = cuMemCreate(&h, granularity, &prop, 0);
    if (r != CUDA_SUCCESS) break;
    r = cuMemMap(at + off, granularity, 0, h, 0);
    if (r != CUDA_SUCCESS) (void)cuMemRelease(h);
    if (r == CUDA_SUCCESS) pieces.push_back(h);
  }
  if (r == CUDA_SUCCESS) {
    const CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = cuMemSetAccess(at, bytes, &access, 1);  // over every piece at once
  }
  if (r != CUDA_SUCCESS) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      (void)cuMemUnmap(at + i * granularity, granularity);
      (void)cuMemRelease(pieces[i]);
    }
    return Check(r, what);
  }
  segment_.end += bytes;
  segment_.pieces[at] = std::move(pieces);
  *p = at;
  return Status::Ok();
}

CUresult Runner::FreeExpandable(CUdeviceptr p) {
  auto it = segment_.pieces.find(p);
  if (it == segment_.pieces.end()) return CUDA_ERROR_INVALID_VALUE;
  const std::vector<CUmemGenericAllocationHandle> pieces = std::move(it->second);
  segment_.pieces.erase(it);
  size_t granularity = 0;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUresult r = cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r == CUDA_SUCCESS) r = cuMemUnmap(p, pieces.size() * granularity);  // all its pieces in one call
  for (CUmemGenericAllocationHandle h : pieces) {
    if (const CUresult released = cuMemRelease(h); r == CUDA_SUCCESS) r = released;
  }
  if (p + pieces.size() * granularity == segment_.base + segment_.end) segment_.end = p - segment_.base;
  if (segment_.pieces.empty()) {
    if (const CUresult freed = cuMemAddressFree(segment_.base, segment_.reserved); r == CUDA_SUCCESS) r = freed;
    segment_ = Segment{};
  }
  return r;
}

msched::Result<Runner::Span> Runner::Buffer(const std::string& name) {
  const auto alias = aliases_.find(name);
  auto it = ptrs_.find(alias != aliases_.end() ? alias->second : name);
  if (it == ptrs_.end()) return Status::InvalidArgument("buffer " + name + " is not allocated");
  return it->second;
}

msched::Result<CUstream> Runner::Stream(const std::string& name) {
  if (name.empty()) return CUstream{nullptr};
  auto it = streams_.find(name);
  if (it == streams_.end()) return Status::InvalidArgument("no stream " + name);
  return it->second;
}

// The [offset, offset+bytes) slice of a step's buffer.
msched::Result<Runner::Span> Runner::Slice(const Step& s, const std::string& name) {
  Result<Span> buffer = Buffer(name);
  if (!buffer.ok()) return buffer.status();
  const auto [p, size] = *buffer;
  uint64_t off = 0;
  if (s.offset) {
    Result<int64_t> v = Eval(s.offset, "offset");
    if (!v.ok()) return v.status();
    off = static_cast<uint64_t>(*v);
  }
  uint64_t bytes = size - std::min(off, size);
  if (s.count) {
    Result<int64_t> v = Eval(s.count, "bytes");
    if (!v.ok()) return v.status();
    bytes = static_cast<uint64_t>(*v);
  }
  if (off > size || bytes > size - off) return Status::InvalidArgument("slice of " + name + " out of bounds");
  return Span{p + off, bytes};
}

// Packs `a` at byte `at` of `out` with natural alignment; returns the end.
msched::Result<size_t> Runner::Pack(const ArgSpec& a, std::vector<uint8_t>* out, size_t at) {
  auto put = [&](const void* v, size_t n) {
    at = (at + n - 1) / n * n;
    if (out->size() < at + n) out->resize(at + n);
    std::memcpy(out->data() + at, v, n);
    return at + n;
  };
  switch (a.kind) {
    case ArgSpec::Kind::kPtr: {
      Result<Span> buffer = Buffer(a.buffer);
      if (!buffer.ok()) return buffer.status();
      uint64_t p = buffer->first + a.offset;
      if (a.value) {
        Result<int64_t> offset = Eval(a.value, "offset");
        if (!offset.ok()) return offset.status();
        p += static_cast<uint64_t>(*offset);
      }
      return put(&p, 8);
    }
    case ArgSpec::Kind::kU64: {
      Result<int64_t> v = Eval(a.value, "argument");
      if (!v.ok()) return v.status();
      return put(&*v, 8);
    }
    case ArgSpec::Kind::kU32: {
      Result<int64_t> v = Eval(a.value, "argument");
      if (!v.ok()) return v.status();
      const uint32_t word = static_cast<uint32_t>(*v);
      return put(&word, 4);
    }
    case ArgSpec::Kind::kF32: {
      const float v = static_cast<float>(a.f32);
      return put(&v, 4);
    }
    case ArgSpec::Kind::kBytes:
      if (out->size() < at + a.bytes.size()) out->resize(at + a.bytes.size());
      std::memcpy(out->data() + at, a.bytes.data(), a.bytes.size());
      return at + a.bytes.size();
    case ArgSpec::Kind::kStruct:
      for (const ArgSpec& f : a.fields) {
        Result<size_t> end = Pack(f, out, at);
        if (!end.ok()) return end;
        at = *end;
      }
      return at;
  }
  return at;
}

msched::Result<CUfunction> Runner::Function(const std::string& name) {
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  for (CUmodule m : modules_) {
    CUfunction f;
    if (cuModuleGetFunction(&f, m, name.c_str()) == CUDA_SUCCESS) return functions_[name] = f;
  }
  return Status::InvalidArgument("no kernel '" + name + "' in the workload's modules");
}

msched::Status Runner::Launch(const Step& s) {
  Result<CUfunction> function = Function(s.kernel);
  if (!function.ok()) return function.status();
  CUfunction f = *function;
  std::vector<std::pair<size_t, size_t>> layout;
  for (size_t i = 0;; ++i) {
    size_t off = 0, size = 0;
    if (cuFuncGetParamInfo(f, i, &off, &size) != CUDA_SUCCESS) break;
    layout.push_back({off, size});
  }
  if (layout.size() != s.args.size()) {
    return Status::InvalidArgument("kernel " + s.kernel + " takes " + std::to_string(layout.size()) +
                                   " arguments, the step gives " + std::to_string(s.args.size()));
  }
  std::vector<std::vector<uint8_t>> values(layout.size());
  std::vector<uint8_t> packed;
  std::vector<void*> params;
  for (size_t i = 0; i < layout.size(); ++i) {
    Result<size_t> n = Pack(s.args[i], &values[i], 0);
    if (!n.ok()) return n.status();
    if (*n > layout[i].second) {
      return Status::InvalidArgument("argument " + std::to_string(i) + " of " + s.kernel + " is too large");
    }
    values[i].resize(layout[i].second);
    if (packed.size() < layout[i].first + layout[i].second) packed.resize(layout[i].first + layout[i].second);
    std::memcpy(packed.data() + layout[i].first, values[i].data(), layout[i].second);
  }
  for (auto& v : values) params.push_back(v.data());
  unsigned dims[6];
  for (int i = 0; i < 3; ++i) {
    Result<int64_t> grid = Eval(s.grid[i], "grid");
    if (!grid.ok()) return grid.status();
    Result<int64_t> block = Eval(s.block[i], "block");
    if (!block.ok()) return block.status();
    dims[i] = static_cast<unsigned>(std::max<int64_t>(1, *grid));
    dims[3 + i] = static_cast<unsigned>(std::max<int64_t>(1, *block));
  }
  Result<CUstream> stream = Stream(s.stream);
  if (!stream.ok()) return stream.status();
  size_t packed_size = packed.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  void** kp = s.to == "extra" ? nullptr : params.data();
  void** ex = s.to == "extra" ? extra : nullptr;
  ReplayStamp stamp;
  if (s.replayed) {
    // The recorded program's host work (Python between launches) before
    // this launch: its earlier kernels run on meanwhile.
    if (s.host_ns != 0) msimAdvanceTo(Now() + s.host_ns);
    stamp.launch = launches_;
    stamp.identity = 1469598103934665603ull;  // FNV-1a over the kernel's name and the ranges' offsets
    const auto mix = [&](uint64_t v) { stamp.identity = (stamp.identity ^ v) * 1099511628211ull; };
    for (char c : s.kernel) mix(static_cast<uint8_t>(c));
    for (const TouchSpec& t : s.touches) {
      Result<Span> buffer = Buffer(t.buffer);
      if (!buffer.ok()) return buffer.status();
      stamp.ranges.push_back({buffer->first + t.begin, buffer->first + t.end, t.mode, 0});
      mix(t.begin), mix(t.end), mix(t.mode);
    }
    MSCHED_RETURN_IF_ERROR(
        Check(msimSetNextLaunch(f, stamp.ranges.data(), stamp.ranges.size(), s.compute_ns), "replaying " + s.kernel));
    current_stamp = &stamp;
  }
  const Status launched = LaunchAs(s, f, dims, *stream, kp, ex);
  current_stamp = nullptr;
  MSCHED_RETURN_IF_ERROR(launched);
  if (launches_++ == 0) msimGetTime(&first_launch_ns_);
  return Status::Ok();
}

// The launch call `s` names (cuLaunchKernel unless its pattern says).
msched::Status Runner::LaunchAs(const Step& s, CUfunction f, const unsigned dims[6], CUstream stream, void** kp,
                                void** ex) {
  const std::string what = "launching " + s.kernel;
  if (s.pattern == "ex") {
    CUlaunchConfig c{};
    c.gridDimX = dims[0], c.gridDimY = dims[1], c.gridDimZ = dims[2];
    c.blockDimX = dims[3], c.blockDimY = dims[4], c.blockDimZ = dims[5];
    c.hStream = stream;
    MSCHED_RETURN_IF_ERROR(Check(cuLaunchKernelEx(&c, f, kp, ex), what));
  } else if (s.pattern == "cooperative") {
    MSCHED_RETURN_IF_ERROR(
        Check(cuLaunchCooperativeKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0, stream, kp), what));
  } else {
    MSCHED_RETURN_IF_ERROR(
        Check(cuLaunchKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0, stream, kp, ex), what));
  }
  return Status::Ok();
}

msched::Status Runner::Graph(const Step& s) {
  Result<CUstream> captured = Stream(s.stream);
  if (!captured.ok()) return captured.status();
  const CUstream stream = *captured;
  MSCHED_RETURN_IF_ERROR(Check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "beginning a capture"));
  MSCHED_RETURN_IF_ERROR(Exec(s.body));
  CUgraph graph;
  MSCHED_RETURN_IF_ERROR(Check(cuStreamEndCapture(stream, &graph), "ending a capture"));
  CUgraphExec exec;
  MSCHED_RETURN_IF_ERROR(Check(cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiating a graph"));
  // The source graph goes at once, as PyTorch's CUDAGraph lets it go.
  MSCHED_RETURN_IF_ERROR(Check(cuGraphDestroy(graph), "destroying a graph"));
  Result<int64_t> replays = Eval(s.count, "replays");
  if (!replays.ok()) return replays.status();
  for (int64_t i = 0; i < *replays; ++i) {
    MSCHED_RETURN_IF_ERROR(Check(cuGraphLaunch(exec, stream), "launching a graph"));
  }
  return Check(cuGraphExecDestroy(exec), "destroying a graph");
}

msched::Status Runner::Write(const Step& s) {
  Result<Span> slice = Slice(s, s.buffer);
  if (!slice.ok()) return slice.status();
  const auto [p, bytes] = *slice;
  if (s.pattern == "address") {  // a descriptor holding another buffer's device address
    Result<Span> target = Buffer(s.buffer2);
    if (!target.ok()) return target.status();
    const uint64_t address = target->first;
    if (bytes < sizeof address) return Status::InvalidArgument("writing " + s.buffer + ": no room for an address");
    return Check(cuMemcpyHtoD(p, &address, sizeof address), "writing " + s.buffer);
  }
  uint32_t seed = 1;
  if (s.value) {
    Result<int64_t> v = Eval(s.value, "seed");
    if (!v.ok()) return v.status();
    seed = static_cast<uint32_t>(*v);
  }
  constexpr uint64_t kBlock = 16ull << 20;
  std::vector<uint32_t> host(kBlock / 4);
  for (uint64_t done = 0; done < bytes; done += kBlock) {
    const uint64_t n = std::min(kBlock, bytes - done);
    for (uint64_t i = 0; i < (n + 3) / 4; ++i) {
      const uint64_t idx = done / 4 + i;
      if (s.pattern == "iota_u32")
        host[i] = seed + static_cast<uint32_t>(idx) * 2654435761u;
      else {
        const float f =
            s.pattern == "const_f32" ? static_cast<float>(seed) : static_cast<float>(idx % 1024) * 0.5f + seed;
        std::memcpy(&host[i], &f, 4);
      }
    }
    MSCHED_RETURN_IF_ERROR(Check(cuMemcpyHtoD(p + done, host.data(), n), "writing " + s.buffer));
  }
  return Status::Ok();
}

msched::Result<uint64_t> Runner::Checksum(const std::string& name) {
  Result<Span> buffer = Buffer(name);
  if (!buffer.ok()) return buffer.status();
  const auto [p, size] = *buffer;
  uint64_t h = 1469598103934665603ull;
  std::vector<uint8_t> host(std::min<uint64_t>(size, 64ull << 20));
  for (uint64_t done = 0; done < size; done += host.size()) {
    const uint64_t n = std::min<uint64_t>(host.size(), size - done);
    MSCHED_RETURN_IF_ERROR(Check(cuMemcpyDtoH(host.data(), p + done, n), "reading " + name));
    for (uint64_t i = 0; i < n; ++i) h = (h ^ host[i]) * 1099511628211ull;
  }
  return h;
}

msched::Status Runner::Exec(const std::vector<Step>& steps) {
  for (const Step& s : steps) MSCHED_RETURN_IF_ERROR(ExecStep(s));
  return Status::Ok();
}

msched::Status Runner::ExecStep(const Step& s) {
  switch (s.op) {
    case Step::Op::kWrite: return Write(s);
    case Step::Op::kMemset: {
      Result<Span> slice = Slice(s, s.buffer);
      if (!slice.ok()) return slice.status();
      int64_t value = 0;
      if (s.value) {
        Result<int64_t> v = Eval(s.value, "value");
        if (!v.ok()) return v.status();
        value = *v;
      }
      Result<CUstream> stream = Stream(s.stream);
      if (!stream.ok()) return stream.status();
      return Check(cuMemsetD8Async(slice->first, static_cast<unsigned char>(value), slice->second, *stream),
                   "memset " + s.buffer);
    }
    case Step::Op::kLaunch: return Launch(s);
    case Step::Op::kRepeat: {
      Result<int64_t> n = Eval(s.count, "repeat count");
      if (!n.ok()) return n.status();
      for (int64_t i = 0; i < *n; ++i) {
        if (!s.var.empty()) vars_[s.var] = i;
        MSCHED_RETURN_IF_ERROR(Exec(s.body));
      }
      return Status::Ok();
    }
    case Step::Op::kGraph: return Graph(s);
    case Step::Op::kSync: {
      if (s.stream.empty()) return Check(cuCtxSynchronize(), "synchronising");
      Result<CUstream> stream = Stream(s.stream);
      if (!stream.ok()) return stream.status();
      return Check(cuStreamSynchronize(*stream), "synchronising");
    }
    case Step::Op::kPrefetch: {
      Result<Span> slice = Slice(s, s.buffer);
      if (!slice.ok()) return slice.status();
      CUmemLocation loc{s.to == "device" ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST, 0};
      Result<CUstream> stream = Stream(s.stream);
      if (!stream.ok()) return stream.status();
      return Check(cuMemPrefetchAsync(slice->first, slice->second, loc, 0, *stream), "prefetching " + s.buffer);
    }
    case Step::Op::kCopy: {
      Result<Span> dst = Slice(s, s.buffer);
      if (!dst.ok()) return dst.status();
      Result<Span> src = Buffer(s.buffer2);
      if (!src.ok()) return src.status();
      Result<CUstream> stream = Stream(s.stream);
      if (!stream.ok()) return stream.status();
      return Check(cuMemcpyAsync(dst->first, src->first, std::min(dst->second, src->second), *stream),
                   "copying to " + s.buffer);
    }
    case Step::Op::kFree: {
      Result<CUresult> freed = Free(s.buffer);
      if (!freed.ok()) return freed.status();
      MSCHED_RETURN_IF_ERROR(Check(*freed, "freeing " + s.buffer));
      ptrs_.erase(s.buffer);
      return Status::Ok();
    }
    case Step::Op::kAlloc: {
      Result<const BufferSpec*> spec = Spec(s.buffer);
      if (!spec.ok()) return spec.status();
      return Alloc(**spec);
    }
    case Step::Op::kMark:
      MSCHED_RETURN_IF_ERROR(Check(cuCtxSynchronize(), "synchronising at mark " + s.var));
      msimGetTime(&marks_[s.var]);
      return Status::Ok();
    case Step::Op::kMemInfo: {
      size_t free = 0, total = 0;
      MSCHED_RETURN_IF_ERROR(Check(cuMemGetInfo(&free, &total), "cuMemGetInfo"));
      free_bytes_ = free;
      return Status::Ok();
    }
    case Step::Op::kHostWork: {
      Result<int64_t> us = Eval(s.value, "host_work");
      if (!us.ok()) return us.status();
      msimAdvanceTo(Now() + static_cast<uint64_t>(*us) * 1000);
      return Status::Ok();
    }
    case Step::Op::kServe: return Serve(s);
  }
  return Status::Ok();
}

RunResult RunWorkload(const Workload& w, const RunOptions& options) { return Runner(w, options).Run(); }

}  // namespace msim

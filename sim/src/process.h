// Process: the simulator's state private to one process: its allocations
// (device memory is host memory, reserved lazily), VMM reservations and
// physical memory, streams with their virtual-time queues, events, contexts,
// loaded modules, captured graphs, its virtual clock and counters. One
// instance, created by cuInit, never destroyed (host threads may call the
// driver during exit).
// Thread-safe: every member is guarded by `mu`; code that also needs the
// shared device takes `mu` first, then the device lock. Used by sim/ only.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kernel_decl.h"
#include "msim/msim.h"
#include "shared_device.h"
#include "uvm_model.h"

namespace msim {

enum class AllocType : uint8_t { kDevice, kPitch, kAsync, kManaged, kHost, kVmmMapped };

struct PhysicalMem;

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;      // what the caller asked for (pitch: pitch * height)
  uint64_t map_size = 0;  // bytes of the host mapping behind it (0: not ours to unmap)
  AllocType type = AllocType::kDevice;
  uint64_t hbm_bytes = 0;        // HBM reserved outside managed memory
  std::vector<uint32_t> chunks;  // managed: one record per 2 MiB block
  // Managed-memory advice, as cuMemRangeGetAttribute reports it.
  int preferred = -2;  // device ordinal, -1 host (CU_DEVICE_CPU), -2 none
  bool accessed_by_device = false;
  int last_prefetch = -2;
  // kVmmMapped (one cuMemMap): the physical memory mapped, and the access
  // cuMemSetAccess last granted to each 2 MiB granule of it, a
  // CUmemAccess_flags (PROT_NONE until granted).
  PhysicalMem* physical = nullptr;
  std::vector<uint8_t> access;
  // kAsync from a pool created with an export handle type: another process
  // may import it (cuMemPoolExportPointer).
  bool exportable = false;

  // Whether a device access to [begin, end), inside this allocation, is
  // allowed: always, but in VMM memory only where access was granted (for a
  // write, read-write access).
  bool Grants(uint64_t begin, uint64_t end, bool write) const;
};

struct Graph;

struct Stream {
  static constexpr uint32_t kMagic = 0x6d537472;
  uint32_t magic = kMagic;
  unsigned flags = 0;  // CU_STREAM_NON_BLOCKING or default
  int priority = 0;
  uint64_t ready = 0;              // virtual time its last queued operation completes
  std::deque<uint64_t> inflight;   // completion times of queued operations (bounded)
  std::shared_ptr<Graph> capture;  // set while capturing
};

struct Event {
  static constexpr uint32_t kMagic = 0x6d457674;
  uint32_t magic = kMagic;
  unsigned flags = 0;
  bool recorded = false;
  uint64_t time = 0;
};

struct Context {
  static constexpr uint32_t kMagic = 0x6d437478;
  uint32_t magic = kMagic;
  bool primary = false;
  unsigned flags = 0;
};

// A kernel node (the only kind capture records). Its handle (CUgraphNode)
// is its address in its graph, which never changes once captured; an
// executable graph copies the nodes and keeps their ids, by which
// cuGraphNodeSetEnabled finds the copy of a node of the source graph.
struct GraphNode {
  uint64_t id = 0;  // unique in the process
  const KernelDecl* kernel = nullptr;
  std::vector<std::vector<uint8_t>> params;  // copies of the argument values
  std::vector<void*> param_ptrs;             // pointers into `params`, as cuGraphKernelNodeGetParams hands out
  msimLaunchInfo dims{};
  std::vector<size_t> deps;  // indices of the nodes it depends on
  bool enabled = true;       // executable graphs: cuGraphNodeSetEnabled
};

struct Graph {
  static constexpr uint32_t kMagic = 0x6d477268;
  uint32_t magic = kMagic;
  bool executable = false;
  std::vector<GraphNode> nodes;  // in dependency order (a node only depends on earlier ones)
};

// A VMM physical allocation (cuMemCreate): a memory file, which each
// mapping of it maps shared (aliases see the same bytes). Its handle is
// valid while references remain (cuMemCreate and each
// cuMemRetainAllocationHandle add one, cuMemRelease drops one); its memory,
// and the HBM it holds, lives until neither references nor mappings remain.
struct PhysicalMem {
  static constexpr uint32_t kMagic = 0x6d50686d;
  uint32_t magic = kMagic;
  int fd = -1;
  uint64_t size = 0;
  uint64_t refs = 0;        // handle references
  uint64_t mappings = 0;    // its live cuMemMap mappings
  bool exportable = false;  // created asking for a POSIX file descriptor handle
  // Imported from another process's export: its HBM is the exporter's,
  // never reserved or released here.
  bool imported = false;
};

struct Counters : UvmCounters {
  uint64_t launches = 0;
  uint64_t kernel_ns = 0;   // device time of kernels and device ops, stalls included
  uint64_t compute_ns = 0;  // of which the work itself, as if all data were resident
  uint64_t memcpy_h2d_bytes = 0;
  uint64_t memcpy_d2h_bytes = 0;
  uint64_t memcpy_d2d_bytes = 0;
  uint64_t prefetch_calls = 0;
  uint64_t peak_used = 0;
  uint64_t illegal_accesses = 0;
  std::map<std::string, uint64_t> unsupported;
};

// Stream handles with a meaning of their own (cuda.h).
inline const uintptr_t kLegacyStream = reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY);
inline const uintptr_t kPerThreadStream = reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD);

// The most GPUs a simulated node has (MSIM_GPUS).
inline constexpr int kMaxGpus = 16;

class Process {
 public:
  // The instance once cuInit succeeded; nullptr before.
  static Process* Current();
  // Initialises the process (profile, shared device). Idempotent.
  static CUresult Init();

  std::mutex mu;
  SharedDevice* dev = nullptr;
  // The node's GPUs this process sees, by CUDA ordinal: their machine
  // indices (MSIM_GPUS, filtered by CUDA_VISIBLE_DEVICES as the real driver
  // does). The simulator models one GPU per process: `dev` is visible[0]'s,
  // and contexts exist on ordinal 0 only. Fixed by Init.
  std::vector<int> visible;
  std::string init_error;
  Counters counters;
  std::map<uint64_t, Allocation> allocs;  // by base
  std::set<Stream*> streams;
  std::set<Event*> events;
  std::set<Context*> contexts;
  std::set<Module*> modules;
  std::unordered_set<const KernelDecl*> functions;  // valid CUfunction/CUkernel handles
  std::set<Graph*> graphs;
  std::set<PhysicalMem*> physical;            // live, referenced or mapped
  std::map<uint64_t, uint64_t> reservations;  // VMM address ranges (cuMemAddressReserve): base -> size
  // Pools made by cuMemPoolCreate (not the device's default pool), with the
  // handle types their allocations may be exported as.
  std::map<CUmemoryPool, CUmemAllocationHandleType> pools;
  Context primary;
  int primary_refs = 0;
  Stream legacy;
  CUresult sticky_error = CUDA_SUCCESS;  // an illegal access poisons the context
  int capturing = 0;                     // streams now capturing
  uint64_t graph_node_ids = 0;           // the last GraphNode::id given
  uint64_t launch_sequence = 0;

  // REQUIRES: mu. The process's virtual clock.
  uint64_t now() const { return host_now_.load(std::memory_order_relaxed); }
  void Advance(uint64_t ns) { host_now_.fetch_add(ns, std::memory_order_relaxed); }
  void AdvanceTo(uint64_t t) { host_now_.store(std::max(now(), t), std::memory_order_relaxed); }
  // Without mu: a recent value, for the lockstep between processes.
  uint64_t now_relaxed() const { return host_now_.load(std::memory_order_relaxed); }
  // REQUIRES: mu and the device lock. Publishes the clock to the device.
  void PublishClock();

  // The virtual time the last driver call returned (CallScope).
  void NoteCallEnd(uint64_t t) { last_call_end_.store(t, std::memory_order_relaxed); }
  // The shortest time between two firings of the idle alarm in one idle
  // stretch, whatever its period.
  static constexpr uint64_t kMinAlarmRefireNs = 1'000'000;
  // REQUIRES: mu. The idle alarm (msimSetIdleAlarm); idle_ns 0 disarms it.
  void SetIdleAlarm(uint64_t idle_ns, msimIdleAlarmFn fn);
  // REQUIRES: mu. The time at which the idle alarm fires next if the clock
  // is to advance to `t`, or 0 when it does not fire on the way: idle_ns,
  // 2 idle_ns, ... into the idle period, from now on. A time returned counts
  // as fired (the next is idle_ns later).
  uint64_t IdleAlarmDue(uint64_t t);
  msimIdleAlarmFn idle_alarm_fn() const { return idle_alarm_fn_; }

  // REQUIRES: mu. Maps a stream handle to its Stream; `ptsz` says a per-thread
  // entry point was used, which makes handle 0 the per-thread stream.
  Stream* ResolveStream(CUstream s, bool ptsz, CUresult* err);
  // REQUIRES: mu. When an operation on `s` can start; applies the legacy
  // stream's implicit synchronisation and the bounded launch queue.
  uint64_t OpStart(Stream* s);
  // REQUIRES: mu. Records that the operation ends at `end`.
  void OpEnd(Stream* s, uint64_t end);
  // REQUIRES: mu. Completion time of all work in the process.
  uint64_t AllStreamsReady() const;

  // REQUIRES: mu. The allocation containing [p, p+n), or nullptr.
  Allocation* FindAlloc(uint64_t p, uint64_t n = 1);
  // REQUIRES: mu. Whether [p, p+n) is memory a copy or memset may name on
  // the device side: inside one allocation, or VMM mappings laid end to end
  // (the driver's copies cross from one mapping to the next, as PyTorch's
  // expandable segments need). Access is VmmAllows's to check.
  bool DeviceRange(uint64_t p, uint64_t n);
  // REQUIRES: mu. The VMM mappings covering [begin, end) laid end to end,
  // in address order; empty when any byte of it is not mapped.
  std::vector<Allocation*> MappingsCovering(uint64_t begin, uint64_t end);
  // REQUIRES: mu. Whether [p, p+n) may be read (written, when `write`) as
  // far as VMM is concerned: its bytes inside reservations must be mapped
  // with access granted. The simulator checks it before it touches memory
  // itself on the device's behalf (copies, pointers a kernel reads), since
  // such bytes are PROT_NONE in the host.
  bool VmmAllows(uint64_t p, uint64_t n, bool write);
  // REQUIRES: mu. Splits page ranges over managed chunks. False when a range
  // leaves this process's allocations or reaches VMM memory without the
  // access it needs (Allocation::Grants): an illegal address.
  bool Touches(const std::vector<TouchedRange>& ranges, std::vector<ChunkTouch>* out);
  // REQUIRES: mu. Counts a call the simulator does not implement.
  void CountUnsupported(const char* name) { ++counters.unsupported[name]; }
  // REQUIRES: mu. The counters as JSON.
  std::string StatsJson();

  Stream* ThreadStream();

 private:
  std::atomic<uint64_t> host_now_{0};
  std::atomic<uint64_t> last_call_end_{0};
  uint64_t idle_alarm_ns_ = 0;
  msimIdleAlarmFn idle_alarm_fn_ = nullptr;
  uint64_t idle_alarm_fired_for_ = UINT64_MAX;  // the start of the idle period it last fired in
  uint64_t idle_alarm_fired_at_ = 0;            // when it last fired in that period
  std::map<std::thread::id, std::unique_ptr<Stream>> thread_streams_;
};

// The calling thread's current context (nullptr when none).
CUcontext& CurrentContext();

// Reports the simulator's own configuration errors once, on stderr (a driver
// has no other channel before initialisation succeeds).
void ReportError(const std::string& message);
// The device profile MSIM_PROFILE names (rtx5080-pcie5 by default).
bool LoadEnvironmentProfile(DeviceProfile* profile, std::string* error);
// The name of the shared device that stands for machine GPU `machine_gpu`
// (MSIM_DEVICE, suffixed on a node of several GPUs); empty: private devices.
std::string SharedDeviceName(int machine_gpu);
// A value of the environment variable `name` in bytes (0 when unset).
uint64_t EnvBytes(const char* name);

}  // namespace msim

#include "process.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "msched/config.h"

namespace msim {
namespace {

// Launches a stream may queue before the host blocks, like a pushbuffer.
constexpr size_t kQueueDepth = 1024;

Process* g_process = nullptr;
std::once_flag g_init_once;
CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;

void WriteStatsAtExit() {
  Process* p = Process::Current();
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(p->mu);
  if (const char* path = std::getenv("MSIM_STATS")) {
    std::ofstream out(path);
    out << p->StatsJson();
  }
  if (p->dev) {
    // What the process held is freed at its end on the virtual clock, like
    // any call's effect: once every other process has reached that moment.
    // Freed when this process gets there in real time, the memory went back
    // at a moment that varied from run to run, and runs of several jobs
    // under demand paging evicted different bytes (a peer behind on the
    // clock saw HBM free that, in virtual time, was not yet).
    p->dev->WaitForTurnOutsideCall(p->now());
    DeviceLock dl(p->dev);
    p->PublishClock();
    p->dev->ReleaseSlot(p->dev->slot());
  }
}

// The node's GPU count: MSIM_GPUS, 1 to kMaxGpus, else 1.
int NodeGpus() {
  const char* v = std::getenv("MSIM_GPUS");
  if (v == nullptr || *v == '\0') return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxGpus) {
    ReportError(std::string("MSIM_GPUS='") + v + "' must be a GPU count from 1 to " + std::to_string(kMaxGpus) +
                "; modelling 1");
    return 1;
  }
  return static_cast<int>(n);
}

// The machine indices this process sees, by CUDA ordinal. As the real
// driver reads CUDA_VISIBLE_DEVICES: a comma-separated list of indices, cut
// short at the first entry that is not one (not a number, no such GPU, or
// named twice); set but empty, no GPU. GPU UUIDs are not understood here.
std::vector<int> VisibleGpus(int node_gpus) {
  std::vector<int> visible;
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) {
    for (int i = 0; i < node_gpus; ++i) visible.push_back(i);
    return visible;
  }
  std::string list(v);
  for (size_t start = 0; start <= list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = list.substr(start, comma - start);
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    char* end = nullptr;
    const long index = std::strtol(entry.c_str(), &end, 10);
    if (entry.empty() || *end != '\0' || !std::isdigit(static_cast<unsigned char>(entry[0])) || index >= node_gpus ||
        std::find(visible.begin(), visible.end(), index) != visible.end()) {
      break;
    }
    visible.push_back(static_cast<int>(index));
    start = comma + 1;
  }
  return visible;
}

// The process's rank among those sharing the device, for the order of calls
// at equal virtual times: MSIM_RANK, else the pid.
uint64_t Rank() {
  const char* v = std::getenv("MSIM_RANK");
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    const unsigned long long r = std::strtoull(v, &end, 10);
    if (*end == '\0' && v[0] != '-') return r;
    ReportError(std::string("MSIM_RANK='") + v + "' must be a non-negative integer; ranking by pid instead");
  }
  return static_cast<uint64_t>(getpid());
}

void DoInit() {
  auto* p = new Process();  // never destroyed: threads may call the driver during exit
  RegisterBuiltinHostKernels();
  DeviceProfile profile;
  std::string error;
  if (!LoadEnvironmentProfile(&profile, &error)) {
    ReportError(error);
    g_init_result = CUDA_ERROR_NO_DEVICE;
    return;
  }
  const int node_gpus = NodeGpus();
  p->visible = VisibleGpus(node_gpus);
  if (p->visible.empty()) {
    ReportError("CUDA_VISIBLE_DEVICES leaves no GPU of the " + std::to_string(node_gpus) + " modelled");
    g_init_result = CUDA_ERROR_NO_DEVICE;
    return;
  }
  const uint64_t hbm = EnvBytes("MSIM_HBM_BYTES");
  const std::string device = SharedDeviceName(p->visible[0]);
  p->dev = SharedDevice::Attach(device, profile, hbm, Rank(), &error);
  if (p->dev == nullptr) {
    ReportError(error);
    g_init_result = CUDA_ERROR_NO_DEVICE;
    return;
  }
  // A shared device keeps the size it was made with (its first process's);
  // a later process asking for another is told, not silently given it.
  if (hbm != 0 && p->dev->capacity() != hbm) {
    ReportError("MSIM_HBM_BYTES asks for " + std::to_string(hbm) + " bytes, but the shared device " + device +
                " already exists with " + std::to_string(p->dev->capacity()) +
                ": it keeps its size (remove /dev/shm/msim-" + device + " when no process uses it, to make it anew)");
  }
  if (const char* group = std::getenv("MSIM_START_BARRIER")) {
    const long n = std::strtol(group, nullptr, 10);
    if (n > 1 && n <= kMaxProcs)
      p->dev->ArriveAndWait(static_cast<uint32_t>(n), 60000);
    else
      ReportError(std::string("MSIM_START_BARRIER='") + group + "' must be a process count from 2 to 64; ignored");
  }
  {
    DeviceLock dl(p->dev);
    p->AdvanceTo(p->dev->device_now());
  }
  g_process = p;
  std::atexit(WriteStatsAtExit);
  g_init_result = CUDA_SUCCESS;
}

}  // namespace

void ReportError(const std::string& message) { std::fprintf(stderr, "msim: %s\n", message.c_str()); }

uint64_t EnvBytes(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  const msched::Result<uint64_t> n = msched::ParseBytes(v);
  if (!n.ok() || *n < (1ull << 20)) {
    ReportError(std::string(name) + "='" + v + "' must be a size of at least 1 MiB, such as 64MiB or 16GiB (" +
                (n.ok() ? "it is smaller" : n.status().message()) + "); ignored");
    return 0;
  }
  return *n;
}

bool LoadEnvironmentProfile(DeviceProfile* profile, std::string* error) {
  const char* name = std::getenv("MSIM_PROFILE");
  if (LoadDeviceProfile(name ? name : "rtx5080-pcie5", profile, error)) return true;
  *error = "cannot load the device profile: " + *error;
  return false;
}

std::string SharedDeviceName(int machine_gpu) {
  // Each GPU of a node of several is its own shared device, named by its
  // machine index; a node of one keeps the plain name.
  std::string name = std::getenv("MSIM_DEVICE") ? std::getenv("MSIM_DEVICE") : "";
  if (!name.empty() && NodeGpus() > 1) name += ".gpu" + std::to_string(machine_gpu);
  return name;
}

Process* Process::Current() { return g_process; }

CUresult Process::Init() {
  std::call_once(g_init_once, DoInit);
  return g_init_result;
}

CUcontext& CurrentContext() {
  static thread_local CUcontext current = nullptr;
  return current;
}

void Process::PublishClock() {
  dev->PublishHostTime(now());  // a moved clock may end a peer's wait (msimAdvanceTo's, outside any call)
  dev->device_now() = std::max(dev->device_now(), now());
  counters.peak_used = std::max(counters.peak_used, dev->used());
}

Stream* Process::ThreadStream() {
  std::unique_ptr<Stream>& s = thread_streams_[std::this_thread::get_id()];
  if (!s) s = std::make_unique<Stream>();
  return s.get();
}

Stream* Process::ResolveStream(CUstream s, bool ptsz, CUresult* err) {
  const auto h = reinterpret_cast<uintptr_t>(s);
  if (h == 0) return ptsz ? ThreadStream() : &legacy;
  if (h == kLegacyStream) return &legacy;
  if (h == kPerThreadStream) return ThreadStream();
  auto* st = reinterpret_cast<Stream*>(s);
  if (!streams.count(st)) {
    *err = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  return st;
}

void Process::SetIdleAlarm(uint64_t idle_ns, msimIdleAlarmFn fn) {
  idle_alarm_ns_ = fn != nullptr ? idle_ns : 0;
  idle_alarm_fn_ = idle_alarm_ns_ != 0 ? fn : nullptr;
  idle_alarm_fired_for_ = UINT64_MAX;
  idle_alarm_fired_at_ = 0;
}

uint64_t Process::IdleAlarmDue(uint64_t t) {
  if (idle_alarm_ns_ == 0) return 0;
  const ProcSlot& me = dev->proc(dev->slot());
  if (__atomic_load_n(&me.in_call, __ATOMIC_RELAXED) > 0) return 0;  // another thread is in a driver call
  const uint64_t idle_from = std::max(last_call_end_.load(std::memory_order_relaxed), AllStreamsReady());
  const uint64_t after = idle_from == idle_alarm_fired_for_ ? idle_alarm_fired_at_ : idle_from;
  // Only on the way from now to t: points the clock passed otherwise (a
  // driver call that waited, the alarm's own work) are skipped.
  const uint64_t from = std::max(after + 1, now());
  if (idle_alarm_ns_ > UINT64_MAX - idle_from) return 0;  // beyond the clock's range
  const uint64_t first = idle_from + idle_alarm_ns_;
  uint64_t due = first;
  if (from > first) {
    // Later looks come every idle_ns, but never more often than a timer
    // thread could wake (kMinAlarmRefireNs): the host's cost of a long idle
    // stretch is bounded by its virtual length over that, not over idle_ns
    // (a 1 ns alarm once fired a billion times a virtual second).
    const uint64_t period = std::max(idle_alarm_ns_, kMinAlarmRefireNs);
    const uint64_t into = from - first;
    const uint64_t periods = into / period + (into % period != 0);
    if (periods > (UINT64_MAX - first) / period) return 0;  // beyond the clock's range
    due = first + periods * period;
  }
  if (due > t) return 0;
  idle_alarm_fired_for_ = idle_from;
  idle_alarm_fired_at_ = due;
  return due;
}

uint64_t Process::AllStreamsReady() const {
  uint64_t t = legacy.ready;
  for (Stream* s : streams) t = std::max(t, s->ready);
  for (const auto& [id, s] : thread_streams_) t = std::max(t, s->ready);
  return t;
}

uint64_t Process::OpStart(Stream* s) {
  if (s->inflight.size() >= kQueueDepth) {  // the host blocks until the oldest completes
    AdvanceTo(s->inflight.front());
    s->inflight.pop_front();
  }
  while (!s->inflight.empty() && s->inflight.front() <= now()) s->inflight.pop_front();
  uint64_t start = std::max(now(), s->ready);
  // The legacy stream waits for all blocking streams, and they wait for it.
  if (s == &legacy) {
    for (Stream* other : streams) {
      if (!(other->flags & CU_STREAM_NON_BLOCKING)) start = std::max(start, other->ready);
    }
    for (const auto& [id, other] : thread_streams_) start = std::max(start, other->ready);
  } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
    start = std::max(start, legacy.ready);
  }
  return start;
}

void Process::OpEnd(Stream* s, uint64_t end) {
  s->ready = std::max(s->ready, end);
  s->inflight.push_back(s->ready);
}

Allocation* Process::FindAlloc(uint64_t p, uint64_t n) {
  auto it = allocs.upper_bound(p);
  if (it == allocs.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (p < a.base || p - a.base >= a.size || n > a.size - (p - a.base)) return nullptr;
  return &a;
}

bool Process::DeviceRange(uint64_t p, uint64_t n) {
  if (FindAlloc(p, n) != nullptr) return true;
  const Allocation* first = FindAlloc(p);
  return first != nullptr && first->type == AllocType::kVmmMapped && n <= UINT64_MAX - p &&
         !MappingsCovering(p, p + n).empty();
}

bool Allocation::Grants(uint64_t begin, uint64_t end, bool write) const {
  if (type != AllocType::kVmmMapped) return true;
  for (uint64_t g = (begin - base) / kChunk; g * kChunk < end - base; ++g) {
    if (access[g] != CU_MEM_ACCESS_FLAGS_PROT_READWRITE && (write || access[g] != CU_MEM_ACCESS_FLAGS_PROT_READ)) {
      return false;
    }
  }
  return true;
}

std::vector<Allocation*> Process::MappingsCovering(uint64_t begin, uint64_t end) {
  std::vector<Allocation*> mappings;
  for (uint64_t q = begin; q < end;) {
    Allocation* a = FindAlloc(q);
    if (a == nullptr || a->type != AllocType::kVmmMapped) return {};
    mappings.push_back(a);
    q = a->base + a->size;
  }
  return mappings;
}

bool Process::VmmAllows(uint64_t p, uint64_t n, bool write) {
  if (n == 0) return true;
  const uint64_t end = n > UINT64_MAX - p ? UINT64_MAX : p + n;
  auto r = reservations.upper_bound(p);
  if (r != reservations.begin() && std::prev(r)->first + std::prev(r)->second > p) --r;
  for (; r != reservations.end() && r->first < end; ++r) {
    const uint64_t begin = std::max(p, r->first);
    const uint64_t stop = std::min(end, r->first + r->second);
    const std::vector<Allocation*> mappings = MappingsCovering(begin, stop);
    if (mappings.empty()) return false;
    for (const Allocation* a : mappings) {
      if (!a->Grants(std::max(begin, a->base), std::min(stop, a->base + a->size), write)) return false;
    }
  }
  return true;
}

bool Process::Touches(const std::vector<TouchedRange>& ranges, std::vector<ChunkTouch>* out) {
  for (const TouchedRange& r : ranges) {
    uint64_t p = r.begin;
    while (p < r.end) {
      auto it = allocs.upper_bound(p);
      if (it == allocs.begin()) return false;
      --it;
      Allocation& a = it->second;
      // Page rounding may reach past an allocation's last byte but never
      // past its last page.
      const uint64_t alloc_end = (a.base + a.size + kPage - 1) & ~(kPage - 1);
      if (p < a.base || p >= alloc_end) return false;
      const uint64_t end = std::min(r.end, alloc_end);
      if (!a.Grants(p, end, (r.mode & 2) != 0)) return false;
      if (a.type == AllocType::kManaged) {
        for (uint64_t q = p; q < end;) {
          const uint64_t block = (q - a.base) / kChunk;
          const uint64_t block_end = std::min(end, a.base + (block + 1) * kChunk);
          const uint32_t u0 = static_cast<uint32_t>((q - a.base - block * kChunk) / kUnit);
          const uint32_t u1 = static_cast<uint32_t>((block_end - 1 - a.base - block * kChunk) / kUnit);
          const uint32_t units = (u1 - u0 == 31) ? ~0u : ((1u << (u1 - u0 + 1)) - 1) << u0;
          const uint32_t written = (r.mode & 2) ? units : 0;
          if (!out->empty() && out->back().idx == a.chunks[block]) {
            out->back().units |= units;
            out->back().written |= written;
          } else {
            out->push_back({a.chunks[block], units, written});
          }
          q = block_end;
        }
      }
      p = end;
    }
  }
  return true;
}

std::string Process::StatsJson() {
  nlohmann::json j;
  const Counters& c = counters;
  j["virtual_time_ns"] = now();
  j["all_work_done_ns"] = AllStreamsReady();
  j["kernel_ns"] = c.kernel_ns;
  j["compute_ns"] = c.compute_ns;
  j["launches"] = c.launches;
  j["faults"] = c.faults;
  j["fault_batches"] = c.fault_batches;
  j["fault_stall_ns"] = c.fault_stall_ns;
  j["bytes"]["h2d"] = {
      {"fault", c.fault_h2d_bytes}, {"prefetch", c.prefetch_h2d_bytes}, {"memcpy", c.memcpy_h2d_bytes}};
  j["bytes"]["d2h"] = {
      {"eviction", c.evict_d2h_bytes}, {"prefetch", c.prefetch_d2h_bytes}, {"memcpy", c.memcpy_d2h_bytes}};
  j["bytes"]["d2d_memcpy"] = c.memcpy_d2d_bytes;
  j["bytes"]["remote"] = c.remote_bytes;
  j["bytes"]["discarded"] = c.discarded_bytes;
  j["bytes"]["first_touch"] = c.first_touch_bytes;
  // Of the bytes copied out (eviction and prefetch), those with no host
  // pages yet, at the first eviction's rate; and the read duplicates whose
  // device copies were dropped rather than copied.
  j["bytes"]["first_eviction"] = c.first_eviction_bytes;
  j["bytes"]["duplicate_dropped"] = c.duplicate_dropped_bytes;
  j["collapses"] = c.collapses;
  j["evictions"] = c.evictions;
  j["prefetch_calls"] = c.prefetch_calls;
  j["peak_used_bytes"] = c.peak_used;
  j["illegal_accesses"] = c.illegal_accesses;
  if (dev) {
    j["device"] = {{"profile", dev->profile().name}, {"hbm_bytes", dev->capacity()}};
  }
  nlohmann::json unsupported = nlohmann::json::object();
  for (const auto& [name, n] : c.unsupported) unsupported[name] = n;
  j["unsupported_calls"] = unsupported;
  return j.dump(2) + "\n";
}

}  // namespace msim

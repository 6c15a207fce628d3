#include "observe/cupti_faults.h"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

#include "base/mutex.h"
#include "base/thread_annotations.h"

#include "msched/no_destructor.h"

namespace msched::hook {
namespace {

struct Cupti {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiActivityConfigureUnifiedMemoryCounter) configure = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityFlushAll) flush = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
};

struct Record {
  uint64_t start;
  TouchedRange range;
};

// What CUPTI's buffers delivered and no launch has collected yet. Never
// destroyed: CUPTI may deliver a buffer during exit.
struct Delivered {
  Mutex mu;
  std::vector<Record> records MSCHED_GUARDED_BY(mu);
};
Delivered& Pending() {
  static NoDestructor<Delivered> d;
  return *d;
}
Cupti g_api;

void CUPTIAPI NoCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer ? kBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  Delivered& d = Pending();
  MutexLock lock(&d.mu);
  while (g_api.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) continue;
    const auto* um = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
    if (um->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT) {
      // An atomic, or a fault of no known type, may write.
      const AccessMode mode = um->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE ? AccessMode::kWrite
                              : um->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ ||
                                      um->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_PREFETCH
                                  ? AccessMode::kRead
                                  : AccessMode::kReadWrite;
      d.records.push_back({um->start, {{um->address & ~uint64_t{4095}, (um->address & ~uint64_t{4095}) + 4096}, mode}});
    } else if (um->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD && um->value > 0) {
      // A migration says nothing of writes: touched, read at least.
      d.records.push_back({um->start, {{um->address, um->address + um->value}, AccessMode::kRead}});
    }
  }
  std::free(buffer);
}

bool Load(std::string* why) {
  void* lib = nullptr;
  for (const char* name : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  }
  if (lib == nullptr) {
    *why = "CUPTI (libcupti.so.13) cannot be loaded; add its directory to LD_LIBRARY_PATH";
    return false;
  }
  auto sym = [lib](const char* n) { return dlsym(lib, n); };
  g_api.subscribe = reinterpret_cast<decltype(g_api.subscribe)>(sym("cuptiSubscribe"));
  g_api.configure = reinterpret_cast<decltype(g_api.configure)>(sym("cuptiActivityConfigureUnifiedMemoryCounter"));
  g_api.enable = reinterpret_cast<decltype(g_api.enable)>(sym("cuptiActivityEnable"));
  g_api.register_callbacks =
      reinterpret_cast<decltype(g_api.register_callbacks)>(sym("cuptiActivityRegisterCallbacks"));
  g_api.next_record = reinterpret_cast<decltype(g_api.next_record)>(sym("cuptiActivityGetNextRecord"));
  g_api.flush = reinterpret_cast<decltype(g_api.flush)>(sym("cuptiActivityFlushAll"));
  g_api.timestamp = reinterpret_cast<decltype(g_api.timestamp)>(sym("cuptiGetTimestamp"));
  if (!g_api.subscribe || !g_api.configure || !g_api.enable || !g_api.register_callbacks || !g_api.next_record ||
      !g_api.flush || !g_api.timestamp) {
    *why = "this CUPTI lacks the unified-memory activity API";
    return false;
  }
  return true;
}

}  // namespace

CuptiFaults* CuptiFaults::Start(std::string* why) {
  if (!Load(why)) return nullptr;
  CUpti_SubscriberHandle subscriber;
  const CUptiResult sub = g_api.subscribe(&subscriber, NoCallback, nullptr);
  if (sub == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    *why = "CUPTI is already in use by another tool (Nsight, cuda-gdb, a framework profiler)";
    return nullptr;
  }
  CUpti_ActivityUnifiedMemoryCounterConfig config[2] = {};
  config[0].kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
  config[1].kind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
  config[0].enable = config[1].enable = 1;
  if (g_api.configure(config, 2) != CUPTI_SUCCESS) {
    *why = "CUPTI cannot record unified-memory faults on this device or system";
    return nullptr;
  }
  if (g_api.register_callbacks(BufferRequested, BufferCompleted) != CUPTI_SUCCESS ||
      g_api.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) != CUPTI_SUCCESS) {
    *why = "CUPTI refused to enable unified-memory activity records";
    return nullptr;
  }
  static NoDestructor<CuptiFaults> instance;
  return instance.get();
}

uint64_t CuptiFaults::Now() {
  uint64_t t = 0;
  g_api.timestamp(&t);
  return t;
}

std::vector<TouchedRange> CuptiFaults::Collect(uint64_t t0, uint64_t t1) {
  g_api.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<TouchedRange> out;
  Delivered& d = Pending();
  MutexLock lock(&d.mu);
  for (const Record& r : d.records) {
    if (r.start >= t0 && r.start <= t1) out.push_back(r.range);
  }
  d.records.clear();
  return out;
}

}  // namespace msched::hook

// Driver API: cuGetProcAddress (both ABIs) with version and per-thread-stream
// flag semantics, and msched's device environment through it
// (msched/device_env.h); error names and strings, counting of unimplemented
// calls, and msimCallCount (fault_injection.h keeps the counts).
#include <cstring>

#include "api.h"
#include "fault_injection.h"
#include "msched/device_env.h"
#include "proc_table.h"

using msim::ProcEntry;
using msim::Process;

namespace msim {

int Unsupported(const char* name) {
  if (const int injected = InjectedFault(name)) return injected;
  if (Process* p = Process::Current()) {
    std::lock_guard<std::mutex> lock(p->mu);
    p->CountUnsupported(name);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace msim

namespace {

struct ErrorName {
  CUresult value;
  const char* name;
};

#define MSIM_STUB(sym)
#define MSIM_ENTRY(base, version, flavour, sym)
#define MSIM_ERROR(name, value) {static_cast<CUresult>(value), #name},
const ErrorName kErrors[] = {
#include "cuda_entries_sim.inc"
};

}  // namespace

bool msim::ErrorByName(std::string_view name, int* value) {
  for (const ErrorName& n : kErrors) {
    if (name == n.name) {
      *value = static_cast<int>(n.value);
      return true;
    }
  }
  return false;
}

namespace {

const char* FindErrorName(CUresult e) {
  for (const ErrorName& n : kErrors) {
    if (n.value == e) return n.name;
  }
  return nullptr;
}

// The entry for `symbol`: the highest ABI version <= cudaVersion, preferring
// the per-thread flavour when the flags ask for it and one exists.
CUresult Lookup(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (cuda_version > CUDA_VERSION) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (std::strcmp(symbol, MSCHED_DEVICE_ENV_SYMBOL) == 0) {  // msched's seam, any version
    *pfn = msim::DeviceEnvEntry();
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  CUdriverProcAddressQueryResult result = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  size_t n = 0;
  const ProcEntry* entries = msim::ProcEntries(&n);
  const ProcEntry* best = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const ProcEntry& e = entries[i];
    if (std::strcmp(e.base, symbol) != 0) continue;
    if (e.version > cuda_version) {
      if (result == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) result = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      continue;
    }
    if (e.flavour != 0 && !per_thread) continue;
    // Higher version wins; at equal version a per-thread flavour wins when asked for.
    if (best == nullptr || e.version > best->version || (e.version == best->version && e.flavour != 0)) best = &e;
  }
  if (best != nullptr) {
    *pfn = best->fn;
    result = CU_GET_PROC_ADDRESS_SUCCESS;
  }
  if (status) *status = result;
  return CUDA_SUCCESS;
}

}  // namespace

MSIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  if (const int injected = msim::InjectedFault(__func__)) return static_cast<CUresult>(injected);
  return Lookup(symbol, pfn, cuda_version, flags, status);
}

MSIM_DECLARE(cuGetProcAddress, PFN_cuGetProcAddress_v11030);
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  if (const int injected = msim::InjectedFault(__func__)) return static_cast<CUresult>(injected);
  return Lookup(symbol, pfn, cuda_version, flags, nullptr);
}

MSIM_EXPORT CUresult msimCallCount(const char* name, uint64_t* count) {
  if (name == nullptr || count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return msim::CallCount(name, count) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

MSIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = FindErrorName(error);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

MSIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *str = "no error"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *str = "out of memory"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_SUPPORTED: *str = "operation not supported (by the simulated driver)"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *str = "an illegal memory access was encountered"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *str = "invalid argument"; return CUDA_SUCCESS;
    default: break;
  }
  *str = FindErrorName(error);  // the name is the best text for the rest
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

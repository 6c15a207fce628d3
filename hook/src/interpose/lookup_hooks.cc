// cuGetProcAddress (both ABIs). How cudart 12+/13, cuBLAS, cuDNN, NCCL and
// PyTorch reach the driver: they dlopen libcuda.so.1, dlsym one
// cuGetProcAddress_v2, then ask it for every entry point by base name, ABI
// version and stream flag. The real function answers first, with its own
// return code and status; a non-null answer that is one of the hooked real
// functions is replaced by msched's wrapper for exactly that function. The
// lookup of cuGetProcAddress itself is therefore answered with msched's
// wrapper too, or cudart would bypass the hook after its third request.
#include <cstring>

#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "interpose/real_driver.h"

namespace msched::hook {
namespace {

// When the driver hands out a pointer that is not one of its exported
// symbols, the entry is chosen as the driver would: the highest hooked ABI
// version <= `version`, of the per-thread flavour if the flags ask for it.
// Sound because the hooked versions of a family are always its newest (the
// generator checks).
bool EntryByRule(const char* symbol, int version, cuuint64_t flags, Entry* out) {
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  bool found = false;
  int best_version = -1, best_flavour = -1;
  for (size_t i = 0; i < kEntryCount; ++i) {
    const EntryInfo& info = Info(static_cast<Entry>(i));
    if (std::strcmp(info.base, symbol) != 0 || info.version > version) continue;
    if (info.flavour != 0 && !per_thread) continue;
    if (info.version > best_version || (info.version == best_version && info.flavour > best_flavour)) {
      best_version = info.version;
      best_flavour = info.flavour;
      *out = static_cast<Entry>(i);
      found = true;
    }
  }
  return found;
}

void Substitute(Runtime& rt, const char* symbol, void** pfn, int version, cuuint64_t flags) {
  rt.counters().lookups_proc_address->Add();
  if (symbol == nullptr || pfn == nullptr || *pfn == nullptr) return;
  Entry e;
  if (!EntryOfReal(*pfn, &e)) {
    if (!EntryByRule(symbol, version, flags, &e)) return;
    NoteRealPointer(e, *pfn);
  }
  *pfn = WrapperOf(e);
  rt.counters().lookups_proc_address_hooked->Add();
}

}  // namespace

CUresult Hook_cuGetProcAddress(Entry e, const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto c = Enter<PFN_cuGetProcAddress_v11030>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && c.rt && !HookScope::Active()) {
    Safely(*c.rt, "cuGetProcAddress", [&] { Substitute(*c.rt, symbol, pfn, version, flags); });
  }
  return r;
}

CUresult Hook_cuGetProcAddress(Entry e, const char* symbol, void** pfn, int version, cuuint64_t flags,
                               CUdriverProcAddressQueryResult* status) {
  auto c = Enter<PFN_cuGetProcAddress_v12000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && c.rt && !HookScope::Active()) {
    Safely(*c.rt, "cuGetProcAddress", [&] { Substitute(*c.rt, symbol, pfn, version, flags); });
  }
  return r;
}

CUresult NoRealFunction(Entry e) noexcept {
  if (RealDriverHandle() == nullptr) return CUDA_ERROR_NO_DEVICE;
  try {
    LogOnce(std::string("missing:") + Info(e).symbol, spdlog::level::err,
            std::string("the driver has no ") + Info(e).symbol + "; the call fails with CUDA_ERROR_NOT_SUPPORTED");
  } catch (...) {
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace msched::hook

// The exported entry points: one C function per hooked ABI variant, named
// exactly as the driver exports it (cuLaunchKernel_ptsz, cuMemAlloc_v2...),
// generated from hook_entries.inc. Each passes its Entry to its family's hook.
// A program linked with -lcuda binds to these (libmsched is preloaded); dlsym
// and cuGetProcAddress lookups are redirected to them.
#include <cuda.h>

#include "interpose/hooks.h"

#define MSCHED_UNPAREN(...) __VA_ARGS__
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail)         \
  extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI sym params {   \
    return msched::hook::Hook_##base(msched::hook::Entry::sym MSCHED_UNPAREN tail); \
  }
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY

namespace msched::hook {

namespace {
void* const kWrappers[] = {
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail) reinterpret_cast<void*>(&::sym),
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY
};
}  // namespace

void* WrapperOf(Entry e) { return kWrappers[static_cast<size_t>(e)]; }

}  // namespace msched::hook

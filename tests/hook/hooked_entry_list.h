// The entry points libmsched.so interposes, as its generated table lists
// them, for the checks that must cover every one (entry_check, the fault
// injection test): a newly hooked call is covered without touching them.
#pragma once

struct HookedEntry {
  const char* symbol;  // the exported name, e.g. cuMemAlloc_v2
  const char* base;    // the name cuGetProcAddress takes, e.g. cuMemAlloc
  int version;         // the CUDA version cuGetProcAddress asks for
  int flavour;         // default, per-thread default stream, ...
};

inline constexpr HookedEntry kHookedEntries[] = {
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail) {#sym, #base, ver, flavour},
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY
};

// The hooked entry points, one per ABI variant, generated at build time from
// hook/hooked_entry_points.txt and the CUDA headers: their ids, names, ABI
// versions and stream flavours, the real driver's function behind each, and
// the mapping from a real function pointer back to its entry (wrappers are
// chosen by the pointer the driver returns, never by name alone).
// Thread-safe: slots are filled once under a lock and read with acquire.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "hook_undefs.inc"  // hooked names are used verbatim: undo cuda.h's renaming

#include <atomic>
#include <cstdint>

namespace msched::hook {

enum class Entry : uint16_t {
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail) sym,
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY
  kCount
};
inline constexpr size_t kEntryCount = static_cast<size_t>(Entry::kCount);

struct EntryInfo {
  const char* symbol;  // exported name, e.g. "cuLaunchKernel_ptsz"
  const char* base;    // cuGetProcAddress name, e.g. "cuLaunchKernel"
  int version;         // ABI version (cudaVersion it is handed out from)
  int flavour;         // 0 default, 1 _ptsz, 2 _ptds
};
const EntryInfo& Info(Entry e);

// The address of libmsched's exported wrapper for `e`.
void* WrapperOf(Entry e);

// The real driver's function for `e`, loading the driver if needed; nullptr
// when the driver lacks it.
void* RealOf(Entry e);
template <typename Fn>
Fn Real(Entry e) {
  return reinterpret_cast<Fn>(RealOf(e));
}

// The entry whose real function is `fn`, if `fn` is one of them.
bool EntryOfReal(void* fn, Entry* out);
// Records that the driver handed out `fn` for `e` (cuGetProcAddress may
// return other addresses than the exported symbols).
void NoteRealPointer(Entry e, void* fn);
// The entry exported under `symbol`, if any.
bool EntryOfSymbol(const char* symbol, Entry* out);

}  // namespace msched::hook

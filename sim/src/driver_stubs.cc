// Weak definitions of every exported driver symbol, each returning
// CUDA_ERROR_NOT_SUPPORTED and counting the call, so that any driver-API
// program loads and fails clearly instead of on an undefined symbol. The real
// definitions in the other driver_*.cc files override them at link time.
// This file must not include cuda.h: the stubs take no declared parameters.
#include "proc_table.h"

#define MSIM_STUB(sym) \
  extern "C" __attribute__((weak, visibility("default"))) int sym() { return msim::Unsupported(#sym); }
#define MSIM_ENTRY(base, version, flavour, sym)
#define MSIM_ERROR(name, value)
#include "cuda_entries_sim.inc"
#undef MSIM_STUB
#undef MSIM_ENTRY

namespace msim {
namespace {

#define MSIM_STUB(sym)
#define MSIM_ENTRY(base, version, flavour, sym) {base, version, flavour, reinterpret_cast<void*>(&sym)},
const ProcEntry kEntries[] = {
#include "cuda_entries_sim.inc"
};

}  // namespace

const ProcEntry* ProcEntries(size_t* count) {
  *count = sizeof kEntries / sizeof kEntries[0];
  return kEntries;
}

}  // namespace msim

// Every hooked ABI variant, asked for through cuGetProcAddress_v2 by base
// name, ABI version and stream flag (as cudart asks), must come back as
// libmsched's wrapper for exactly that variant. The list is the generated
// table itself, so a family added to hooked_entry_points.txt is checked too.
// Prints one line per failure; exit status 0 when all resolve.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "hook_undefs.inc"
#include "hooked_entry_list.h"

int main() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto lookup = h ? reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2")) : nullptr;
  if (lookup == nullptr) {
    std::fprintf(stderr, "entry_check: no driver\n");
    return 1;
  }
  int failures = 0, checked = 0;
  for (const HookedEntry& e : kHookedEntries) {
    void* fn = nullptr;
    const cuuint64_t flags = e.flavour ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    CUdriverProcAddressQueryResult status;
    if (lookup(e.base, &fn, e.version, flags, &status) != CUDA_SUCCESS || fn == nullptr) {
      std::printf("%s@%d: not resolved\n", e.base, e.version);
      ++failures;
      continue;
    }
    Dl_info info{};
    const bool ok = dladdr(fn, &info) && info.dli_fname && std::strstr(info.dli_fname, "libmsched.so") &&
                    info.dli_sname && std::strcmp(info.dli_sname, e.symbol) == 0;
    if (!ok) {
      std::printf("%s@%d flavour %d: resolved to %s:%s, expected libmsched.so:%s\n", e.base, e.version, e.flavour,
                  info.dli_fname ? info.dli_fname : "?", info.dli_sname ? info.dli_sname : "?", e.symbol);
      ++failures;
    }
    ++checked;
  }
  std::printf("checked %d entries, %d failures\n", checked, failures);
  return failures == 0 ? 0 : 1;
}

// The interposed dlsym (reached through dlsym_entry.S). cudart, cuBLAS,
// cuDNN, NCCL and Triton open the driver with dlopen and look names up with
// dlsym on its handle, which never sees an LD_PRELOAD library's exports. So
// dlsym itself is interposed: when the answer is one of the real driver's
// hooked functions, msched's wrapper is returned instead. Lookups made by
// the driver itself, and every other name, are answered untouched. No CUDA
// call is made here: only dlsym of the already loaded driver.
#include "interpose/entry_table.h"
#include "interpose/real_driver.h"
#include "job/runtime.h"

extern "C" __attribute__((visibility("hidden"))) void* msched_dlsym_impl(void* handle, const char* name) {
  using namespace msched::hook;
  void* result = RealDlsym(handle, name);
  if (result == nullptr || name == nullptr || name[0] != 'c' || name[1] != 'u') return result;
  Entry e;
  if (!EntryOfSymbol(name, &e)) return result;
  // The stub tail-jumped here, so this is the original caller's address.
  if (InsideRealDriver(__builtin_return_address(0))) return result;
  void* driver = LoadedDriverHandle();
  if (driver == nullptr || RealDlsym(driver, name) != result) return result;  // not the driver's function
  try {
    Runtime::Get().counters().lookups_dlsym->Add();
  } catch (...) {
  }
  return WrapperOf(e);
}

// The real driver behind the hook: loaded lazily as MSCHED_REAL_LIBCUDA
// (default libcuda.so.1; the simulator answers to that name too), never from
// a constructor and never through a CUDA call. Also the real dlsym, resolved
// at load time with dlvsym so that libmsched's own lookups never go through
// its interposed dlsym. Thread-safe.
#pragma once

namespace msched::hook {

// glibc's dlsym (GLIBC_2.34, else GLIBC_2.2.5). Never the interposed one.
void* RealDlsym(void* handle, const char* name);
// The real driver's handle, loading it on first use; nullptr if it cannot be
// loaded (the reason is logged once).
void* RealDriverHandle();
// The real driver's handle only if it is already loaded (no loading: safe
// inside dlsym).
void* LoadedDriverHandle();
// True when `address` lies inside the real driver's code.
bool InsideRealDriver(const void* address);
// The driver functions msched calls itself are typed in driver_functions.h.

}  // namespace msched::hook

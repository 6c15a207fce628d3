// The real driver functions libmsched calls on its own behalf (to create its
// transfer stream, fence pool frees, name kernels, find the device
// environment a driver offers),
// as one typed table: RealDriver().cuEventRecord(ev, stream). The CUDA ones
// are generated at build time from hook/called_driver_functions.txt and the
// CUDA headers, each slot typed by the headers' PFN_<base>_v<version>; a
// hooked one (cuCtxSynchronize) is the entry table's real function, never
// libmsched's wrapper. A slot is null when the driver lacks the function (or
// cannot be loaded): callers check before calling. Resolved once, on first
// use, from the real driver's handle; thread-safe; never destroyed.
// Used by hook/ only.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "interpose/entry_table.h"  // and the #undefs of names cuda.h renames
#include "msched/status.h"

namespace msched::hook {

struct DriverFunctions {
#define MSCHED_DRIVER_FUNCTION(sym, base, ver, pfn) pfn sym = nullptr;
#define MSCHED_DRIVER_FUNCTION_HOOKED(sym, base, ver, pfn) pfn sym = nullptr;
#include "driver_functions.inc"
#undef MSCHED_DRIVER_FUNCTION
#undef MSCHED_DRIVER_FUNCTION_HOOKED
};

// The table, resolving it on first use (loading the driver if needed).
const DriverFunctions& RealDriver();

// OK for CUDA_SUCCESS, else an error saying that `what` failed and with
// which CUresult: how the hook's own driver calls report failure.
// ResourceExhausted for CUDA_ERROR_OUT_OF_MEMORY (a caller may wait for
// memory and try again), Unavailable for the rest.
Status CheckDriverCall(CUresult r, const char* what);

}  // namespace msched::hook

// Fault injection (MSIM_FAIL): makes chosen driver calls fail with a chosen
// CUresult on their Nth call in this process, or on every call from the Nth
// on, so that tests can drive an interposer through driver failures. It is
// asked first by the one path the entry points share (msim::Call), by the
// unimplemented stubs and by cuGetProcAddress, so an injected failure has no
// side effect. Thread-safe. Used by sim/ only; cuda.h-free.
#pragma once

#include <cstdint>
#include <string_view>

namespace msim {

// Counts a call to entry point `entry` (an exported name, "cuMemcpyHtoD_v2_ptds",
// counted under its base name, "cuMemcpyHtoD") and returns the CUresult it
// must fail with, or 0 to let it run. Reads MSIM_FAIL on first use; a
// malformed value is reported once on stderr and injects nothing.
int InjectedFault(const char* entry) noexcept;

// Calls counted so far under `name`'s base name; false when `name` is not a
// driver entry point.
bool CallCount(const char* name, uint64_t* count) noexcept;

// The base name of an exported entry point: without the per-thread suffix
// (_ptsz, _ptds) and then without the ABI suffix (_v2, _v3...).
std::string_view BaseName(std::string_view symbol);

}  // namespace msim

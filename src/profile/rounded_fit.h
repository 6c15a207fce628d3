// Fitting a kernel's regions to CUPTI's touched ranges (a trace whose
// precision is above one byte). Those ranges are the driver's migrations, not
// the kernel's accesses: whole 64 KiB pages, and what the driver's prefetcher
// added within each 2 MiB block, so a touched range is a superset of what the
// kernel read or wrote. Every region therefore starts at its pointer, and its
// extent is fitted so that it reaches into the last 2 MiB block the touched
// bytes above the pointer reach (no block missed) and not past their end (no
// byte beyond what migrated). Among the rules that do, the one closest to the
// migrated pages wins, then a rule over argument words before a constant (a
// size word that held one value in the profile still extrapolates to other
// sizes), then fewer factors, then a whole-number coefficient. Products of
// four words (a convolution's filter) are tried only for a base that
// nothing simpler explains. A base whose extent no rule explains (a
// data-dependent length) gets a region to the end of its allocation, the
// fallback's rule, so that its kernel's other regions are still predicted
// exactly.
// Pure functions; thread-safe. Used by template_fitter.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "profile/template_fitter.h"

namespace msched {

// Fits every base of `obs` (one kernel's observations, from a rounded
// trace); `fit` arrives with name, layout, calls and latency set.
KernelFit FitRoundedKernel(const std::vector<const Observation*>& obs, uint64_t precision, KernelFit fit);

}  // namespace msched

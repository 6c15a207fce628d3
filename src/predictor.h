// Predicting one launch's working set: from its template when there is one,
// or at allocation granularity (every managed allocation an argument word
// points into, the MSched paper's naive baseline). Runs on the launch hot
// path; allocates nothing once `out` has grown. Thread-safe on distinct
// outputs; the AllocationMap must not change meanwhile.
// Used by the hook and the profiler's accuracy report.
#pragma once

#include "alloc_map.h"
#include "kernel_args.h"
#include "template_eval.h"

namespace msched {

// Appends every managed allocation that a 64-bit word of the arguments
// (struct fields included) points into, once each.
void PredictAllocations(const ArgView& args, const AllocationMap& allocs, Prediction* out);

}  // namespace msched

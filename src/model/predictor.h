// Predicting one launch's working set: choosing how (ChoosePrediction), then
// from its template when there is one (EvaluateTemplate in template_eval.h,
// which needs no lock), or at allocation granularity (every managed allocation an
// argument word points into, the MSched paper's naive baseline). Runs on the
// launch hot path; allocates nothing once `out` has grown. Thread-safe on
// distinct outputs; the AllocationMap must not change meanwhile.
// Used by the hook and the profiler's accuracy report.
#pragma once

#include <cstdint>

#include "model/alloc_map.h"
#include "model/kernel_args.h"
#include "msched/config.h"
#include "model/template_eval.h"

namespace msched {

// Appends every managed allocation that a 64-bit word of the arguments
// (struct fields included) points into, once each.
void PredictAllocations(const ArgView& args, const AllocationMap& allocs, Prediction* out);

// How a launch's working set is predicted.
enum class PredictionSource : uint8_t {
  kTemplate,          // its kernel's template, evaluated on the arguments
  kWholeAllocations,  // every allocation an argument points into
  kNone,              // not at all: its data faults in
};

// The choice for a launch: whole allocations in alloc mode, and for a kernel
// without a template under MSCHED_UNKNOWN=alloc; else its template if it has
// one; nothing when its arguments cannot be read (layout unknown).
PredictionSource ChoosePrediction(Mode mode, UnknownPolicy unknown, bool has_template, bool args_readable);

}  // namespace msched

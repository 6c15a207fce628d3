// Predicting one launch's working set: choosing how (ChoosePrediction), then
// from its template when there is one (CompiledTemplate in template_eval.h,
// which needs no lock), or from the pointers among its argument words: from
// each pointer as far as templates predicted the data there to reach, else
// to the end of its allocation (the fallback for kernels without a
// template), or whole allocations (the MSched paper's naive baseline). Runs
// on the launch hot path; allocates nothing once `out` has grown.
// Thread-safe on distinct outputs; the AllocationMap and ExtentMemo must not
// change meanwhile. Used by the hook and the profiler's accuracy report.
#pragma once

#include <cstdint>
#include <optional>

#include "model/alloc_map.h"
#include "model/extent_memo.h"
#include "model/kernel_args.h"
#include "model/template_eval.h"
#include "msched/config.h"

namespace msched {

// How the pointer fallbacks read an argument word that points into a
// managed allocation.
enum class PointerExtent : uint8_t {
  kToAllocationEnd,  // from the pointer to the end the memo learned, else of the allocation
  kWholeAllocation,  // the whole allocation, once
};

// Appends, for every 8-byte-aligned 64-bit word of the arguments (struct
// fields included) that points into a managed allocation, the region
// `extent` says; `learned` (may be null) supplies kToAllocationEnd's learned
// ends. Words outside [lowest base, highest end) of the map are rejected
// without a lookup, so a wide struct of sizes and strides costs one
// comparison per word.
void PredictFromPointers(const ArgView& args, const AllocationMap& allocs, const ExtentMemo* learned,
                         PointerExtent extent, Prediction* out);

// Cuts each region of `out` from index `first` on to the managed allocation
// that holds its first byte (its unaligned start), and drops a region that
// starts in none: a template's base word can hold a stale address (an
// unused slot of a list of tensors) and its size words garbage, and a
// region never reaches into another allocation. Each region that lay
// within its allocation as predicted teaches `learn` (may be null) its
// extent; one that had to be cut (a template's "rest" region, a wrong size
// word) and a strided region's piece say nothing of where the data at their
// start ends.
void ClipToAllocations(const AllocationMap& allocs, size_t first, Prediction* out, ExtentMemo* learn);

// How many of `pred`'s failed regions leave part of the launch's working
// set unpredicted: each one whose base word could not be read, and each one
// whose base points into a managed allocation. One whose base points into
// none predicts nothing even when its extent evaluates (ClipToAllocations
// drops it): in a list of tensors, the slots past the last one in use hold
// stack garbage for pointer and size alike, and they need no fallback.
uint32_t FailuresInJobMemory(const Prediction& pred, const AllocationMap& allocs);

// How a launch's working set is predicted.
enum class PredictionSource : uint8_t {
  kTemplate,          // its kernel's template, evaluated on the arguments
  kPointers,          // from each pointer argument, as far as templates predicted (else to its allocation's end)
  kWholeAllocations,  // every allocation an argument points into
  kNone,              // not at all: its data faults in
};

// The choice for a launch: whole allocations in alloc mode; else its
// template if it has one; else MSCHED_UNKNOWN's fallback (pointers, whole
// allocations, or none); nothing when its arguments cannot be read (layout
// unknown).
PredictionSource ChoosePrediction(Mode mode, UnknownPolicy unknown, bool has_template, bool args_readable);

// The pointer rule a launch predicted from `source` applies (under the
// AllocationMap's lock, after any template evaluation): the two fallbacks'
// own; for a template with `failed_regions` that matter (FailuresInJobMemory), the
// MSCHED_UNKNOWN=pointers fallback as well, so that what the template could
// not say is still predicted; none otherwise.
std::optional<PointerExtent> PointerRuleFor(PredictionSource source, UnknownPolicy unknown, uint32_t failed_regions);

// The memo the pointer rule may read for a launch predicted from `source`:
// `memo` for a kernel without a template; null (to the allocation's end)
// for a template's failed regions, whose own launch may just have taught
// the memo a shorter extent at the same pointer (an in-place operation's
// input and output), and for a launch left to faults, whose pointers'
// whole reach counts as the job's.
const ExtentMemo* LearnedExtentsFor(PredictionSource source, const ExtentMemo* memo);

// One launch as every caller that predicts it sees it: the launch path,
// the graph path (a kernel node, as if launched) and the profiler's check.
struct LaunchToPredict {
  Mode mode = Mode::kMsched;
  UnknownPolicy unknown = UnknownPolicy::kPointers;
  const CompiledTemplate* tmpl = nullptr;  // the kernel's template; null: none
  ArgView args;
  LaunchDims dims;
};

// The prediction of one launch: the rule chain (ChoosePrediction, the
// template, FailuresInJobMemory, PointerRuleFor, the fault rule, the cut to
// allocations and the pointer fallback), written once for every caller. In
// steps, so that the template is evaluated without the lock that guards
// the job's allocation map and extent memo, and the rest under it:
//   LaunchPrediction lp(launch, &pred);   // no lock
//   (lock) lp.Judge(allocs); ... lp.Complete(allocs, &memo);
// PredictLaunch runs them all for a caller with nothing to lock.
class LaunchPrediction {
 public:
  // Chooses how the launch is predicted and evaluates its template into
  // `out` (appending). Reads only the template and the arguments.
  LaunchPrediction(const LaunchToPredict& launch, Prediction* out);

  PredictionSource source() const { return source_; }
  // Under the map's lock: counts the template's failed regions that leave
  // data unpredicted (FailuresInJobMemory), and decides the pointer rule:
  // the fallbacks' own; for a template with such failures, the
  // MSCHED_UNKNOWN=pointers fallback as well; for a launch left to faults
  // whose arguments are readable, its pointers' whole reach, which its
  // faults load and which counts as the job's.
  void Judge(const AllocationMap& allocs);
  // After Judge: the failed regions that mattered.
  uint32_t failed() const { return failed_; }
  // After Judge: the pointer rule applies (the prediction is not the
  // template's alone).
  bool uses_pointer_rule() const { return rule_.has_value(); }
  // After Judge: some of the launch's data is not predicted, or comes from
  // a template that failed to say all of it: read-mostly duplicates cannot
  // be trusted to stay clean.
  bool leaves_data_unpredicted() const { return source_ == PredictionSource::kNone || failed_ > 0; }
  // After Judge: every region the launch needs is predicted (a graph node
  // that is not is left to faults whole).
  bool covers_working_set() const { return source_ != PredictionSource::kNone && (rule_.has_value() || failed_ == 0); }
  // Nothing is loaded ahead of the launch (known before Judge): its
  // regions, once complete, say what its faults will load.
  bool left_to_faults() const { return source_ == PredictionSource::kNone; }
  // After Judge, under the same lock: cuts the template's regions to their
  // allocations, teaching `memo`, then appends what the pointer rule says
  // (with the memo where LearnedExtentsFor allows it). False, doing
  // nothing, when there was nothing to complete: no rule and no region.
  bool Complete(const AllocationMap& allocs, ExtentMemo* memo);

 private:
  ArgView args_;
  Prediction* out_;
  PredictionSource source_;
  UnknownPolicy unknown_;
  uint32_t failed_ = 0;
  std::optional<PointerExtent> rule_;
};

// All of LaunchPrediction's steps at once, for a caller whose map and memo
// nothing else changes (the profiler's check).
LaunchPrediction PredictLaunch(const LaunchToPredict& launch, const AllocationMap& allocs, ExtentMemo* memo,
                               Prediction* out);

}  // namespace msched

// Fitting working-set templates to profiled launches (the MSched paper's
// analyzer, section 5.2). Each launch is first reduced to an Observation:
// its argument words, and the ranges it touched assigned to the pointer
// words they start from (the nearest pointer at or below each range, within
// the same allocation: interior pointers into pools and struct fields
// included). Per kernel, each base's ranges are then fitted:
//   - same extent in every call: T1 (fixed);
//   - an extent c * (product of up to three integer words or launch
//     dimensions) / div + add: T2 (linear);
//   - regularly spaced pieces: T3 (strided), whose count, stride and piece
//     length are each fitted like a T2 extent;
// preferring the simplest rule that explains every call exactly. A kernel
// with a range no argument explains, or an irregular pattern, is
// unpredictable, with the reason. A trace whose ranges are rounded (CUPTI's)
// is fitted by the rules of rounded_fit.h instead.
// Pure functions; thread-safe. Used by msched-profile.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/alloc_map.h"
#include "model/kernel_args.h"
#include "msched/templates.h"
#include "profile/trace.h"

namespace msched {

struct Observation {
  const TraceLaunch* launch = nullptr;                  // the trace must outlive the observation
  std::vector<void*> params;                            // one pointer per parameter, into launch->args
  ArgView args;                                         // over `params` (its buffer survives moves)
  std::vector<ArgWord> words;                           // every 32/64-bit word of the arguments
  std::vector<bool> is_pointer;                         // per word: points into a live allocation
  std::map<ArgRef, std::vector<TouchedRange>> by_base;  // touched ranges, by the pointer word they start from
  std::string unexplained;                              // a range no argument explains (empty: none)
  RangeSet touched;                                     // exact bytes touched
  std::vector<ByteRange> pointed;                       // the allocations the arguments point into, once each
  RangeSet naive;                                       // the same, as a set
};

// The trace's allocations as its launches saw them, replayed in trace order.
class TraceAllocations {
 public:
  explicit TraceAllocations(const Trace& trace) : trace_(trace) {}
  // The map with every allocation event before `l` applied. REQUIRES: `l`
  // is one of the trace's launches, no earlier than the last one asked for.
  const AllocationMap& At(const TraceLaunch& l);

 private:
  const Trace& trace_;
  AllocationMap allocs_;
  size_t applied_ = 0;
};

// Replays the trace's allocation events and reduces every launch.
std::vector<Observation> Observe(const Trace& trace);

struct KernelFit {
  bool predictable = false;
  KernelTemplate tmpl;  // name, layout, regions (predictable), calls, latency
  std::string reason;   // why not predictable
};

// Fits one kernel's launches (same name and layout). `precision` is how
// finely touched ranges are known, in bytes (1: exact).
KernelFit FitKernel(const std::vector<const Observation*>& launches, uint64_t precision);

// A quantity to explain in one launch: lo < value <= hi.
struct Target {
  int64_t lo;
  int64_t hi;
};

// A candidate factor and its value in each launch.
struct FactorValues {
  Factor factor;
  std::vector<uint64_t> values;
};

// Words usable as factors: integers (not pointers, not absurd) plus launch
// dimensions, one per distinct value vector; with `keep_constant`, also
// those that hold the same value in every launch, and every word (twins
// with equal values included). `fixed_sizes` gets the
// whole-parameter integer words that hold the same value (at least 2) in
// every launch.
std::vector<FactorValues> CandidateFactors(const std::vector<const Observation*>& obs,
                                           std::vector<FactorValues>* fixed_sizes, bool keep_constant);

// The simplest expression (constant, then products of 1, 2, 3 factors)
// whose value lies in every launch's target (launches with no target impose
// nothing). A value the same in every launch follows one of `fixed_sizes`
// (size words the same in every launch) times an element size when that
// explains it, else is a constant. Exposed for tests.
std::optional<LinearExpr> FitExpression(const std::vector<std::optional<Target>>& targets,
                                        const std::vector<FactorValues>& candidates,
                                        const std::vector<FactorValues>& fixed_sizes = {});

}  // namespace msched

// Evaluating a kernel template on one launch's arguments: the page-aligned
// byte ranges the launch will touch. Runs on the launch hot path, so it
// allocates nothing once its output buffer has grown, and never throws.
// Functions are thread-safe on distinct Prediction buffers.
// Used by the predictor (hook) and by the profiler's accuracy report.
#pragma once

#include <cstdint>
#include <vector>

#include "model/address_range.h"
#include "model/kernel_args.h"
#include "msched/templates.h"

namespace msched {

// Regions larger than this are treated as evaluation errors: no kernel
// touches 64 TiB, so such a value means a wrong rule or a wrong argument.
inline constexpr uint64_t kMaxRegionBytes = uint64_t{1} << 46;
// A strided region with more pieces than this is predicted as its envelope
// (from the first piece to the end of the last), trading precision for a
// bounded cost on the launch path.
inline constexpr uint64_t kMaxStridedPieces = 4096;

struct PredictedRegion {
  ByteRange range;  // aligned out to the Prediction's alignment
  AccessMode mode = AccessMode::kReadWrite;
};

// Output of one evaluation. Clear() keeps capacity, so a buffer reused across
// launches stops allocating after warm-up.
class Prediction {
 public:
  // Ranges are rounded out to `alignment` bytes: the driver's page for
  // migration (the default), 1 for exact byte accounting in reports.
  explicit Prediction(uint64_t alignment = kPageSize) : alignment_(alignment) {}
  void Clear() {
    regions_.clear();
    failed_regions_ = 0;
    enveloped_regions_ = 0;
  }
  void Add(const ByteRange& r, AccessMode mode);
  const std::vector<PredictedRegion>& regions() const { return regions_; }
  std::vector<PredictedRegion>* mutable_regions() { return &regions_; }
  uint64_t TotalBytes() const;
  // Regions skipped because an argument was missing, arithmetic overflowed,
  // or the result was negative or absurd.
  uint32_t failed_regions() const { return failed_regions_; }
  uint32_t enveloped_regions() const { return enveloped_regions_; }
  void CountFailure() { ++failed_regions_; }
  void CountEnvelope() { ++enveloped_regions_; }

 private:
  uint64_t alignment_;
  std::vector<PredictedRegion> regions_;
  uint32_t failed_regions_ = 0;
  uint32_t enveloped_regions_ = 0;
};

// Evaluates `e`; false on a missing argument, overflow, or a result outside
// [0, kMaxRegionBytes].
bool EvaluateExpr(const LinearExpr& e, const ArgView& args, const LaunchDims& dims, uint64_t* out);

// Appends the ranges of every region of `t` to `out` (without clearing it).
// A kRest region comes out as kMaxRegionBytes from its base: callers cut it
// to its allocation (ClipToAllocations in model/predictor.h).
void EvaluateTemplate(const KernelTemplate& t, const ArgView& args, const LaunchDims& dims, Prediction* out);

}  // namespace msched

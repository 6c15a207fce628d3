// Evaluating a kernel template on one launch's arguments: the page-aligned
// byte ranges the launch will touch. A template is compiled once, when it is
// loaded (CompiledTemplate), into a flat form that the launch path evaluates
// without lookups: every argument word resolved against the layout, every
// factor in one array. Evaluation allocates nothing once its output buffer
// has grown, and never throws. A CompiledTemplate is immutable: thread-safe;
// a Prediction is confined to one thread.
// Used by the template store, the predictor (hook) and the profiler's
// accuracy report.
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
  // One piece of a strided pattern: it says nothing of where the data at
  // its first byte ends.
  bool piece = false;
  // Where the region begins before alignment: the allocation it belongs to
  // is the one holding this byte (an aligned begin can lie in the block
  // before, in a pool whose blocks are 512-byte aligned).
  uint64_t start = 0;
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
    failed_bases_.clear();
    failed_regions_ = 0;
    enveloped_regions_ = 0;
  }
  void Add(ByteRange r, AccessMode mode) { Push(r, mode, /*piece=*/false); }
  // One piece of a strided region.
  void AddPiece(ByteRange r, AccessMode mode) { Push(r, mode, /*piece=*/true); }
  const std::vector<PredictedRegion>& regions() const { return regions_; }
  std::vector<PredictedRegion>* mutable_regions() { return &regions_; }
  uint64_t TotalBytes() const;
  // Regions skipped because an argument was missing, arithmetic overflowed,
  // or the result was negative or absurd.
  uint32_t failed_regions() const { return failed_regions_; }
  // The base pointers of those failed regions whose base word could be read
  // (the others had none), in template order: whoever holds the allocation
  // map can tell which of them lay in the job's memory
  // (FailuresInJobMemory in model/predictor.h).
  const std::vector<uint64_t>& failed_bases() const { return failed_bases_; }
  uint32_t enveloped_regions() const { return enveloped_regions_; }
  // A region failed before its base pointer was known.
  void CountFailure() { ++failed_regions_; }
  // The region based at pointer `base` (its base word's value) failed.
  void CountFailure(uint64_t base) {
    ++failed_regions_;
    failed_bases_.push_back(base);
  }
  void CountEnvelope() { ++enveloped_regions_; }

 private:
  void Push(ByteRange r, AccessMode mode, bool piece) {
    if (!r.empty()) regions_.push_back({r.AlignedOut(alignment_), mode, piece, r.begin});
  }

  uint64_t alignment_;
  std::vector<PredictedRegion> regions_;
  std::vector<uint64_t> failed_bases_;
  uint32_t failed_regions_ = 0;
  uint32_t enveloped_regions_ = 0;
};

// A KernelTemplate in the form the launch path evaluates. Expressions mean
// what templates.h says (checked 64-bit arithmetic; a missing argument,
// an intermediate magnitude past 2^62, or a result outside
// [0, kMaxRegionBytes] fails the region, which is counted and skipped). A
// region for a list slot the launch does not use is skipped, and is no
// failure.
// Example:
//   const CompiledTemplate t(std::move(kernel_template));
//   t.Evaluate(ArgView::FromKernelParams(t.source().layout, params), dims, &prediction);
class CompiledTemplate {
 public:
  explicit CompiledTemplate(KernelTemplate t);

  const KernelTemplate& source() const { return source_; }

  // Appends the ranges of every region to `out` (without clearing it). A
  // kRest region comes out as kMaxRegionBytes from its base: callers cut it
  // to its allocation (ClipToAllocations in model/predictor.h).
  // REQUIRES: `args` has a layout equal to source().layout (TemplateStore::
  // Find and the profiler match layouts), or is empty (every region fails).
  void Evaluate(const ArgView& args, const LaunchDims& dims, Prediction* out) const;

 private:
  // One factor: launch dimension `dim` (0-5: grid x, y, z, block x, y, z)
  // when dim >= 0, else argument word `word`.
  struct Operand {
    ArgSlot word;
    int8_t dim = -1;
  };
  // How an expression is evaluated, decided when it is compiled.
  enum class Shape : uint8_t {
    kConstant,  // `value` on every launch
    kNever,     // fails on every launch: a word that cannot be read, a divisor <= 0, a constant out of range
    kScaled,    // coef (> 0) times its one argument word, for a word of at most `value` (the common T2 shape)
    kGeneral,   // coef times operands_[first, first + count), divided by div (> 0), plus add; checked at each step
  };
  struct Expr {  // a LinearExpr
    Shape shape = Shape::kGeneral;
    uint32_t first = 0;
    uint32_t count = 0;
    int64_t coef = 0;
    int64_t div = 1;
    int64_t add = 0;
    uint64_t value = 0;
  };
  // One region, in source order (a kRest region's extent is unused).
  struct Step {
    ArgSlot base;
    int64_t base_offset = 0;
    Expr extent;
    uint32_t strided = 0;  // kStrided: its count is strided_[strided], its stride the next
    Region::Kind kind = Region::Kind::kFixed;
    AccessMode mode = AccessMode::kReadWrite;
    // A list slot's region (ListSlot): its array in lists_ (-1: none, or
    // one that can never be read) and its slot.
    int32_t list = -1;
    uint16_t list_slot = 0;
  };
  // A ListSlot's slot_of_block: its first byte, read 1 byte wide, and the
  // bytes from it to its parameter's end. One per distinct array.
  struct ListArray {
    ArgSlot first;
    uint32_t length = 0;
  };

  // `e` with its words resolved against source_.layout (its operands
  // appended to operands_) and its Shape chosen.
  Expr Compile(const LinearExpr& e);
  // Evaluate's loop and one expression's value, with the reader made for
  // the arguments' form (ArgView::WithReader).
  template <typename Reader>
  void Run(const Reader& read, const uint64_t* dims, Prediction* out) const;
  template <typename Reader>
  bool Value(const Expr& e, const Reader& read, const uint64_t* dims, uint64_t* out) const;
  // The last block's slot in list array `list` (UINT32_MAX when it cannot
  // be read: every slot applies).
  template <typename Reader>
  uint32_t LastSlot(int32_t list, const Reader& read, const uint64_t* dims) const;
  template <typename Reader>
  bool Product(const Expr& e, const Reader& read, const uint64_t* dims, uint64_t* out) const;  // kGeneral

  KernelTemplate source_;
  std::vector<Step> steps_;
  std::vector<Operand> operands_;
  std::vector<Expr> strided_;
  std::vector<ListArray> lists_;
};

}  // namespace msched

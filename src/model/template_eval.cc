#include "model/template_eval.h"

namespace msched {
namespace {

// Magnitude past which intermediate products are rejected; far above any
// real extent.
constexpr int64_t kMaxIntermediate = int64_t{1} << 62;

bool FactorValue(const Factor& f, const ArgView& args, const LaunchDims& dims, uint64_t* out) {
  switch (f.kind) {
    case Factor::Kind::kArg: {
      std::optional<uint64_t> v = args.Read(f.arg);
      if (!v) return false;
      *out = *v;
      return true;
    }
    case Factor::Kind::kGridX: *out = dims.grid[0]; return true;
    case Factor::Kind::kGridY: *out = dims.grid[1]; return true;
    case Factor::Kind::kGridZ: *out = dims.grid[2]; return true;
    case Factor::Kind::kBlockX: *out = dims.block[0]; return true;
    case Factor::Kind::kBlockY: *out = dims.block[1]; return true;
    case Factor::Kind::kBlockZ: *out = dims.block[2]; return true;
  }
  return false;
}

}  // namespace

void Prediction::Add(const ByteRange& r, AccessMode mode) {
  if (r.empty()) return;
  regions_.push_back({r.AlignedOut(alignment_), mode});
}

uint64_t Prediction::TotalBytes() const {
  uint64_t total = 0;
  for (const PredictedRegion& r : regions_) total += r.range.size();
  return total;
}

bool EvaluateExpr(const LinearExpr& e, const ArgView& args, const LaunchDims& dims, uint64_t* out) {
  // 64-bit arithmetic with overflow checks: anything past kMaxIntermediate
  // fails anyway, so no wider type is needed (a 128-bit product and quotient
  // cost more than the rest of a region's evaluation).
  int64_t acc = e.coef;
  if (e.coef != 0) {
    for (const Factor& f : e.factors) {
      uint64_t v = 0;
      if (!FactorValue(f, args, dims, &v)) return false;
      if (v > static_cast<uint64_t>(kMaxIntermediate) || __builtin_mul_overflow(acc, static_cast<int64_t>(v), &acc) ||
          acc > kMaxIntermediate || acc < -kMaxIntermediate) {
        return false;
      }
    }
  }
  if (e.div <= 0) return false;
  if (e.div != 1) acc /= e.div;
  if (__builtin_add_overflow(acc, e.add, &acc)) return false;
  if (acc < 0 || static_cast<uint64_t>(acc) > kMaxRegionBytes) return false;
  *out = static_cast<uint64_t>(acc);
  return true;
}

void EvaluateTemplate(const KernelTemplate& t, const ArgView& args, const LaunchDims& dims, Prediction* out) {
  for (const Region& r : t.regions) {
    std::optional<uint64_t> ptr = args.Read(r.base);
    if (ptr && r.kind == Region::Kind::kRest) {  // cut at its allocation's end by whoever holds the map
      out->Add({*ptr, *ptr + std::min(kMaxRegionBytes, UINT64_MAX - *ptr)}, r.mode);
      continue;
    }
    uint64_t extent = 0;
    if (!ptr || !EvaluateExpr(r.extent, args, dims, &extent)) {
      out->CountFailure();
      continue;
    }
    const uint64_t base = *ptr + static_cast<uint64_t>(r.base_offset);
    if (r.base_offset >= 0 ? base < *ptr : base > *ptr) {  // wrapped around
      out->CountFailure();
      continue;
    }
    if (r.kind != Region::Kind::kStrided) {
      if (base + extent < base) {
        out->CountFailure();
        continue;
      }
      out->Add({base, base + extent}, r.mode);
      continue;
    }
    uint64_t count = 0, stride = 0;
    if (!EvaluateExpr(r.count, args, dims, &count) || !EvaluateExpr(r.stride, args, dims, &stride)) {
      out->CountFailure();
      continue;
    }
    if (count == 0 || extent == 0) continue;
    const __int128 last_end = static_cast<__int128>(count - 1) * stride + extent;
    if (last_end > static_cast<__int128>(kMaxRegionBytes) || base + static_cast<uint64_t>(last_end) < base) {
      out->CountFailure();
      continue;
    }
    // Pieces closer than a page merge once page-aligned; emit them as one.
    if (stride <= extent || stride - extent < kPageSize || count > kMaxStridedPieces) {
      if (stride > extent && stride - extent >= kPageSize) out->CountEnvelope();
      out->Add({base, base + static_cast<uint64_t>(last_end)}, r.mode);
      continue;
    }
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t begin = base + i * stride;
      out->Add({begin, begin + extent}, r.mode);
    }
  }
}

}  // namespace msched

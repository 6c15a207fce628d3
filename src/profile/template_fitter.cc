#include "profile/template_fitter.h"

#include "model/predictor.h"
#include "profile/list_slots.h"
#include "profile/rounded_fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

namespace msched {
namespace {

constexpr uint64_t kMaxSizeWord = uint64_t{1} << 40;  // larger integer words are not sizes
constexpr size_t kMaxCandidates = 48;
constexpr size_t kMaxRoundedCandidates = 1024;         // a 4 KiB struct of distinct words, and more
constexpr int64_t kMaxCoefficient = int64_t{1} << 48;  // what a templates file accepts
constexpr int64_t kMaxDivisor = 1024;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Whole-parameter words (a u64 parameter, a u32 parameter) are the natural
// reading of a size; struct fields come after them.
bool WholeParameter(const ArgRef& r, const ParamLayout& layout) {
  return r.offset == 0 && layout[r.param].size == r.width;
}

bool AllSame(const std::vector<uint64_t>& values) {
  return std::all_of(values.begin(), values.end(), [&](uint64_t v) { return v == values[0]; });
}

// A 64-bit word in the range where Linux maps a process's memory
// (0x7f00'0000'0000 up to the end of user space).
bool LooksLikeAddress(const ArgWord& w) {
  return w.ref.width == 8 && w.value >= (uint64_t{0x7f00} << 32) && w.value < (uint64_t{1} << 47);
}

}  // namespace

std::vector<FactorValues> CandidateFactors(const std::vector<const Observation*>& obs,
                                           std::vector<FactorValues>* fixed_sizes, bool keep_constant) {
  const Observation& first = *obs[0];
  const ParamLayout& layout = first.launch->layout;
  // A word overlapping a pointer in any launch (a pointer, or half of one) is
  // no size. From the GPU (keep_constant), so is one overlapping a host
  // address (cuBLAS passes pointers to its host-side scalars): its high half
  // would pass for a size of some 32K.
  std::vector<bool> part_of_pointer(first.words.size(), false);
  for (size_t p = 0; p < first.words.size(); ++p) {
    const ArgRef& ptr = first.words[p].ref;
    bool is_pointer = false;
    for (const Observation* o : obs) {
      is_pointer = is_pointer || o->is_pointer[p] || (keep_constant && LooksLikeAddress(o->words[p]));
    }
    for (size_t w = 0; w < first.words.size() && is_pointer; ++w) {
      const ArgRef& r = first.words[w].ref;
      if (r.param == ptr.param && r.offset < ptr.offset + ptr.width && ptr.offset < r.offset + r.width) {
        part_of_pointer[w] = true;
      }
    }
  }
  std::vector<FactorValues> natural, other;
  for (size_t w = 0; w < first.words.size(); ++w) {
    FactorValues fv{{Factor::Kind::kArg, first.words[w].ref}, {}};
    bool usable = !part_of_pointer[w];
    for (size_t i = 0; i < obs.size() && usable; ++i) {
      const uint64_t v = obs[i]->words[w].value;
      usable = v <= kMaxSizeWord;
      fv.values.push_back(v);
    }
    if (!usable) continue;
    const bool whole = WholeParameter(fv.factor.arg, layout);
    if (whole && AllSame(fv.values) && fv.values[0] >= 2) fixed_sizes->push_back(fv);
    (whole ? natural : other).push_back(std::move(fv));
  }
  natural.insert(natural.end(), other.begin(), other.end());
  static constexpr Factor::Kind kDims[] = {Factor::Kind::kGridX,  Factor::Kind::kGridY,  Factor::Kind::kGridZ,
                                           Factor::Kind::kBlockX, Factor::Kind::kBlockY, Factor::Kind::kBlockZ};
  for (int d = 0; d < 6; ++d) {
    FactorValues fv{{kDims[d], {}}, {}};
    for (const Observation* o : obs)
      fv.values.push_back(d < 3 ? o->launch->dims.grid[d] : o->launch->dims.block[d - 3]);
    natural.push_back(std::move(fv));
  }
  std::vector<FactorValues> out;
  const size_t limit = keep_constant ? kMaxRoundedCandidates : kMaxCandidates;
  for (FactorValues& fv : natural) {
    const bool unusable = keep_constant ? fv.values[0] == 0 : AllSame(fv.values);
    const bool duplicate = !keep_constant && std::any_of(out.begin(), out.end(),
                                                         [&](const FactorValues& o) { return o.values == fv.values; });
    if (!unusable && !duplicate && out.size() < limit) out.push_back(std::move(fv));
  }
  return out;
}

namespace {

// Tries coefficient num/den over products `p` (one per launch): finds an add
// d with lo < num*p/den + d <= hi everywhere, preferring d = 0.
std::optional<int64_t> FeasibleAdd(int64_t num, int64_t den, const std::vector<__int128>& p,
                                   const std::vector<std::optional<Target>>& targets) {
  __int128 dmin = std::numeric_limits<int64_t>::min(), dmax = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i]) continue;
    const __int128 v = static_cast<__int128>(num) * p[i] / den;  // as EvaluateExpr computes it
    dmin = std::max<__int128>(dmin, targets[i]->lo - v);         // exclusive
    dmax = std::min<__int128>(dmax, targets[i]->hi - v);
  }
  if (dmin >= dmax) return std::nullopt;
  if (dmin < 0 && dmax >= 0) return 0;
  const __int128 d = dmin >= 0 ? dmin + 1 : dmax;
  if (d > kMaxCoefficient || d < -kMaxCoefficient) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::optional<LinearExpr> FitProduct(const std::vector<const FactorValues*>& factors,
                                     const std::vector<std::optional<Target>>& targets) {
  const size_t n = targets.size();
  std::vector<__int128> p(n, 1);
  for (size_t i = 0; i < n; ++i) {
    for (const FactorValues* f : factors) {
      p[i] *= f->values[i];
      if (p[i] > (static_cast<__int128>(1) << 62)) return std::nullopt;
    }
  }
  // The pair of constrained launches whose products differ most pins c down.
  size_t a = n, b = n;
  for (size_t i = 0; i < n; ++i) {
    if (!targets[i]) continue;
    if (a == n || p[i] < p[a]) a = i;
    if (b == n || p[i] > p[b]) b = i;
  }
  if (a == n || p[a] == p[b]) return std::nullopt;  // no variation: a constant would have fitted
  const double c = static_cast<double>(targets[b]->hi - targets[a]->hi) / static_cast<double>(p[b] - p[a]);
  if (!(c > 0)) return std::nullopt;  // extents grow with sizes
  for (int64_t den = 1; den <= kMaxDivisor; den *= 2) {
    const int64_t center = std::llround(c * static_cast<double>(den));
    for (int64_t num : {center, center - 1, center + 1}) {
      if (num <= 0 || num > kMaxCoefficient || (den > 1 && num % 2 == 0)) continue;  // keep fractions reduced
      if (std::optional<int64_t> d = FeasibleAdd(num, den, p, targets)) {
        LinearExpr e{num, den, {}, *d};
        for (const FactorValues* f : factors) e.factors.push_back(f->factor);
        return e;
      }
    }
  }
  return std::nullopt;
}

// One base's shape in one launch.
struct Shape {
  enum Kind { kEmpty, kContiguous, kStrided } kind = kEmpty;
  int64_t offset = 0;   // first byte touched, relative to the base pointer
  uint64_t extent = 0;  // contiguous: bytes; strided: bytes of each piece
  uint64_t count = 0;
  uint64_t stride = 0;
  AccessMode mode = AccessMode::kRead;
};

// Classifies one launch's ranges for one base. False: an irregular pattern.
bool ShapeOf(std::vector<TouchedRange> ranges, uint64_t base, Shape* out) {
  if (ranges.empty()) return true;
  std::sort(ranges.begin(), ranges.end(),
            [](const TouchedRange& x, const TouchedRange& y) { return x.range.begin < y.range.begin; });
  int mode = 0;
  for (const TouchedRange& r : ranges) mode |= static_cast<int>(r.mode);
  out->mode = static_cast<AccessMode>(mode);
  out->offset = static_cast<int64_t>(ranges[0].range.begin - base);
  const uint64_t first = ranges[0].range.size();
  bool regular = ranges.size() >= 2;
  const uint64_t stride = regular ? ranges[1].range.begin - ranges[0].range.begin : 0;
  for (size_t i = 1; i < ranges.size() && regular; ++i) {
    const uint64_t gap = ranges[i].range.begin - ranges[i - 1].range.begin;
    regular = ranges[i].range.size() == first && gap == stride && stride > first;
  }
  if (regular) {
    out->kind = Shape::kStrided;
    out->extent = first;
    out->count = ranges.size();
    out->stride = stride;
    return true;
  }
  // Not strided: acceptable only as one contiguous run (abutting pieces).
  uint64_t end = ranges[0].range.end;
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].range.begin > end) return false;
    end = std::max(end, ranges[i].range.end);
  }
  out->kind = Shape::kContiguous;
  out->extent = end - ranges[0].range.begin;
  return true;
}

// The target for a quantity observed exactly as `v`.
Target Exactly(uint64_t v) { return {static_cast<int64_t>(v) - 1, static_cast<int64_t>(v)}; }

}  // namespace

std::optional<LinearExpr> FitExpression(const std::vector<std::optional<Target>>& targets,
                                        const std::vector<FactorValues>& candidates,
                                        const std::vector<FactorValues>& fixed_sizes) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  bool any = false;
  for (const auto& t : targets) {
    if (!t) continue;
    any = true;
    lo = std::max(lo, t->lo);
    hi = std::min(hi, t->hi);
  }
  if (!any) return LinearExpr::Constant(0);
  if (lo < hi && hi >= 0 && hi <= kMaxCoefficient) {
    // The same in every call. A profile at one size cannot tell a constant
    // from an array whose length argument was the same in every call; when a
    // size argument times an element size (1 to 16 bytes) explains the value,
    // follow the argument: a constant predicts the profiled size at every
    // size (a 512 MiB buffer profiled at 64 MiB got an eighth of its data
    // prefetched on an H100), while the argument extrapolates.
    for (const FactorValues& fv : fixed_sizes) {
      for (int64_t element : {1, 2, 4, 8, 16}) {
        const __int128 v = static_cast<__int128>(element) * fv.values[0];
        if (lo < v && v <= hi) return LinearExpr{element, 1, {fv.factor}, 0};
      }
    }
    return LinearExpr::Constant(hi);  // T1
  }
  // Products of one factor, then two, then three (repeats allowed); within
  // a level, the simplest fit wins: no constant term, then a smaller one,
  // then no divisor, then a smaller coefficient. A fit with a constant term
  // only stands if no later level fits without one: two sizes always admit
  // a line with an offset, so a GEMM's n*n*4 bytes fitted at n = 256 and 512
  // as 3072*n - 512 KiB predicted a third of its data at n = 2048 (measured
  // on an H100). Array extents are products of dimensions far more often
  // than dimensions plus a constant.
  const size_t n = candidates.size();
  auto simpler = [](const LinearExpr& a, const LinearExpr& b) {
    return std::make_tuple(a.add != 0, std::llabs(a.add), a.div != 1, a.coef) <
           std::make_tuple(b.add != 0, std::llabs(b.add), b.div != 1, b.coef);
  };
  std::optional<LinearExpr> best;
  auto consider = [&](std::initializer_list<size_t> picks) {
    std::vector<const FactorValues*> chosen;
    for (size_t i : picks) chosen.push_back(&candidates[i]);
    if (auto e = FitProduct(chosen, targets); e && (!best || simpler(*e, *best))) best = std::move(e);
  };
  std::optional<LinearExpr> with_offset;  // the lowest level's best fit, when it needed a constant term
  auto settled = [&]() {
    if (best && best->add == 0) return true;
    if (!with_offset) with_offset = std::move(best);
    best.reset();
    return false;
  };
  for (size_t i = 0; i < n; ++i) consider({i});
  if (settled()) return best;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) consider({i, j});
  }
  if (settled()) return best;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) {
      for (size_t k = j; k < n; ++k) consider({i, j, k});
    }
  }
  if (settled()) return best;
  return with_offset;
}

namespace {

// CUPTI's ranges are the driver's migrations: whole 64 KiB pages, and the
// pages its prefetcher added within the 2 MiB block, below the pointer as
// well as above the data. So a piece of one allocation is cut at every
// pointer into that allocation, each part going to the nearest pointer at or
// below it; the bytes below a pointer but within its 2 MiB block, in a range
// of their own, are the prefetcher's and go to none. Only bytes in an earlier block than every
// pointer say that the kernel found an address in memory.
void AttributeRounded(const Allocation& a, const TouchedRange& piece, Observation* o) {
  std::vector<const ArgWord*> pointers;  // into `a`, by value, the first word of each value
  for (size_t w = 0; w < o->words.size(); ++w) {
    if (o->is_pointer[w] && a.range().Contains(o->words[w].value)) pointers.push_back(&o->words[w]);
  }
  std::stable_sort(pointers.begin(), pointers.end(),
                   [](const ArgWord* x, const ArgWord* y) { return x->value < y->value; });
  pointers.erase(std::unique(pointers.begin(), pointers.end(),
                             [](const ArgWord* x, const ArgWord* y) { return x->value == y->value; }),
                 pointers.end());
  if (pointers.empty() || piece.range.begin < AlignDown(pointers[0]->value, kChunkSize)) {
    o->unexplained = "touches " + Hex(piece.range.begin) +
                     ", in a 2 MiB block below every argument that points "
                     "into its allocation (a base read from memory: pointer chasing)";
    return;
  }
  for (size_t i = 0; i < pointers.size(); ++i) {
    const uint64_t next = i + 1 < pointers.size() ? pointers[i + 1]->value : UINT64_MAX;
    const ByteRange part{std::max(piece.range.begin, pointers[i]->value), std::min(piece.range.end, next)};
    // A range of its own that runs up to the next pointer from within that
    // pointer's block is the prefetcher's work below the next pointer, not
    // this pointer's data.
    const bool below_next = part.begin == piece.range.begin && part.begin > pointers[i]->value && part.end == next &&
                            AlignDown(next, kChunkSize) <= part.begin;
    if (!part.empty() && !below_next) o->by_base[pointers[i]->ref].push_back(TouchedRange{part, piece.mode});
  }
}

}  // namespace

const AllocationMap& TraceAllocations::At(const TraceLaunch& l) {
  for (; applied_ < l.alloc_epoch && applied_ < trace_.allocs.size(); ++applied_) {
    const TraceAllocEvent& e = trace_.allocs[applied_];
    if (!e.alloc) {
      (void)allocs_.Erase(e.base);
    } else if (!allocs_.Insert(e.base, e.size, AllocKind::kManaged).ok()) {
      (void)allocs_.Erase(e.base);  // a free the trace missed: the newer allocation wins
      (void)allocs_.Insert(e.base, e.size, AllocKind::kManaged);
    }
  }
  return allocs_;
}

std::vector<Observation> Observe(const Trace& trace) {
  std::vector<Observation> out;
  out.reserve(trace.launches.size());
  TraceAllocations replay(trace);
  const bool rounded = trace.precision > 1;
  for (const TraceLaunch& l : trace.launches) {
    const AllocationMap& allocs = replay.At(l);
    Observation o;
    o.launch = &l;
    for (const auto& a : l.args) o.params.push_back(const_cast<uint8_t*>(a.data()));
    o.args = ArgView::FromKernelParams(l.layout, o.params.data());
    o.words = SliceArgWords(o.args);
    for (const ArgWord& w : o.words) o.is_pointer.push_back(w.ref.width == 8 && allocs.Find(w.value) != nullptr);
    Prediction naive(/*alignment=*/1);
    PredictFromPointers(o.args, allocs, nullptr, PointerExtent::kWholeAllocation, &naive);
    for (const PredictedRegion& r : naive.regions()) {
      o.pointed.push_back(r.range);
      o.naive.Add(r.range);
    }
    for (const TouchedRange& t : l.touched) {
      o.touched.Add(t.range);
      // A range is split at allocation boundaries before each piece finds its
      // pointer: neighbouring allocations touched by one kernel come back as
      // one range (small managed allocations are packed next to each other),
      // and explaining it all from the first one's pointer predicts the others
      // at the wrong place once the allocations are apart (seen on an H100).
      // Bytes outside every allocation come only from rounding to the trace's
      // precision and are dropped.
      std::vector<std::pair<const Allocation*, ByteRange>> pieces;
      allocs.ForEachOverlapping(t.range, [&](const Allocation& a) {
        pieces.emplace_back(&a, ByteRange{std::max(t.range.begin, a.base), std::min(t.range.end, a.range().end)});
      });
      if (pieces.empty()) {
        o.unexplained = "touches " + Hex(t.range.begin) + ", outside every allocation";
        continue;
      }
      for (const auto& [a, piece] : pieces) {
        if (rounded) {
          AttributeRounded(*a, TouchedRange{piece, t.mode}, &o);
          continue;
        }
        // The nearest pointer at or below the piece, into the same allocation.
        const ArgWord* best = nullptr;
        for (size_t w = 0; w < o.words.size(); ++w) {
          const ArgWord& word = o.words[w];
          if (!o.is_pointer[w] || !a->range().Contains(word.value) || word.value > piece.begin) continue;
          if (best == nullptr || word.value > best->value) best = &word;
        }
        if (best == nullptr) {
          o.unexplained = "touches " + Hex(piece.begin) +
                          " in an allocation no argument points into at or below it "
                          "(a base read from memory: pointer chasing)";
          continue;
        }
        o.by_base[best->ref].push_back(TouchedRange{piece, t.mode});
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

namespace {

// Fits every base of `obs` (one kernel's observations) from exact ranges
// (the simulator's); `fit` arrives with name, layout, calls and latency set.
KernelFit FitExactKernel(const std::vector<const Observation*>& obs, KernelFit fit) {
  std::vector<FactorValues> fixed_sizes;
  const std::vector<FactorValues> candidates = CandidateFactors(obs, &fixed_sizes, /*keep_constant=*/false);
  std::set<ArgRef> bases;
  for (const Observation* o : obs) {
    for (const auto& [ref, ranges] : o->by_base) bases.insert(ref);
  }
  for (const ArgRef& base : bases) {
    const std::string name = ArgRefToString(base);
    std::vector<Shape> shapes(obs.size());
    bool strided = false;
    int mode = 0;
    for (size_t i = 0; i < obs.size(); ++i) {
      auto it = obs[i]->by_base.find(base);
      const std::optional<uint64_t> v = obs[i]->args.Read(base);
      if (it == obs[i]->by_base.end() || !v) continue;
      if (!ShapeOf(it->second, *v, &shapes[i])) {
        fit.reason = "irregular accesses through " + name + " (a data-dependent gather)";
        return fit;
      }
      strided = strided || shapes[i].kind == Shape::kStrided;
      mode |= static_cast<int>(shapes[i].mode);
    }
    // The region starts at the same offset from its pointer in every call.
    std::optional<int64_t> offset;
    for (const Shape& sh : shapes) {
      if (sh.kind == Shape::kEmpty) continue;
      if (offset && *offset != sh.offset) {
        fit.reason = "the region through " + name + " starts at a varying offset from it";
        return fit;
      }
      offset = sh.offset;
    }
    Region region;
    region.base = base;
    region.base_offset = offset.value_or(0);
    region.mode = static_cast<AccessMode>(mode ? mode : 1);
    std::vector<std::optional<Target>> extent(obs.size()), count(obs.size()), stride(obs.size());
    for (size_t i = 0; i < obs.size(); ++i) {
      const Shape& sh = shapes[i];
      if (sh.kind == Shape::kEmpty) {
        extent[i] = count[i] = Target{-1, 0};
      } else {
        extent[i] = Exactly(sh.extent);
        count[i] = Exactly(sh.count ? sh.count : 1);
        if (sh.kind == Shape::kStrided) stride[i] = Exactly(sh.stride);
      }
    }
    std::optional<LinearExpr> e = FitExpression(extent, candidates, fixed_sizes);
    if (strided) {
      // An empty launch constrains the count (zero pieces), not the piece size.
      for (size_t i = 0; i < obs.size(); ++i) {
        if (shapes[i].kind == Shape::kEmpty) extent[i].reset();
      }
      e = FitExpression(extent, candidates, fixed_sizes);
      std::optional<LinearExpr> c = FitExpression(count, candidates, fixed_sizes);
      std::optional<LinearExpr> s = FitExpression(stride, candidates, fixed_sizes);
      if (!e || !c || !s) {
        fit.reason = "the strided pattern through " + name + " fits no rule (" +
                     (!c   ? "piece count"
                      : !s ? "stride"
                           : "piece size") +
                     ")";
        return fit;
      }
      region.kind = Region::Kind::kStrided;
      region.extent = *e;
      region.count = *c;
      region.stride = *s;
    } else {
      if (!e) {
        fit.reason = "the extent of the region through " + name + " fits no rule (data-dependent?)";
        return fit;
      }
      region.kind = e->IsConstant() ? Region::Kind::kFixed : Region::Kind::kLinear;
      region.extent = *e;
    }
    fit.tmpl.regions.push_back(std::move(region));
  }
  fit.predictable = true;
  return fit;
}

}  // namespace

KernelFit FitKernel(const std::vector<const Observation*>& obs, uint64_t precision) {
  precision = std::max<uint64_t>(precision, 1);
  KernelFit fit;
  if (obs.empty()) {
    fit.reason = "no launches";
    return fit;
  }
  const TraceLaunch& first = *obs[0]->launch;
  fit.tmpl.name = first.kernel;
  fit.tmpl.layout = first.layout;
  fit.tmpl.calls_seen = obs.size();
  uint64_t latency = 0;
  for (const Observation* o : obs) latency += o->launch->latency_ns;
  if (latency > 0) fit.tmpl.latency_us = static_cast<double>(latency) / obs.size() / 1000.0;
  for (const Observation* o : obs) {
    if (!o->unexplained.empty()) {
      fit.reason = o->unexplained;
      return fit;
    }
  }
  // CUPTI's rounded ranges are fitted by rounded_fit.h, exact ones here;
  // either way the lists the kernel walks are found after.
  fit = precision > 1 ? FitRoundedKernel(obs, precision, std::move(fit)) : FitExactKernel(obs, std::move(fit));
  if (fit.predictable) GuardListSlots(obs, precision, &fit.tmpl);
  return fit;
}

}  // namespace msched

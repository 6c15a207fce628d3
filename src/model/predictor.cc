#include "model/predictor.h"

#include <algorithm>

namespace msched {
namespace {

// The managed allocation holding `ptr`, or null. `span` is allocs.span():
// a word outside it (a size, a stride, stack garbage) is turned away
// without a lookup.
const Allocation* ManagedAt(const AllocationMap& allocs, const ByteRange& span, uint64_t ptr) {
  if (!span.Contains(ptr)) return nullptr;
  const Allocation* a = allocs.Find(ptr);
  return a != nullptr && IsManaged(a->kind) ? a : nullptr;
}

}  // namespace

void PredictFromPointers(const ArgView& args, const AllocationMap& allocs, const ExtentMemo* learned,
                         PointerExtent extent, Prediction* out) {
  const ParamLayout* layout = args.layout();
  if (layout == nullptr || allocs.count() == 0) return;
  const ByteRange span = allocs.span();
  const size_t first = out->regions().size();
  for (size_t p = 0; p < layout->size(); ++p) {
    const uint32_t size = (*layout)[p].size;
    for (uint32_t off = 0; off + 8 <= size && off <= UINT16_MAX; off += 8) {
      std::optional<uint64_t> v = args.Read({static_cast<uint16_t>(p), static_cast<uint16_t>(off), 8});
      const Allocation* a = v ? ManagedAt(allocs, span, *v) : nullptr;
      if (a == nullptr) continue;
      ByteRange r = extent == PointerExtent::kWholeAllocation ? a->range() : ByteRange{*v, a->range().end};
      if (extent == PointerExtent::kToAllocationEnd && learned != nullptr) {
        if (const std::optional<uint64_t> end = learned->Find(*v, a->id)) r.end = std::min(r.end, *end);
      }
      bool seen = false;  // the same region through another word (an in-place operation's input and output)
      for (size_t i = first; i < out->regions().size() && !seen; ++i) {
        seen = out->regions()[i].range.begin <= r.begin && r.end <= out->regions()[i].range.end;
      }
      if (!seen) out->Add(r, AccessMode::kReadWrite);
    }
  }
}

void ClipToAllocations(const AllocationMap& allocs, size_t first, Prediction* out, ExtentMemo* learn) {
  std::vector<PredictedRegion>& regions = *out->mutable_regions();
  size_t kept = first;
  const Allocation* a = nullptr;  // the last one found: a list's small tensors share a segment
  for (size_t i = first; i < regions.size(); ++i) {
    const uint64_t start = regions[i].start;
    if (a == nullptr || !a->range().Contains(start)) a = allocs.Find(start);
    if (a == nullptr || !IsManaged(a->kind)) continue;
    regions[kept] = regions[i];
    if (regions[kept].range.end > a->range().end) {
      regions[kept].range.end = a->range().end;
    } else if (learn != nullptr && !regions[kept].piece) {
      learn->Learn(start, a->id, regions[kept].range.end);
    }
    ++kept;
  }
  regions.resize(kept);
}

uint32_t FailuresInJobMemory(const Prediction& pred, const AllocationMap& allocs) {
  const auto& bases = pred.failed_bases();
  uint32_t failed = pred.failed_regions() - static_cast<uint32_t>(bases.size());  // no base: nothing to tell by
  if (bases.empty() || allocs.count() == 0) return failed;
  const ByteRange span = allocs.span();
  for (const uint64_t base : bases) failed += ManagedAt(allocs, span, base) != nullptr;
  return failed;
}

const ExtentMemo* LearnedExtentsFor(PredictionSource source, const ExtentMemo* memo) {
  return source == PredictionSource::kPointers ? memo : nullptr;
}

LaunchPrediction::LaunchPrediction(const LaunchToPredict& launch, Prediction* out)
    : args_(launch.args),
      out_(out),
      source_(ChoosePrediction(launch.mode, launch.unknown, launch.tmpl != nullptr, launch.args.layout() != nullptr)),
      unknown_(launch.unknown) {
  if (source_ == PredictionSource::kTemplate) launch.tmpl->Evaluate(launch.args, launch.dims, out);
}

void LaunchPrediction::Judge(const AllocationMap& allocs) {
  failed_ = FailuresInJobMemory(*out_, allocs);
  rule_ = PointerRuleFor(source_, unknown_, failed_);
  if (source_ == PredictionSource::kNone && args_.layout() != nullptr) rule_ = PointerExtent::kToAllocationEnd;
}

bool LaunchPrediction::Complete(const AllocationMap& allocs, ExtentMemo* memo) {
  if (!rule_ && out_->regions().empty()) return false;
  ClipToAllocations(allocs, 0, out_, memo);
  if (rule_) PredictFromPointers(args_, allocs, LearnedExtentsFor(source_, memo), *rule_, out_);
  return true;
}

LaunchPrediction PredictLaunch(const LaunchToPredict& launch, const AllocationMap& allocs, ExtentMemo* memo,
                               Prediction* out) {
  LaunchPrediction lp(launch, out);
  lp.Judge(allocs);
  lp.Complete(allocs, memo);
  return lp;
}

PredictionSource ChoosePrediction(Mode mode, UnknownPolicy unknown, bool has_template, bool args_readable) {
  if (!args_readable) return PredictionSource::kNone;
  if (mode == Mode::kAlloc) return PredictionSource::kWholeAllocations;
  if (has_template) return PredictionSource::kTemplate;
  switch (unknown) {
    case UnknownPolicy::kPointers: return PredictionSource::kPointers;
    case UnknownPolicy::kAlloc: return PredictionSource::kWholeAllocations;
    case UnknownPolicy::kFault: return PredictionSource::kNone;
  }
  return PredictionSource::kNone;
}

std::optional<PointerExtent> PointerRuleFor(PredictionSource source, UnknownPolicy unknown, uint32_t failed_regions) {
  switch (source) {
    case PredictionSource::kPointers: return PointerExtent::kToAllocationEnd;
    case PredictionSource::kWholeAllocations: return PointerExtent::kWholeAllocation;
    case PredictionSource::kTemplate:
      if (failed_regions > 0 && unknown == UnknownPolicy::kPointers) return PointerExtent::kToAllocationEnd;
      return std::nullopt;
    case PredictionSource::kNone: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace msched

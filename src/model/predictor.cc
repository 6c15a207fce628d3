#include "model/predictor.h"

namespace msched {

void PredictAllocations(const ArgView& args, const AllocationMap& allocs, Prediction* out) {
  const ParamLayout* layout = args.layout();
  if (layout == nullptr) return;
  const size_t first = out->regions().size();
  for (size_t p = 0; p < layout->size(); ++p) {
    const uint32_t size = (*layout)[p].size;
    for (uint32_t off = 0; off + 8 <= size && off <= UINT16_MAX; off += 8) {
      std::optional<uint64_t> v = args.Read({static_cast<uint16_t>(p), static_cast<uint16_t>(off), 8});
      if (!v) continue;
      const Allocation* a = allocs.Find(*v);
      if (a == nullptr || !IsManaged(a->kind)) continue;
      bool seen = false;
      for (size_t i = first; i < out->regions().size() && !seen; ++i) seen = out->regions()[i].range.begin == a->base;
      if (!seen) out->Add(a->range(), AccessMode::kReadWrite);
    }
  }
}

PredictionSource ChoosePrediction(Mode mode, UnknownPolicy unknown, bool has_template, bool args_readable) {
  if (!args_readable) return PredictionSource::kNone;
  if (mode == Mode::kAlloc || (!has_template && unknown == UnknownPolicy::kAlloc)) {
    return PredictionSource::kWholeAllocations;
  }
  return has_template ? PredictionSource::kTemplate : PredictionSource::kNone;
}

}  // namespace msched

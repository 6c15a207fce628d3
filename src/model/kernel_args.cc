#include "model/kernel_args.h"

#include <cstring>
#include <string>

namespace msched {

std::string ArgRefToString(const ArgRef& ref) {
  std::string s = "p" + std::to_string(ref.param);
  if (ref.offset != 0) s += "+" + std::to_string(ref.offset);
  if (ref.width == 4) s += ":u32";
  return s;
}

ArgView ArgView::FromKernelParams(const ParamLayout& layout, void* const* params) {
  ArgView v;
  v.layout_ = &layout;
  v.params_ = params;
  return v;
}

ArgView ArgView::FromBuffer(const ParamLayout& layout, const void* buffer, size_t buffer_size) {
  ArgView v;
  v.layout_ = &layout;
  for (const ParamInfo& p : layout) {
    if (uint64_t{p.offset} + p.size > buffer_size) return ArgView();  // unreadable: empty view
  }
  v.buffer_ = static_cast<const uint8_t*>(buffer);
  return v;
}

Result<ArgView> ArgView::FromExtra(const ParamLayout& layout, void* const* extra) {
  if (extra == nullptr) return Status::InvalidArgument("extra is null");
  const void* buffer = nullptr;
  const size_t* size = nullptr;
  // A well-formed list is at most a handful of pairs; the bound stops a
  // runaway scan over a list without CU_LAUNCH_PARAM_END.
  for (int i = 0; i < 64; i += 2) {
    const uintptr_t token = reinterpret_cast<uintptr_t>(extra[i]);
    if (token == kLaunchParamEnd) {
      if (buffer == nullptr || size == nullptr) {
        return Status::InvalidArgument("extra lacks CU_LAUNCH_PARAM_BUFFER_POINTER or _SIZE");
      }
      ArgView v = FromBuffer(layout, buffer, *size);
      if (v.layout_ == nullptr) {
        return Status::InvalidArgument("extra buffer of " + std::to_string(*size) +
                                       " bytes is smaller than the parameter layout");
      }
      return v;
    }
    if (token == kLaunchParamBufferPointer) {
      buffer = extra[i + 1];
    } else if (token == kLaunchParamBufferSize) {
      size = static_cast<const size_t*>(extra[i + 1]);
    } else {
      return Status::InvalidArgument("unknown extra token " + std::to_string(token));
    }
  }
  return Status::InvalidArgument("extra has no CU_LAUNCH_PARAM_END");
}

std::vector<ArgWord> SliceArgWords(const ArgView& view) {
  std::vector<ArgWord> words;
  const ParamLayout* layout = view.layout();
  if (layout == nullptr) return words;
  for (size_t i = 0; i < layout->size() && i < kMaxParams; ++i) {
    const uint32_t size = (*layout)[i].size;
    if (view.ParamBytes(i) == nullptr) continue;
    if (size < 4) {
      const ArgRef ref{static_cast<uint16_t>(i), 0, 4};
      words.push_back({ref, view.Read(ref).value_or(0)});
      continue;
    }
    for (uint32_t off = 0; off + 4 <= size && off <= UINT16_MAX; off += 4) {
      if (off % 8 == 0 && off + 8 <= size) {
        const ArgRef r64{static_cast<uint16_t>(i), static_cast<uint16_t>(off), 8};
        words.push_back({r64, *view.Read(r64)});
      }
      const ArgRef r32{static_cast<uint16_t>(i), static_cast<uint16_t>(off), 4};
      words.push_back({r32, *view.Read(r32)});
    }
  }
  return words;
}

}  // namespace msched

// Reading a launch's argument values: ArgView locates each parameter's bytes
// for either launch form (the kernelParams array or the packed `extra`
// buffer) without copying; SliceArgWords cuts every parameter into the 32-
// and 64-bit words that templates and the profiler refer to.
// ArgView is a non-owning view, valid while the launch's arguments are.
// Thread-compatible. Used by the predictor (hook launch path) and the profiler.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "msched/kernel_desc.h"
#include "msched/status.h"

namespace msched {

// Tokens of the `extra` launch form; equal to cuda.h's CU_LAUNCH_PARAM_*
// (hook/ checks this with static_assert; src/ never includes cuda.h).
inline constexpr uintptr_t kLaunchParamEnd = 0x00;
inline constexpr uintptr_t kLaunchParamBufferPointer = 0x01;
inline constexpr uintptr_t kLaunchParamBufferSize = 0x02;

class ArgView {
 public:
  ArgView() = default;
  // kernelParams form: params[i] points to parameter i's value.
  static ArgView FromKernelParams(const ParamLayout& layout, void* const* params);
  // Packed form: one buffer holding all parameters at their layout offsets.
  static ArgView FromBuffer(const ParamLayout& layout, const void* buffer, size_t buffer_size);
  // `extra` form: parses the token list (BUFFER_POINTER, BUFFER_SIZE, END).
  // Fails on an unknown token, a missing buffer, or a buffer smaller than
  // the layout needs.
  static Result<ArgView> FromExtra(const ParamLayout& layout, void* const* extra);

  // The word `ref` names, zero-extended; nullopt when it lies outside its
  // parameter or the parameter is absent. Inline: template evaluation reads
  // a few words per region on the launch path.
  std::optional<uint64_t> Read(const ArgRef& ref) const {
    const uint8_t* p = ParamBytes(ref.param);
    if (p == nullptr || (ref.width != 4 && ref.width != 8)) return std::nullopt;
    const uint32_t psize = (*layout_)[ref.param].size;
    // A parameter narrower than the word is read zero-extended (e.g. a u8
    // flag or a u32 size read as a 64-bit word at offset 0).
    if (ref.offset >= psize) return std::nullopt;
    const uint32_t avail = psize - ref.offset;
    uint64_t v = 0;
    if (avail >= ref.width) {  // the common case as fixed-size loads (little-endian)
      if (ref.width == 8) {
        std::memcpy(&v, p + ref.offset, 8);
      } else {
        uint32_t w;
        std::memcpy(&w, p + ref.offset, 4);
        v = w;
      }
      return v;
    }
    std::memcpy(&v, p + ref.offset, avail);
    return v;
  }
  // Raw bytes of parameter i, or nullptr.
  const uint8_t* ParamBytes(size_t i) const {
    if (layout_ == nullptr || i >= layout_->size()) return nullptr;
    if (params_ != nullptr) return static_cast<const uint8_t*>(params_[i]);
    if (buffer_ != nullptr) return buffer_ + (*layout_)[i].offset;
    return nullptr;
  }
  const ParamLayout* layout() const { return layout_; }

 private:
  const ParamLayout* layout_ = nullptr;
  void* const* params_ = nullptr;      // kernelParams form
  const uint8_t* buffer_ = nullptr;    // packed form
};

struct ArgWord {
  ArgRef ref;
  uint64_t value = 0;
};

// Every 8-byte-aligned 64-bit word and every 4-byte-aligned 32-bit word of
// every parameter, in parameter and offset order. A parameter smaller than 4
// bytes yields one word of its size, zero-extended.
std::vector<ArgWord> SliceArgWords(const ArgView& view);

}  // namespace msched

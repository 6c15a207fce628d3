// Reading a launch's argument values: ArgView locates each parameter's bytes
// for either launch form (the kernelParams array or the packed `extra`
// buffer) without copying; SliceArgWords cuts every parameter into the 32-
// and 64-bit words that templates and the profiler refer to. An ArgSlot is
// a word resolved against a layout once, for reading on the launch path.
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

// An ArgRef resolved against a parameter layout once (ResolveArgRef), so
// that reading it on the launch path looks nothing up in the layout.
struct ArgSlot {
  uint64_t buffer_offset = 0;  // of its first byte in the packed argument buffer
  uint16_t param = 0;
  uint16_t offset = 0;  // of its first byte in the parameter
  // Bytes read, zero-extended: the word's width, or fewer where the parameter
  // ends first (a u8 flag or a u32 size read as a 64-bit word). 0 when the
  // word can never be read: no such parameter, past its end, or a width
  // other than 4 or 8.
  uint8_t bytes = 0;
};

inline ArgSlot ResolveArgRef(const ParamLayout& layout, const ArgRef& ref) {
  if (ref.param >= layout.size() || (ref.width != 4 && ref.width != 8)) return {};
  const ParamInfo& p = layout[ref.param];
  if (ref.offset >= p.size) return {};
  const uint32_t avail = p.size - ref.offset;
  return {uint64_t{p.offset} + ref.offset, ref.param, ref.offset,
          static_cast<uint8_t>(avail < ref.width ? avail : ref.width)};
}

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

  // Calls f(read) with a reader made for this view's form, read(slot, &v)
  // meaning Read(slot, &v): a caller reading many words (template
  // evaluation, on the launch path) chooses the form once, not per word.
  template <typename F>
  decltype(auto) WithReader(F&& f) const {
    if (params_ != nullptr) return f(ParamsReader{params_});
    if (buffer_ != nullptr) return f(BufferReader{buffer_});
    return f(NoReader{});
  }
  // The word `ref` names, zero-extended; nullopt when it lies outside its
  // parameter or the parameter is absent.
  std::optional<uint64_t> Read(const ArgRef& ref) const {
    uint64_t v = 0;
    if (layout_ == nullptr || !Read(ResolveArgRef(*layout_, ref), &v)) return std::nullopt;
    return v;
  }
  // The same for a word resolved in advance; false where Read(ArgRef) gives
  // nullopt. REQUIRES: `slot` was resolved against a layout equal to this
  // view's (an empty view reads nothing).
  bool Read(const ArgSlot& slot, uint64_t* v) const {
    return WithReader([&](const auto& read) { return read(slot, v); });
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
  // Loads `bytes` (1 to 8) zero-extended: the common widths as fixed-size
  // loads (little-endian).
  static uint64_t Load(const uint8_t* p, uint8_t bytes) {
    if (bytes == 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    if (bytes == 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      return w;
    }
    uint64_t v = 0;
    std::memcpy(&v, p, bytes);
    return v;
  }
  struct ParamsReader {
    void* const* params;
    bool operator()(const ArgSlot& slot, uint64_t* v) const {
      // A slot that can never be read may name a parameter past the array.
      const void* p = slot.bytes == 0 ? nullptr : params[slot.param];
      if (p == nullptr) return false;
      *v = Load(static_cast<const uint8_t*>(p) + slot.offset, slot.bytes);
      return true;
    }
  };
  struct BufferReader {
    const uint8_t* buffer;
    bool operator()(const ArgSlot& slot, uint64_t* v) const {
      if (slot.bytes == 0) return false;
      *v = Load(buffer + slot.buffer_offset, slot.bytes);
      return true;
    }
  };
  struct NoReader {
    bool operator()(const ArgSlot&, uint64_t*) const { return false; }
  };

  const ParamLayout* layout_ = nullptr;
  void* const* params_ = nullptr;    // kernelParams form
  const uint8_t* buffer_ = nullptr;  // packed form
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

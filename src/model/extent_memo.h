// ExtentMemo: how far the data at a pointer reaches, as far as the templates
// that started a region at that pointer predicted it. A program hands the
// same tensor to many kernels; a kernel without a template (cuBLAS picks
// other GEMM kernels at other sizes than the profile saw) then gets, for a
// pointer some templated kernel already used, that tensor's extent rather
// than everything to the end of the allocation, which in a caching
// allocator's segment holds many other tensors. The pointer fallback
// (PredictFromPointers in predictor.h) reads it; ClipToAllocations teaches
// it.
//
// The price: a template that predicts too little at a pointer (fitted at
// sizes that do not extrapolate) passes its misses on to the kernels
// without one that read the same pointer. To keep it low, only a kernel
// without a template reads the memo (LearnedExtentsFor in predictor.h), and
// the memo keeps the largest end any template predicted at a pointer: a
// kernel on a slice that starts at the tensor's pointer (x[:k] in PyTorch)
// never shortens it, and when the caching allocator gives the block to a
// larger tensor the first templated use of that one lengthens it; one given
// to a smaller tensor keeps the longer extent (bytes moved for nothing,
// never a fault).
//
// A fixed table, direct-mapped by pointer: a pointer that takes a slot from
// another replaces it, and a pointer whose slot another took is simply not
// known (the fallback then runs to the end of the allocation, as without a
// memo). Each entry names the allocation by its AllocationMap id, never
// reused, so a freed and remade allocation never inherits an extent.
// Allocates once, at construction; no lookup or store allocates. Externally
// synchronized (the hook holds mu(), as for the AllocationMap).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace msched {

class ExtentMemo {
 public:
  ExtentMemo() : slots_(kSlots) {}

  // The region [pointer, end) of allocation `allocation_id` (an
  // AllocationMap id, never 0) was predicted by a template.
  void Learn(uint64_t pointer, uint64_t allocation_id, uint64_t end) {
    Entry& e = slots_[SlotOf(pointer)];
    if (e.pointer == pointer && e.allocation == allocation_id) {
      e.end = std::max(e.end, end);
    } else {
      e = Entry{pointer, allocation_id, end};
    }
  }

  // The largest end learned for `pointer` in that same allocation, if any.
  std::optional<uint64_t> Find(uint64_t pointer, uint64_t allocation_id) const {
    const Entry& e = slots_[SlotOf(pointer)];
    if (e.allocation == 0 || e.pointer != pointer || e.allocation != allocation_id) return std::nullopt;
    return e.end;
  }

 private:
  // Room to spare for the pointers a program passes (the traces in
  // bench/traces: 85 in the trainer, 324 in the Llama, 1,262 in ResNet-50
  // training), so that few share a slot; 384 KiB.
  static constexpr int kSlotBits = 14;
  static constexpr size_t kSlots = size_t{1} << kSlotBits;
  struct Entry {
    uint64_t pointer = 0;
    uint64_t allocation = 0;  // 0: empty
    uint64_t end = 0;
  };
  // Tensors are at least 256-byte aligned in PyTorch's allocator: the low
  // bits carry nothing, so a multiplicative hash of the rest spreads them.
  static size_t SlotOf(uint64_t pointer) {
    return static_cast<size_t>(((pointer >> 8) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
  }

  std::vector<Entry> slots_;
};

}  // namespace msched

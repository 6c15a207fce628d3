// Kernels known to the simulated device: each declares its parameter
// layout, the memory it touches (as expressions over its arguments, plus
// kinds templates cannot express: data-dependent gathers and bases read from
// memory), its cost (bytes moved, flops), and optionally a host
// implementation that computes on the data. Declared in module files (JSON)
// loaded by cuModuleLoad*/cuLibraryLoad*. A KernelDecl is immutable once its
// module is loaded: thread-safe. Used by sim/ only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "expr.h"
#include "msched/status.h"
#include "msim/msim.h"

namespace msim {

struct AccessSpec {
  enum class Kind { kRange, kStrided, kGather, kIndirect };
  Kind kind = Kind::kRange;
  int param = 0;  // the 64-bit pointer word: parameter and byte offset
  int offset = 0;
  uint32_t mode = 3;    // 1 read, 2 write, 3 both
  ExprPtr base_offset;  // bytes added to the pointer (optional)
  ExprPtr extent;       // region bytes; for kStrided the bytes of each piece
  ExprPtr count;        // kStrided: pieces
  ExprPtr stride;       // kStrided: bytes between piece starts
  ExprPtr pages;        // kGather: pages touched, at random, within the region
  int deref = 0;        // kIndirect: the real base is the u64 at pointer + deref
};

struct KernelDecl {
  static constexpr uint32_t kMagic = 0x6d4b726e;
  uint32_t magic = kMagic;
  std::string name;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size)
  std::vector<AccessSpec> accesses;
  ExprPtr cost_bytes;
  ExprPtr cost_flops;
  std::string host_impl;
};

struct Module {
  static constexpr uint32_t kMagic = 0x6d4d6f64;
  uint32_t magic = kMagic;
  std::vector<std::unique_ptr<KernelDecl>> kernels;
  const KernelDecl* Find(const std::string& name) const;
};

// Parses a module file's text into *out. InvalidArgument naming the kernel
// and field where it is malformed.
msched::Status ParseModule(const std::string& text, Module* out);

// One byte range a launch touches (exact, not page-aligned).
struct TouchedRange {
  uint64_t begin;
  uint64_t end;
  uint32_t mode;
};

// Argument values of one launch, one pointer per parameter.
struct LaunchArgs {
  const KernelDecl* kernel = nullptr;
  void* const* params = nullptr;
  msimLaunchInfo dims{};
  uint64_t sequence = 0;  // seeds gathers, so each launch touches other pages
};

// Evaluates cost expressions and accesses. `read_u64` reads device memory
// for indirect bases (false when unreadable). False when an expression
// fails; *error says which.
bool EvaluateAccesses(const LaunchArgs& args, const std::function<bool(uint64_t, uint64_t*)>& read_u64,
                      std::vector<TouchedRange>* out, std::string* error);
bool EvaluateCost(const LaunchArgs& args, int64_t* bytes, int64_t* flops);

// Host implementations by name: built-ins and msimRegisterHostKernel ones.
void RegisterHostKernel(const std::string& name, msimHostKernel fn);
msimHostKernel FindHostKernel(const std::string& name);
void RegisterBuiltinHostKernels();

}  // namespace msim

// File: msched/templates.h
// Working-set templates (the MSched paper's T1/T2/T3): for each kernel, the
// byte regions a launch touches, as rules over its argument words. This
// header defines the model and the templates file (JSON) format; evaluation
// lives in src/model/template_eval.h. Value types, thread-compatible.
// Included by src/, hook/ and the tools.
//
// Example templates file:
//   {"format": "msched-templates", "version": 1, "kernels": [
//     {"name": "vector_add", "params": [[0,8],[8,8],[16,8],[24,8]],
//      "regions": [
//        {"base": "p0", "kind": "linear", "mode": "read",
//         "extent": {"coef": 4, "factors": ["p3"]}},
//        {"base": "p2", "kind": "strided", "mode": "write",
//         "count": {"factors": ["p3"]}, "stride": 4096, "extent": 512},
//        {"base": "p1", "kind": "rest", "mode": "read"}]}]}
// A region may name the slot of a list it is for (ListSlot below):
//        {"base": "p0+64", "kind": "linear", "extent": {...},
//         "list": {"slot": 8, "slot_of_block": "p0+1760"}}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msched/kernel_desc.h"

namespace msched {

inline constexpr int kTemplateFormatVersion = 1;
inline constexpr std::string_view kTemplateFormatName = "msched-templates";

enum class AccessMode : uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };
const char* AccessModeName(AccessMode mode);

// One factor of a product: an argument word or a launch dimension.
struct Factor {
  enum class Kind : uint8_t { kArg, kGridX, kGridY, kGridZ, kBlockX, kBlockY, kBlockZ };
  Kind kind = Kind::kArg;
  ArgRef arg;  // when kind == kArg

  bool operator==(const Factor&) const = default;
};
inline constexpr size_t kMaxFactors = 4;  // a convolution's filter: K * C * R * S

// value = coef * (product of factors) / div + add, in checked 64-bit integer
// arithmetic. With no factors the product is 1, so {coef 0, add S} and
// {coef S} both denote the constant S.
struct LinearExpr {
  int64_t coef = 0;
  int64_t div = 1;              // > 0
  std::vector<Factor> factors;  // at most kMaxFactors
  int64_t add = 0;

  static LinearExpr Constant(int64_t v) { return LinearExpr{0, 1, {}, v}; }
  bool IsConstant() const { return factors.empty() || coef == 0; }
  bool operator==(const LinearExpr&) const = default;
};

// The slot of a list that a region is for, when the kernel's blocks walk a
// list of tensors in order (PyTorch's TensorListMetadata: an array of
// pointer slots, and a byte per block naming the slot that block works on,
// never decreasing). A launch uses the slots up to its last block's,
// slot_of_block[grid.x - 1]; the slots past it hold whatever an earlier
// launch left there, so the region applies only while `slot` is at most
// that byte. Where the byte cannot be read the region applies.
struct ListSlot {
  uint16_t slot = 0;
  ArgRef slot_of_block;  // the byte array's first byte (`width` unused)

  bool operator==(const ListSlot&) const = default;
};

// A region starts at an argument word holding a pointer (plus a constant
// offset); its extent follows one of the three template kinds.
struct Region {
  enum class Kind : uint8_t {
    kFixed,    // T1: `extent` is a constant
    kLinear,   // T2: `extent` is a LinearExpr over argument words
    kStrided,  // T3: `count` pieces of `extent` bytes, `stride` bytes apart
    kRest,     // from the base to the end of the allocation it points into:
               // a base the profile found touched but whose extent no rule
               // explained (`extent` unused; the prefetch is cut at the
               // allocation's end, model/predictor.h's ClipToAllocations)
  };
  Kind kind = Kind::kFixed;
  ArgRef base;
  int64_t base_offset = 0;
  LinearExpr extent;
  LinearExpr count;   // kStrided only
  LinearExpr stride;  // kStrided only
  AccessMode mode = AccessMode::kReadWrite;
  std::optional<ListSlot> list;  // the list slot it is for, if any

  bool operator==(const Region&) const = default;
};
const char* RegionKindName(Region::Kind kind);

struct KernelTemplate {
  std::string name;    // mangled name as cuFuncGetName reports it
  ParamLayout layout;  // must match the launched kernel's layout
  std::vector<Region> regions;
  std::optional<double> latency_us;  // measured mean, when profiled
  uint64_t calls_seen = 0;           // launches the fit was made from

  bool operator==(const KernelTemplate&) const = default;
};

// A kernel the profiler could not describe (pointer chasing, gathers).
struct UnpredictableKernel {
  std::string name;
  std::string reason;
  bool operator==(const UnpredictableKernel&) const = default;
};

struct TemplateFile {
  std::vector<KernelTemplate> kernels;
  std::vector<UnpredictableKernel> unpredictable;
};

// One problem met while loading; the entry it names was skipped.
struct TemplateProblem {
  std::string file;
  std::string kernel;  // empty for file-level problems
  std::string field;   // JSON path inside the entry, e.g. "regions[2].extent.coef"
  std::string message;
  std::string ToString() const;  // "file: kernel 'k': regions[2].extent.coef: message"
};

struct TemplateLoadResult {
  TemplateFile templates;                 // every entry that loaded cleanly
  std::vector<TemplateProblem> problems;  // one per skipped entry or file-level issue
};

// Parses a templates file. A syntax error loads nothing; any other problem
// (unknown version, wrong type, absurd value) skips only the entry it is in.
// Never throws.
TemplateLoadResult ParseTemplates(std::string_view json_text, std::string_view file_name);
// Reads and parses `path`; an unreadable file is one problem.
TemplateLoadResult LoadTemplatesFile(const std::string& path);
// Pretty-printed JSON that ParseTemplates reads back to an equal TemplateFile.
std::string SerializeTemplates(const TemplateFile& file);

// Text forms used in files and reports: "p3", "p3+8:u32", "grid.x", "block.z".
std::string FactorToString(const Factor& f);
std::optional<Factor> ParseFactor(std::string_view text);
std::optional<ArgRef> ParseArgRef(std::string_view text);
// "4*p3:u32+64", "p1*p2/8", "4096": for reports.
std::string LinearExprToString(const LinearExpr& e);

}  // namespace msched

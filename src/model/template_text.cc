// Text forms of template pieces ("p3+8:u32", "grid.x", "4*p3+64").
#include <charconv>

#include "msched/templates.h"

namespace msched {
namespace {

struct DimName {
  Factor::Kind kind;
  std::string_view name;
};
constexpr DimName kDimNames[] = {
    {Factor::Kind::kGridX, "grid.x"},   {Factor::Kind::kGridY, "grid.y"},   {Factor::Kind::kGridZ, "grid.z"},
    {Factor::Kind::kBlockX, "block.x"}, {Factor::Kind::kBlockY, "block.y"}, {Factor::Kind::kBlockZ, "block.z"},
};

bool ParseUint(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && *out <= max;
}

}  // namespace

const char* AccessModeName(AccessMode mode) {
  switch (mode) {
    case AccessMode::kRead: return "read";
    case AccessMode::kWrite: return "write";
    case AccessMode::kReadWrite: return "readwrite";
  }
  return "readwrite";
}

const char* RegionKindName(Region::Kind kind) {
  switch (kind) {
    case Region::Kind::kFixed: return "fixed";
    case Region::Kind::kLinear: return "linear";
    case Region::Kind::kStrided: return "strided";
    case Region::Kind::kRest: return "rest";
  }
  return "fixed";
}

std::optional<ArgRef> ParseArgRef(std::string_view text) {
  if (text.size() < 2 || text[0] != 'p') return std::nullopt;
  text.remove_prefix(1);
  ArgRef ref;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    const std::string_view w = text.substr(colon + 1);
    if (w == "u32")
      ref.width = 4;
    else if (w == "u64")
      ref.width = 8;
    else
      return std::nullopt;
    text = text.substr(0, colon);
  }
  uint64_t param = 0, offset = 0;
  if (auto plus = text.find('+'); plus != std::string_view::npos) {
    if (!ParseUint(text.substr(plus + 1), UINT16_MAX, &offset)) return std::nullopt;
    text = text.substr(0, plus);
  }
  if (!ParseUint(text, kMaxParams - 1, &param)) return std::nullopt;
  ref.param = static_cast<uint16_t>(param);
  ref.offset = static_cast<uint16_t>(offset);
  return ref;
}

std::optional<Factor> ParseFactor(std::string_view text) {
  for (const DimName& d : kDimNames) {
    if (text == d.name) return Factor{d.kind, {}};
  }
  std::optional<ArgRef> ref = ParseArgRef(text);
  if (!ref) return std::nullopt;
  return Factor{Factor::Kind::kArg, *ref};
}

std::string FactorToString(const Factor& f) {
  for (const DimName& d : kDimNames) {
    if (f.kind == d.kind) return std::string(d.name);
  }
  return ArgRefToString(f.arg);
}

std::string LinearExprToString(const LinearExpr& e) {
  if (e.IsConstant()) return std::to_string(e.add + (e.factors.empty() ? e.coef / e.div : 0));
  std::string s;
  if (e.coef != 1) s += std::to_string(e.coef) + "*";
  for (size_t i = 0; i < e.factors.size(); ++i) {
    if (i) s += "*";
    s += FactorToString(e.factors[i]);
  }
  if (e.div != 1) s += "/" + std::to_string(e.div);
  if (e.add > 0) s += "+" + std::to_string(e.add);
  if (e.add < 0) s += std::to_string(e.add);
  return s;
}

std::string TemplateProblem::ToString() const {
  std::string s = file;
  if (!kernel.empty()) s += ": kernel '" + kernel + "'";
  if (!field.empty()) s += ": " + field;
  s += ": " + message;
  return s;
}

}  // namespace msched

// Reading and writing templates files. Every field is type-checked before it
// is used, so malformed input becomes a TemplateProblem. Inside this file a
// broken entry returns its problem (EntryParser) to the loop over entries,
// which records it and goes on; nothing here throws.
#include <limits>
#include <tuple>

#include <nlohmann/json.hpp>

#include "msched/bounded_input.h"
#include "msched/status.h"
#include "msched/templates.h"

namespace msched {
namespace {

using json = nlohmann::json;

// Bounds that no real kernel comes near; a value past them is a broken file.
constexpr int64_t kMaxConstant = int64_t{1} << 48;  // 256 TiB
constexpr int64_t kMaxDivisor = int64_t{1} << 32;
constexpr uint32_t kMaxParamBytes = 32768;  // CUDA's parameter limit is 32764

// Parses one kernel entry. Each step returns a Status or Result; on the
// first problem the entry is given up, with the field it was found in kept
// for the TemplateProblem (failed_field()). One parser per entry.
class EntryParser {
 public:
  Result<KernelTemplate> Kernel(const json& j, int file_version);
  // The field of the last problem returned ("" for the entry as a whole).
  const std::string& failed_field() const { return field_; }

 private:
  Status Fail(std::string field, std::string message) {
    field_ = std::move(field);
    return Status::InvalidArgument(std::move(message));
  }
  Result<int64_t> GetInt(const json& j, const std::string& field, int64_t lo, int64_t hi);
  Result<std::string> GetString(const json& j, const std::string& field);
  Result<const json*> Require(const json& obj, const char* key, const std::string& prefix);
  Result<ParamLayout> Layout(const json& j);
  Status CheckArgRef(const ArgRef& ref, const ParamLayout& layout, const std::string& field);
  Result<Factor> FactorField(const json& j, const ParamLayout& layout, const std::string& field);
  Result<LinearExpr> Expr(const json& j, const ParamLayout& layout, const std::string& field);
  // Expr of the member `key`, which must be there, as field `field`.
  Result<LinearExpr> RequiredExpr(const json& j, const char* key, const ParamLayout& layout, const std::string& f);
  Result<AccessMode> Mode(const json& j, const std::string& field);
  Result<ListSlot> List(const json& j, const ParamLayout& layout, const std::string& f);
  Result<Region> ParseRegion(const json& j, const ParamLayout& layout, const std::string& f);

  std::string field_;
};

Result<int64_t> EntryParser::GetInt(const json& j, const std::string& field, int64_t lo, int64_t hi) {
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) {
      return Fail(field,
                  "value " + std::to_string(u) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) {
      return Fail(field,
                  "value " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return v;
  }
  if (j.is_number_float()) return Fail(field, "must be an integer, got " + j.dump());
  return Fail(field, std::string("must be an integer, got ") + j.type_name());
}

Result<std::string> EntryParser::GetString(const json& j, const std::string& field) {
  if (!j.is_string()) return Fail(field, std::string("must be a string, got ") + j.type_name());
  return j.get_ref<const std::string&>();
}

Result<const json*> EntryParser::Require(const json& obj, const char* key, const std::string& prefix) {
  auto it = obj.find(key);
  if (it == obj.end()) return Fail(prefix + key, "missing");
  return &*it;
}

Result<ParamLayout> EntryParser::Layout(const json& j) {
  if (!j.is_array()) return Fail("params", "must be an array of [offset, size]");
  if (j.size() > kMaxParams) return Fail("params", "more than " + std::to_string(kMaxParams) + " parameters");
  ParamLayout layout;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string f = "params[" + std::to_string(i) + "]";
    const json& p = j[i];
    const json* offset = nullptr;
    const json* size = nullptr;
    if (p.is_array() && p.size() == 2) {
      offset = &p[0];
      size = &p[1];
    } else if (!p.is_object()) {
      return Fail(f, "must be [offset, size] or {offset, size}");
    }
    // An object's members are looked up one at a time: a missing size is
    // reported only once the offset has passed.
    if (offset == nullptr) {
      Result<const json*> o = Require(p, "offset", f + ".");
      if (!o.ok()) return o.status();
      offset = *o;
    }
    ParamInfo info;
    Result<int64_t> o = GetInt(*offset, f + ".offset", 0, kMaxParamBytes);
    if (!o.ok()) return o.status();
    info.offset = static_cast<uint32_t>(*o);
    if (size == nullptr) {
      Result<const json*> n = Require(p, "size", f + ".");
      if (!n.ok()) return n.status();
      size = *n;
    }
    Result<int64_t> n = GetInt(*size, f + ".size", 1, kMaxParamBytes);
    if (!n.ok()) return n.status();
    info.size = static_cast<uint32_t>(*n);
    if (info.offset + info.size > kMaxParamBytes) return Fail(f, "parameter ends past 32 KiB");
    layout.push_back(info);
  }
  return layout;
}

Status EntryParser::CheckArgRef(const ArgRef& ref, const ParamLayout& layout, const std::string& field) {
  if (ref.param >= layout.size()) {
    return Fail(field,
                "parameter " + std::to_string(ref.param) + " but the kernel has " + std::to_string(layout.size()));
  }
  const uint32_t size = layout[ref.param].size;
  if (ref.offset >= size) {
    return Fail(field, "offset " + std::to_string(ref.offset) + " past parameter size " + std::to_string(size));
  }
  return Status::Ok();
}

Result<Factor> EntryParser::FactorField(const json& j, const ParamLayout& layout, const std::string& field) {
  Result<std::string> text = GetString(j, field);
  if (!text.ok()) return text.status();
  std::optional<Factor> f = ParseFactor(*text);
  if (!f) return Fail(field, "'" + *text + "' is not pN[+off][:u32|:u64], grid.[xyz] or block.[xyz]");
  if (f->kind == Factor::Kind::kArg) MSCHED_RETURN_IF_ERROR(CheckArgRef(f->arg, layout, field));
  return *f;
}

Result<LinearExpr> EntryParser::Expr(const json& j, const ParamLayout& layout, const std::string& field) {
  if (j.is_number()) {
    Result<int64_t> v = GetInt(j, field, 0, kMaxConstant);
    if (!v.ok()) return v.status();
    return LinearExpr::Constant(*v);
  }
  if (!j.is_object()) return Fail(field, "must be an integer or {coef, div, factors, add}");
  LinearExpr e;
  if (auto it = j.find("factors"); it != j.end()) {
    if (!it->is_array()) return Fail(field + ".factors", "must be an array");
    if (it->size() > kMaxFactors) {
      return Fail(field + ".factors", "more than " + std::to_string(kMaxFactors) + " factors");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      Result<Factor> f = FactorField((*it)[i], layout, field + ".factors[" + std::to_string(i) + "]");
      if (!f.ok()) return f.status();
      e.factors.push_back(*f);
    }
  }
  // The coefficient defaults to 1 on a product and to 0 on a bare constant.
  e.coef = e.factors.empty() ? 0 : 1;
  for (auto [key, out, lo, hi] :
       {std::tuple{"coef", &e.coef, -kMaxConstant, kMaxConstant}, std::tuple{"div", &e.div, int64_t{1}, kMaxDivisor},
        std::tuple{"add", &e.add, -kMaxConstant, kMaxConstant}}) {
    if (auto it = j.find(key); it != j.end()) {
      Result<int64_t> v = GetInt(*it, field + "." + key, lo, hi);
      if (!v.ok()) return v.status();
      *out = *v;
    }
  }
  if (e.factors.empty()) {  // a constant written as an object
    const int64_t v = e.coef / e.div + e.add;
    if (v < 0 || v > kMaxConstant) return Fail(field, "constant " + std::to_string(v) + " out of range");
    return LinearExpr::Constant(v);
  }
  return e;
}

Result<LinearExpr> EntryParser::RequiredExpr(const json& j, const char* key, const ParamLayout& layout,
                                             const std::string& f) {
  Result<const json*> member = Require(j, key, f + ".");
  if (!member.ok()) return member.status();
  return Expr(**member, layout, f + "." + key);
}

Result<AccessMode> EntryParser::Mode(const json& j, const std::string& field) {
  Result<std::string> s = GetString(j, field);
  if (!s.ok()) return s.status();
  if (*s == "read") return AccessMode::kRead;
  if (*s == "write") return AccessMode::kWrite;
  if (*s == "readwrite") return AccessMode::kReadWrite;
  return Fail(field, "'" + *s + "' is not read, write or readwrite");
}

Result<ListSlot> EntryParser::List(const json& j, const ParamLayout& layout, const std::string& f) {
  if (!j.is_object()) return Fail(f, "must be an object");
  ListSlot list;
  Result<const json*> slot_field = Require(j, "slot", f + ".");
  if (!slot_field.ok()) return slot_field.status();
  Result<int64_t> slot = GetInt(**slot_field, f + ".slot", 0, UINT8_MAX);  // the bytes name slots 0-255
  if (!slot.ok()) return slot.status();
  list.slot = static_cast<uint16_t>(*slot);
  Result<const json*> array_field = Require(j, "slot_of_block", f + ".");
  if (!array_field.ok()) return array_field.status();
  Result<std::string> array_text = GetString(**array_field, f + ".slot_of_block");
  if (!array_text.ok()) return array_text.status();
  std::optional<ArgRef> array = ParseArgRef(*array_text);
  if (!array || array->width != 8) return Fail(f + ".slot_of_block", "'" + *array_text + "' is not pN[+off]");
  MSCHED_RETURN_IF_ERROR(CheckArgRef(*array, layout, f + ".slot_of_block"));
  list.slot_of_block = *array;
  return list;
}

Result<Region> EntryParser::ParseRegion(const json& j, const ParamLayout& layout, const std::string& f) {
  if (!j.is_object()) return Fail(f, "must be an object");
  Region r;
  Result<const json*> base_field = Require(j, "base", f + ".");
  if (!base_field.ok()) return base_field.status();
  Result<std::string> base_text = GetString(**base_field, f + ".base");
  if (!base_text.ok()) return base_text.status();
  std::optional<ArgRef> base = ParseArgRef(*base_text);
  if (!base) return Fail(f + ".base", "'" + *base_text + "' is not pN[+off]");
  if (base->width != 8) return Fail(f + ".base", "a base must be a 64-bit word");
  MSCHED_RETURN_IF_ERROR(CheckArgRef(*base, layout, f + ".base"));
  r.base = *base;
  if (layout[r.base.param].size < r.base.offset + 8u) {
    return Fail(f + ".base", "a 64-bit base does not fit in parameter " + std::to_string(r.base.param));
  }
  if (auto it = j.find("offset"); it != j.end()) {
    Result<int64_t> offset = GetInt(*it, f + ".offset", -kMaxConstant, kMaxConstant);
    if (!offset.ok()) return offset.status();
    r.base_offset = *offset;
  }
  if (auto it = j.find("mode"); it != j.end()) {
    Result<AccessMode> mode = Mode(*it, f + ".mode");
    if (!mode.ok()) return mode.status();
    r.mode = *mode;
  }
  if (auto it = j.find("list"); it != j.end()) {
    Result<ListSlot> list = List(*it, layout, f + ".list");
    if (!list.ok()) return list.status();
    r.list = *list;
  }
  Result<const json*> kind_field = Require(j, "kind", f + ".");
  if (!kind_field.ok()) return kind_field.status();
  Result<std::string> kind = GetString(**kind_field, f + ".kind");
  if (!kind.ok()) return kind.status();
  if (*kind == "rest") {
    r.kind = Region::Kind::kRest;
    return r;
  }
  Result<LinearExpr> extent = RequiredExpr(j, "extent", layout, f);
  if (!extent.ok()) return extent.status();
  r.extent = std::move(*extent);
  if (*kind == "fixed") {
    r.kind = Region::Kind::kFixed;
    if (!r.extent.IsConstant()) return Fail(f + ".extent", "a fixed region needs a constant extent");
  } else if (*kind == "linear") {
    r.kind = Region::Kind::kLinear;
  } else if (*kind == "strided") {
    r.kind = Region::Kind::kStrided;
    Result<LinearExpr> count = RequiredExpr(j, "count", layout, f);
    if (!count.ok()) return count.status();
    r.count = std::move(*count);
    Result<LinearExpr> stride = RequiredExpr(j, "stride", layout, f);
    if (!stride.ok()) return stride.status();
    r.stride = std::move(*stride);
  } else {
    return Fail(f + ".kind", "'" + *kind + "' is not fixed, linear, strided or rest");
  }
  return r;
}

Result<KernelTemplate> EntryParser::Kernel(const json& j, int file_version) {
  if (!j.is_object()) return Fail("", "kernel entry must be an object");
  int version = file_version;
  if (auto it = j.find("version"); it != j.end()) {
    Result<int64_t> v = GetInt(*it, "version", 0, 1 << 20);
    if (!v.ok()) return v.status();
    version = static_cast<int>(*v);
  }
  if (version != kTemplateFormatVersion) {
    return Fail("version", "format version " + std::to_string(version) + " is not supported (this msched reads " +
                               std::to_string(kTemplateFormatVersion) + ")");
  }
  KernelTemplate k;
  Result<const json*> params = Require(j, "params", "");
  if (!params.ok()) return params.status();
  Result<ParamLayout> layout = Layout(**params);
  if (!layout.ok()) return layout.status();
  k.layout = std::move(*layout);
  if (auto it = j.find("latency_us"); it != j.end()) {
    if (!it->is_number() || it->get<double>() < 0) return Fail("latency_us", "must be a non-negative number");
    k.latency_us = it->get<double>();
  }
  if (auto it = j.find("calls"); it != j.end()) {
    Result<int64_t> calls = GetInt(*it, "calls", 0, kMaxConstant);
    if (!calls.ok()) return calls.status();
    k.calls_seen = static_cast<uint64_t>(*calls);
  }
  Result<const json*> regions = Require(j, "regions", "");
  if (!regions.ok()) return regions.status();
  if (!(*regions)->is_array()) return Fail("regions", "must be an array");
  for (size_t i = 0; i < (*regions)->size(); ++i) {
    Result<Region> r = ParseRegion((**regions)[i], k.layout, "regions[" + std::to_string(i) + "]");
    if (!r.ok()) return r.status();
    k.regions.push_back(std::move(*r));
  }
  return k;
}

std::string EntryName(const json& j) {
  if (j.is_object()) {
    auto it = j.find("name");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

json ExprToJson(const LinearExpr& e) {
  if (e.IsConstant()) return e.add + (e.factors.empty() ? e.coef / e.div : 0);
  json factors = json::array();
  for (const Factor& f : e.factors) factors.push_back(FactorToString(f));
  json j = {{"coef", e.coef}, {"factors", factors}};
  if (e.div != 1) j["div"] = e.div;
  if (e.add != 0) j["add"] = e.add;
  return j;
}

TemplateLoadResult ParseDocument(const json& doc, const std::string& file) {
  TemplateLoadResult out;
  auto problem = [&](std::string kernel, std::string field, std::string msg) {
    out.problems.push_back({file, std::move(kernel), std::move(field), std::move(msg)});
  };
  if (!doc.is_object()) {
    problem("", "", "top level must be an object");
    return out;
  }
  int version = kTemplateFormatVersion;
  if (auto it = doc.find("format");
      it == doc.end() || !it->is_string() || it->get<std::string>() != kTemplateFormatName) {
    problem("", "format", "expected \"msched-templates\"");
    return out;
  }
  if (auto it = doc.find("version"); it != doc.end()) {
    if (it->is_number_integer()) version = it->get<int>();
    if (!it->is_number_integer() || version != kTemplateFormatVersion) {
      // Entries may still carry a version this msched reads; each is judged alone.
      problem("", "version",
              "file format version " + it->dump() +
                  " is not supported; loading only entries "
                  "that declare version " +
                  std::to_string(kTemplateFormatVersion));
    }
  }
  if (auto it = doc.find("kernels"); it != doc.end()) {
    if (!it->is_array()) {
      problem("", "kernels", "must be an array");
    } else {
      for (size_t i = 0; i < it->size(); ++i) {
        const json& entry = (*it)[i];
        const std::string name = EntryName(entry);
        if (name.empty()) {
          problem("#" + std::to_string(i), "name", "missing or not a string");
          continue;
        }
        EntryParser parser;
        Result<KernelTemplate> k = parser.Kernel(entry, version);
        if (!k.ok()) {
          problem(name, parser.failed_field(), k.status().message());
          continue;
        }
        k->name = name;
        out.templates.kernels.push_back(std::move(*k));
      }
    }
  }
  if (auto it = doc.find("unpredictable"); it != doc.end() && it->is_array()) {
    for (const json& u : *it) {
      const std::string name = EntryName(u);
      auto reason = u.is_object() ? u.find("reason") : u.end();
      if (name.empty() || reason == u.end() || !reason->is_string()) {
        problem(name, "unpredictable", "entry needs string name and reason");
        continue;
      }
      out.templates.unpredictable.push_back({name, reason->get<std::string>()});
    }
  }
  return out;
}

}  // namespace

TemplateLoadResult ParseTemplates(std::string_view json_text, std::string_view file_name) {
  const std::string file(file_name);
  // Checked before parsing: nothing below (parser, accessors, messages) may
  // recurse over a value nested thousands deep.
  if (std::string error; !CheckJsonDepth(json_text, kMaxJsonDepth, &error)) {
    TemplateLoadResult out;
    out.problems.push_back({file, "", "", error});
    return out;
  }
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    TemplateLoadResult out;
    out.problems.push_back({file, "", "", "not valid JSON (truncated or malformed)"});
    return out;
  }
  try {
    return ParseDocument(doc, file);
  } catch (const std::exception& e) {  // backstop: a json accessor we did not guard
    TemplateLoadResult out;
    out.problems.push_back({file, "", "", std::string("internal parse error: ") + e.what()});
    return out;
  }
}

TemplateLoadResult LoadTemplatesFile(const std::string& path) {
  std::string text, error;
  if (!ReadRegularFile(path, kMaxTemplatesFileBytes, &text, &error)) {
    TemplateLoadResult out;
    out.problems.push_back({path, "", "", error});
    return out;
  }
  return ParseTemplates(text, path);
}

std::string SerializeTemplates(const TemplateFile& file) {
  json kernels = json::array();
  for (const KernelTemplate& k : file.kernels) {
    json params = json::array();
    for (const ParamInfo& p : k.layout) params.push_back({p.offset, p.size});
    json regions = json::array();
    for (const Region& r : k.regions) {
      json jr = {{"base", ArgRefToString(r.base)}, {"kind", RegionKindName(r.kind)}, {"mode", AccessModeName(r.mode)}};
      if (r.kind != Region::Kind::kRest) jr["extent"] = ExprToJson(r.extent);
      if (r.base_offset != 0) jr["offset"] = r.base_offset;
      if (r.list) {
        jr["list"] = {{"slot", r.list->slot}, {"slot_of_block", ArgRefToString(r.list->slot_of_block)}};
      }
      if (r.kind == Region::Kind::kStrided) {
        jr["count"] = ExprToJson(r.count);
        jr["stride"] = ExprToJson(r.stride);
      }
      regions.push_back(std::move(jr));
    }
    json jk = {{"name", k.name}, {"params", params}, {"regions", regions}};
    if (k.latency_us) jk["latency_us"] = *k.latency_us;
    if (k.calls_seen) jk["calls"] = k.calls_seen;
    kernels.push_back(std::move(jk));
  }
  json unpredictable = json::array();
  for (const UnpredictableKernel& u : file.unpredictable) {
    unpredictable.push_back({{"name", u.name}, {"reason", u.reason}});
  }
  json doc = {{"format", kTemplateFormatName},
              {"version", kTemplateFormatVersion},
              {"kernels", kernels},
              {"unpredictable", unpredictable}};
  return doc.dump(2) + "\n";
}

}  // namespace msched

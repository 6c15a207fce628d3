// Reading and writing templates files. Every field is type-checked before it
// is used, so malformed input becomes a TemplateProblem. Inside this file a
// broken entry unwinds with EntryError to the loop over entries, which
// records it and goes on; no exception leaves ParseTemplates.
#include <limits>

#include <nlohmann/json.hpp>

#include "msched/bounded_input.h"
#include "msched/templates.h"

namespace msched {
namespace {

using json = nlohmann::json;

// Bounds that no real kernel comes near; a value past them is a broken file.
constexpr int64_t kMaxConstant = int64_t{1} << 48;   // 256 TiB
constexpr int64_t kMaxDivisor = int64_t{1} << 32;
constexpr uint32_t kMaxParamBytes = 32768;          // CUDA's parameter limit is 32764

// Raised inside the parser for one entry; caught per entry.
struct EntryError {
  std::string field;
  std::string message;
};

int64_t GetInt(const json& j, const std::string& field, int64_t lo, int64_t hi) {
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) {
      throw EntryError{field, "value " + std::to_string(u) + " outside [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]"};
    }
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < lo || v > hi) {
      throw EntryError{field, "value " + std::to_string(v) + " outside [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]"};
    }
    return v;
  }
  if (j.is_number_float()) throw EntryError{field, "must be an integer, got " + j.dump()};
  throw EntryError{field, std::string("must be an integer, got ") + j.type_name()};
}

const std::string& GetString(const json& j, const std::string& field) {
  if (!j.is_string()) throw EntryError{field, std::string("must be a string, got ") + j.type_name()};
  return j.get_ref<const std::string&>();
}

const json& Require(const json& obj, const char* key, const std::string& prefix) {
  auto it = obj.find(key);
  if (it == obj.end()) throw EntryError{prefix + key, "missing"};
  return *it;
}

ParamLayout ParseLayout(const json& j) {
  if (!j.is_array()) throw EntryError{"params", "must be an array of [offset, size]"};
  if (j.size() > kMaxParams) throw EntryError{"params", "more than " + std::to_string(kMaxParams) + " parameters"};
  ParamLayout layout;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string f = "params[" + std::to_string(i) + "]";
    const json& p = j[i];
    ParamInfo info;
    if (p.is_array() && p.size() == 2) {
      info.offset = static_cast<uint32_t>(GetInt(p[0], f + ".offset", 0, kMaxParamBytes));
      info.size = static_cast<uint32_t>(GetInt(p[1], f + ".size", 1, kMaxParamBytes));
    } else if (p.is_object()) {
      info.offset = static_cast<uint32_t>(GetInt(Require(p, "offset", f + "."), f + ".offset", 0, kMaxParamBytes));
      info.size = static_cast<uint32_t>(GetInt(Require(p, "size", f + "."), f + ".size", 1, kMaxParamBytes));
    } else {
      throw EntryError{f, "must be [offset, size] or {offset, size}"};
    }
    if (info.offset + info.size > kMaxParamBytes) throw EntryError{f, "parameter ends past 32 KiB"};
    layout.push_back(info);
  }
  return layout;
}

ArgRef CheckArgRef(const ArgRef& ref, const ParamLayout& layout, const std::string& field) {
  if (ref.param >= layout.size()) {
    throw EntryError{field, "parameter " + std::to_string(ref.param) + " but the kernel has " +
                                std::to_string(layout.size())};
  }
  const uint32_t size = layout[ref.param].size;
  if (ref.offset >= size) {
    throw EntryError{field, "offset " + std::to_string(ref.offset) + " past parameter size " + std::to_string(size)};
  }
  return ref;
}

Factor ParseFactorField(const json& j, const ParamLayout& layout, const std::string& field) {
  const std::string& text = GetString(j, field);
  std::optional<Factor> f = ParseFactor(text);
  if (!f) throw EntryError{field, "'" + text + "' is not pN[+off][:u32|:u64], grid.[xyz] or block.[xyz]"};
  if (f->kind == Factor::Kind::kArg) CheckArgRef(f->arg, layout, field);
  return *f;
}

LinearExpr ParseExpr(const json& j, const ParamLayout& layout, const std::string& field) {
  if (j.is_number()) return LinearExpr::Constant(GetInt(j, field, 0, kMaxConstant));
  if (!j.is_object()) throw EntryError{field, "must be an integer or {coef, div, factors, add}"};
  LinearExpr e;
  if (auto it = j.find("factors"); it != j.end()) {
    if (!it->is_array()) throw EntryError{field + ".factors", "must be an array"};
    if (it->size() > kMaxFactors) {
      throw EntryError{field + ".factors", "more than " + std::to_string(kMaxFactors) + " factors"};
    }
    for (size_t i = 0; i < it->size(); ++i) {
      e.factors.push_back(ParseFactorField((*it)[i], layout, field + ".factors[" + std::to_string(i) + "]"));
    }
  }
  // The coefficient defaults to 1 on a product and to 0 on a bare constant.
  e.coef = e.factors.empty() ? 0 : 1;
  if (auto it = j.find("coef"); it != j.end()) e.coef = GetInt(*it, field + ".coef", -kMaxConstant, kMaxConstant);
  if (auto it = j.find("div"); it != j.end()) e.div = GetInt(*it, field + ".div", 1, kMaxDivisor);
  if (auto it = j.find("add"); it != j.end()) e.add = GetInt(*it, field + ".add", -kMaxConstant, kMaxConstant);
  if (e.factors.empty()) {  // a constant written as an object
    const int64_t v = e.coef / e.div + e.add;
    if (v < 0 || v > kMaxConstant) throw EntryError{field, "constant " + std::to_string(v) + " out of range"};
    return LinearExpr::Constant(v);
  }
  return e;
}

AccessMode ParseMode(const json& j, const std::string& field) {
  const std::string& s = GetString(j, field);
  if (s == "read") return AccessMode::kRead;
  if (s == "write") return AccessMode::kWrite;
  if (s == "readwrite") return AccessMode::kReadWrite;
  throw EntryError{field, "'" + s + "' is not read, write or readwrite"};
}

Region ParseRegion(const json& j, const ParamLayout& layout, const std::string& f) {
  if (!j.is_object()) throw EntryError{f, "must be an object"};
  Region r;
  const std::string& base_text = GetString(Require(j, "base", f + "."), f + ".base");
  std::optional<ArgRef> base = ParseArgRef(base_text);
  if (!base) throw EntryError{f + ".base", "'" + base_text + "' is not pN[+off]"};
  if (base->width != 8) throw EntryError{f + ".base", "a base must be a 64-bit word"};
  r.base = CheckArgRef(*base, layout, f + ".base");
  if (layout[r.base.param].size < r.base.offset + 8u) {
    throw EntryError{f + ".base", "a 64-bit base does not fit in parameter " + std::to_string(r.base.param)};
  }
  if (auto it = j.find("offset"); it != j.end()) {
    r.base_offset = GetInt(*it, f + ".offset", -kMaxConstant, kMaxConstant);
  }
  if (auto it = j.find("mode"); it != j.end()) r.mode = ParseMode(*it, f + ".mode");
  const std::string& kind = GetString(Require(j, "kind", f + "."), f + ".kind");
  if (kind == "rest") {
    r.kind = Region::Kind::kRest;
    return r;
  }
  r.extent = ParseExpr(Require(j, "extent", f + "."), layout, f + ".extent");
  if (kind == "fixed") {
    r.kind = Region::Kind::kFixed;
    if (!r.extent.IsConstant()) throw EntryError{f + ".extent", "a fixed region needs a constant extent"};
  } else if (kind == "linear") {
    r.kind = Region::Kind::kLinear;
  } else if (kind == "strided") {
    r.kind = Region::Kind::kStrided;
    r.count = ParseExpr(Require(j, "count", f + "."), layout, f + ".count");
    r.stride = ParseExpr(Require(j, "stride", f + "."), layout, f + ".stride");
  } else {
    throw EntryError{f + ".kind", "'" + kind + "' is not fixed, linear, strided or rest"};
  }
  return r;
}

KernelTemplate ParseKernel(const json& j, int file_version) {
  if (!j.is_object()) throw EntryError{"", "kernel entry must be an object"};
  int version = file_version;
  if (auto it = j.find("version"); it != j.end()) version = static_cast<int>(GetInt(*it, "version", 0, 1 << 20));
  if (version != kTemplateFormatVersion) {
    throw EntryError{"version", "format version " + std::to_string(version) + " is not supported (this msched reads " +
                                    std::to_string(kTemplateFormatVersion) + ")"};
  }
  KernelTemplate k;
  k.layout = ParseLayout(Require(j, "params", ""));
  if (auto it = j.find("latency_us"); it != j.end()) {
    if (!it->is_number() || it->get<double>() < 0) throw EntryError{"latency_us", "must be a non-negative number"};
    k.latency_us = it->get<double>();
  }
  if (auto it = j.find("calls"); it != j.end()) k.calls_seen = static_cast<uint64_t>(GetInt(*it, "calls", 0, kMaxConstant));
  const json& regions = Require(j, "regions", "");
  if (!regions.is_array()) throw EntryError{"regions", "must be an array"};
  for (size_t i = 0; i < regions.size(); ++i) {
    k.regions.push_back(ParseRegion(regions[i], k.layout, "regions[" + std::to_string(i) + "]"));
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
  if (auto it = doc.find("format"); it == doc.end() || !it->is_string() || it->get<std::string>() != kTemplateFormatName) {
    problem("", "format", "expected \"msched-templates\"");
    return out;
  }
  if (auto it = doc.find("version"); it != doc.end()) {
    if (it->is_number_integer()) version = it->get<int>();
    if (!it->is_number_integer() || version != kTemplateFormatVersion) {
      // Entries may still carry a version this msched reads; each is judged alone.
      problem("", "version", "file format version " + it->dump() + " is not supported; loading only entries "
              "that declare version " + std::to_string(kTemplateFormatVersion));
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
        try {
          KernelTemplate k = ParseKernel(entry, version);
          k.name = name;
          out.templates.kernels.push_back(std::move(k));
        } catch (const EntryError& e) {
          problem(name, e.field, e.message);
        }
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

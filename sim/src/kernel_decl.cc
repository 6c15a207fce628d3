#include "kernel_decl.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "expr_json.h"
#include "msched/json_checked.h"
#include "msched/leading_int.h"
#include "msched/no_destructor.h"

namespace msim {
namespace {

using json = nlohmann::json;
using msched::Assign;
using msched::Result;
using msched::Status;

class LaunchContext : public ExprContext {
 public:
  explicit LaunchContext(const LaunchArgs& a) : a_(a) {}
  bool Arg(int param, int offset, int width, int64_t* out) const override {
    if (param < 0 || static_cast<size_t>(param) >= a_.kernel->params.size() || a_.params == nullptr) return false;
    const uint32_t size = a_.kernel->params[param].second;
    if (static_cast<uint32_t>(offset) >= size) return false;
    const uint32_t avail = size - static_cast<uint32_t>(offset);
    uint64_t v = 0;
    std::memcpy(&v, static_cast<const char*>(a_.params[param]) + offset,
                avail < static_cast<uint32_t>(width) ? avail : width);
    *out = static_cast<int64_t>(v);
    return true;
  }
  bool Dim(int which, int64_t* out) const override {
    *out = which < 3 ? a_.dims.grid[which] : a_.dims.block[which - 3];
    return true;
  }

 private:
  const LaunchArgs& a_;
};

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void AddRange(uint64_t begin, uint64_t end, uint32_t mode, std::vector<TouchedRange>* out) {
  if (end > begin) out->push_back({begin, end, mode});
}

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

// The expression in member `key` of `obj`; nullptr when it is absent and
// not `required`.
Result<ExprPtr> ParseField(const json& obj, const char* key, bool required, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return Bad(where + ": missing '" + key + "'");
    return ExprPtr();
  }
  return ExprFromJson(*it, where + "." + key);
}

// An access's pointer word, "pN" or "pN@off", into a.param and a.offset:
// each number as std::stoi reads it.
Status ParseArg(const json& j, const KernelDecl& k, const std::string& where, AccessSpec* a) {
  auto arg = j.find("arg");
  if (arg == j.end() || !arg->is_string()) return Bad(where + ": 'arg' must be \"pN\" or \"pN@off\"");
  const std::string s = arg->get<std::string>();
  if (s.size() < 2 || s[0] != 'p') return Bad(where + ".arg: '" + s + "' is not pN[@off]");
  const size_t at = s.find('@');
  const std::optional<int> param =
      msched::LeadingInt(s.substr(1, at == std::string::npos ? std::string::npos : at - 1));
  const std::optional<int> offset = at == std::string::npos ? 0 : msched::LeadingInt(s.substr(at + 1));
  if (!param || !offset) return Bad(where + ".arg: '" + s + "' is not pN[@off]");
  a->param = *param;
  a->offset = *offset;
  if (a->param < 0 || static_cast<size_t>(a->param) >= k.params.size() || a->offset < 0 ||
      static_cast<uint32_t>(a->offset) + 8 > k.params[a->param].second) {
    return Bad(where + ".arg: '" + s + "' is not a 64-bit word of a declared parameter");
  }
  return Status::Ok();
}

Result<AccessSpec> ParseAccess(const json& j, const KernelDecl& k, const std::string& where) {
  if (!j.is_object()) return Bad(where + ": must be an object");
  AccessSpec a;
  MSCHED_RETURN_IF_ERROR(ParseArg(j, k, where, &a));
  std::string mode;
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "mode", "readwrite"), &mode));
  a.mode = mode == "read" ? 1 : mode == "write" ? 2 : mode == "readwrite" ? 3 : 0;
  if (a.mode == 0) return Bad(where + ".mode: '" + mode + "' is not read, write or readwrite");
  std::string kind;
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "kind", "range"), &kind));
  MSCHED_RETURN_IF_ERROR(Assign(ParseField(j, "offset", false, where), &a.base_offset));
  MSCHED_RETURN_IF_ERROR(Assign(ParseField(j, "extent", true, where), &a.extent));
  if (kind == "range") {
    a.kind = AccessSpec::Kind::kRange;
  } else if (kind == "strided") {
    a.kind = AccessSpec::Kind::kStrided;
    MSCHED_RETURN_IF_ERROR(Assign(ParseField(j, "count", true, where), &a.count));
    MSCHED_RETURN_IF_ERROR(Assign(ParseField(j, "stride", true, where), &a.stride));
  } else if (kind == "gather") {
    a.kind = AccessSpec::Kind::kGather;
    MSCHED_RETURN_IF_ERROR(Assign(ParseField(j, "pages", true, where), &a.pages));
  } else if (kind == "indirect") {
    a.kind = AccessSpec::Kind::kIndirect;
    const json deref = j.value("deref", json(0));  // value() with a json default never throws on an object
    if (!deref.is_number_integer() || deref.get<int64_t>() < 0 || deref.get<int64_t>() > INT32_MAX) {
      return Bad(where + ".deref: must be an integer >= 0");
    }
    a.deref = static_cast<int>(deref.get<int64_t>());
  } else {
    return Bad(where + ".kind: '" + kind + "' is not range, strided, gather or indirect");
  }
  return a;
}

// A kernel's "params": each a size (laid out naturally) or [offset, size].
Status ParseParams(const json& j, const std::string& where, KernelDecl* k) {
  auto params = j.find("params");
  if (params == j.end() || !params->is_array()) return Bad(where + ": 'params' must be an array");
  uint32_t next = 0;
  for (const json& p : *params) {
    uint32_t offset = 0, size = 0;
    if (p.is_number_unsigned()) {  // natural layout: align to the size, at most 8
      size = p.get<uint32_t>();
      uint32_t align = 1;
      while (align < size && align < 8) align *= 2;
      offset = (next + align - 1) / align * align;
    } else if (p.is_array() && p.size() == 2 && p[0].is_number_unsigned() && p[1].is_number_unsigned()) {
      offset = p[0].get<uint32_t>();
      size = p[1].get<uint32_t>();
    } else {
      return Bad(where + ".params: each entry is a size or [offset, size]");
    }
    if (size == 0 || size > 4096 || offset > 32764) return Bad(where + ".params: bad size or offset");
    k->params.push_back({offset, size});
    next = offset + size;
  }
  return Status::Ok();
}

Result<std::unique_ptr<KernelDecl>> ParseKernel(const json& j, size_t index) {
  std::string where = "kernels[" + std::to_string(index) + "]";
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return Bad(where + ": needs a string 'name'");
  auto k = std::make_unique<KernelDecl>();
  k->name = j["name"].get<std::string>();
  where = "kernel '" + k->name + "'";
  MSCHED_RETURN_IF_ERROR(ParseParams(j, where, k.get()));
  if (auto acc = j.find("accesses"); acc != j.end()) {
    if (!acc->is_array()) return Bad(where + ".accesses: must be an array");
    for (size_t i = 0; i < acc->size(); ++i) {
      Result<AccessSpec> a = ParseAccess((*acc)[i], *k, where + ".accesses[" + std::to_string(i) + "]");
      if (!a.ok()) return a.status();
      k->accesses.push_back(std::move(*a));
    }
  }
  if (auto cost = j.find("cost"); cost != j.end()) {
    if (!cost->is_object()) return Bad(where + ".cost: must be an object");
    MSCHED_RETURN_IF_ERROR(Assign(ParseField(*cost, "bytes", false, where + ".cost"), &k->cost_bytes));
    MSCHED_RETURN_IF_ERROR(Assign(ParseField(*cost, "flops", false, where + ".cost"), &k->cost_flops));
  }
  if (auto host = j.find("host"); host != j.end()) {
    if (!host->is_string()) return Bad(where + ".host: must be a string");
    k->host_impl = host->get<std::string>();
  }
  return k;
}

std::mutex& RegistryMutex() {
  static msched::NoDestructor<std::mutex> mu;
  return *mu;
}
std::map<std::string, msimHostKernel>& Registry() {
  static msched::NoDestructor<std::map<std::string, msimHostKernel>> r;
  return *r;
}

}  // namespace

const KernelDecl* Module::Find(const std::string& name) const {
  for (const auto& k : kernels) {
    if (k->name == name) return k.get();
  }
  return nullptr;
}

Status ParseModule(const std::string& text, Module* out) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("module is not a JSON object (truncated or malformed)");
  Result<std::string> format = msched::JsonStringOr(doc, "format", "");
  if (!format.ok()) return format.status();
  if (*format != "msim-module") return Bad("'format' must be \"msim-module\"");
  if (doc.value("version", json()) != 1) return Bad("'version' must be 1");  // never throws on an object
  auto kernels = doc.find("kernels");
  if (kernels == doc.end() || !kernels->is_array()) return Bad("'kernels' must be an array");
  for (size_t i = 0; i < kernels->size(); ++i) {
    Result<std::unique_ptr<KernelDecl>> k = ParseKernel((*kernels)[i], i);
    if (!k.ok()) return k.status();
    if (out->Find((*k)->name)) return Bad("kernel '" + (*k)->name + "' declared twice");
    out->kernels.push_back(std::move(*k));
  }
  return Status::Ok();
}

bool EvaluateAccesses(const LaunchArgs& args, const std::function<bool(uint64_t, uint64_t*)>& read_u64,
                      std::vector<TouchedRange>* out, std::string* error) {
  LaunchContext ctx(args);
  for (size_t i = 0; i < args.kernel->accesses.size(); ++i) {
    const AccessSpec& a = args.kernel->accesses[i];
    auto fail = [&](const char* what) {
      *error = "kernel '" + args.kernel->name + "' access " + std::to_string(i) + ": cannot evaluate " + what;
      return false;
    };
    int64_t ptr = 0, add = 0, extent = 0;
    if (!ctx.Arg(a.param, a.offset, 8, &ptr)) return fail("its pointer");
    if (a.base_offset && !a.base_offset->Eval(ctx, &add)) return fail("its offset");
    if (!a.extent->Eval(ctx, &extent) || extent < 0) return fail("its extent");
    uint64_t base = static_cast<uint64_t>(ptr) + static_cast<uint64_t>(add);
    switch (a.kind) {
      case AccessSpec::Kind::kRange: AddRange(base, base + static_cast<uint64_t>(extent), a.mode, out); break;
      case AccessSpec::Kind::kIndirect: {
        uint64_t real = 0;
        if (!read_u64(base + static_cast<uint64_t>(a.deref), &real)) return fail("the base it reads from memory");
        AddRange(real, real + static_cast<uint64_t>(extent), a.mode, out);
        break;
      }
      case AccessSpec::Kind::kStrided: {
        int64_t count = 0, stride = 0;
        if (!a.count->Eval(ctx, &count) || !a.stride->Eval(ctx, &stride) || count < 0 || stride < 0) {
          return fail("its count or stride");
        }
        for (int64_t p = 0; p < count; ++p) {
          const uint64_t b = base + static_cast<uint64_t>(p) * static_cast<uint64_t>(stride);
          AddRange(b, b + static_cast<uint64_t>(extent), a.mode, out);
        }
        break;
      }
      case AccessSpec::Kind::kGather: {
        int64_t pages = 0;
        if (!a.pages->Eval(ctx, &pages) || pages < 0) return fail("its page count");
        const uint64_t region_pages = (static_cast<uint64_t>(extent) + 4095) / 4096;
        if (region_pages == 0) break;
        uint64_t state = args.sequence * 0x2545f4914f6cdd1dull + std::hash<std::string>{}(args.kernel->name);
        std::vector<uint64_t> picks;
        for (int64_t p = 0; p < pages; ++p) picks.push_back(SplitMix(&state) % region_pages);
        std::sort(picks.begin(), picks.end());
        picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
        const uint64_t first = base & ~uint64_t{4095};
        for (uint64_t pg : picks) AddRange(first + pg * 4096, first + pg * 4096 + 4096, a.mode, out);
        break;
      }
    }
  }
  return true;
}

bool EvaluateCost(const LaunchArgs& args, int64_t* bytes, int64_t* flops) {
  LaunchContext ctx(args);
  *bytes = *flops = 0;
  if (args.kernel->cost_bytes && !args.kernel->cost_bytes->Eval(ctx, bytes)) return false;
  if (args.kernel->cost_flops && !args.kernel->cost_flops->Eval(ctx, flops)) return false;
  return *bytes >= 0 && *flops >= 0;
}

void RegisterHostKernel(const std::string& name, msimHostKernel fn) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = fn;
}

msimHostKernel FindHostKernel(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second;
}

}  // namespace msim

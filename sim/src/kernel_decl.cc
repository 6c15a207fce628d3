#include "kernel_decl.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "msched/no_destructor.h"

namespace msim {
namespace {

using json = nlohmann::json;

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

ExprPtr ParseField(const json& obj, const char* key, bool required, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) throw std::runtime_error(where + ": missing '" + key + "'");
    return nullptr;
  }
  std::string text;
  if (it->is_string())
    text = it->get<std::string>();
  else if (it->is_number_integer())
    text = std::to_string(it->get<int64_t>());
  else
    throw std::runtime_error(where + "." + key + ": must be an expression string or integer");
  std::string err;
  ExprPtr e = Expr::Parse(text, &err);
  if (!e) throw std::runtime_error(where + "." + key + ": " + err);
  return e;
}

AccessSpec ParseAccess(const json& j, const KernelDecl& k, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": must be an object");
  AccessSpec a;
  auto arg = j.find("arg");
  if (arg == j.end() || !arg->is_string()) throw std::runtime_error(where + ": 'arg' must be \"pN\" or \"pN@off\"");
  const std::string s = arg->get<std::string>();
  if (s.size() < 2 || s[0] != 'p') throw std::runtime_error(where + ".arg: '" + s + "' is not pN[@off]");
  const size_t at = s.find('@');
  try {
    a.param = std::stoi(s.substr(1, at == std::string::npos ? std::string::npos : at - 1));
    if (at != std::string::npos) a.offset = std::stoi(s.substr(at + 1));
  } catch (const std::exception&) {
    throw std::runtime_error(where + ".arg: '" + s + "' is not pN[@off]");
  }
  if (a.param < 0 || static_cast<size_t>(a.param) >= k.params.size() || a.offset < 0 ||
      static_cast<uint32_t>(a.offset) + 8 > k.params[a.param].second) {
    throw std::runtime_error(where + ".arg: '" + s + "' is not a 64-bit word of a declared parameter");
  }
  const std::string mode = j.value("mode", std::string("readwrite"));
  a.mode = mode == "read" ? 1 : mode == "write" ? 2 : mode == "readwrite" ? 3 : 0;
  if (a.mode == 0) throw std::runtime_error(where + ".mode: '" + mode + "' is not read, write or readwrite");
  const std::string kind = j.value("kind", std::string("range"));
  a.base_offset = ParseField(j, "offset", false, where);
  a.extent = ParseField(j, "extent", true, where);
  if (kind == "range") {
    a.kind = AccessSpec::Kind::kRange;
  } else if (kind == "strided") {
    a.kind = AccessSpec::Kind::kStrided;
    a.count = ParseField(j, "count", true, where);
    a.stride = ParseField(j, "stride", true, where);
  } else if (kind == "gather") {
    a.kind = AccessSpec::Kind::kGather;
    a.pages = ParseField(j, "pages", true, where);
  } else if (kind == "indirect") {
    a.kind = AccessSpec::Kind::kIndirect;
    const json deref = j.value("deref", json(0));
    if (!deref.is_number_integer() || deref.get<int64_t>() < 0 || deref.get<int64_t>() > INT32_MAX) {
      throw std::runtime_error(where + ".deref: must be an integer >= 0");
    }
    a.deref = static_cast<int>(deref.get<int64_t>());
  } else {
    throw std::runtime_error(where + ".kind: '" + kind + "' is not range, strided, gather or indirect");
  }
  return a;
}

std::unique_ptr<KernelDecl> ParseKernel(const json& j, size_t index) {
  std::string where = "kernels[" + std::to_string(index) + "]";
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    throw std::runtime_error(where + ": needs a string 'name'");
  }
  auto k = std::make_unique<KernelDecl>();
  k->name = j["name"].get<std::string>();
  where = "kernel '" + k->name + "'";
  auto params = j.find("params");
  if (params == j.end() || !params->is_array()) throw std::runtime_error(where + ": 'params' must be an array");
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
      throw std::runtime_error(where + ".params: each entry is a size or [offset, size]");
    }
    if (size == 0 || size > 4096 || offset > 32764) throw std::runtime_error(where + ".params: bad size or offset");
    k->params.push_back({offset, size});
    next = offset + size;
  }
  if (auto acc = j.find("accesses"); acc != j.end()) {
    if (!acc->is_array()) throw std::runtime_error(where + ".accesses: must be an array");
    for (size_t i = 0; i < acc->size(); ++i) {
      k->accesses.push_back(ParseAccess((*acc)[i], *k, where + ".accesses[" + std::to_string(i) + "]"));
    }
  }
  if (auto cost = j.find("cost"); cost != j.end()) {
    if (!cost->is_object()) throw std::runtime_error(where + ".cost: must be an object");
    k->cost_bytes = ParseField(*cost, "bytes", false, where + ".cost");
    k->cost_flops = ParseField(*cost, "flops", false, where + ".cost");
  }
  if (auto host = j.find("host"); host != j.end()) {
    if (!host->is_string()) throw std::runtime_error(where + ".host: must be a string");
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

bool ParseModule(const std::string& text, Module* out, std::string* error) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = "module is not a JSON object (truncated or malformed)";
    return false;
  }
  try {
    if (doc.value("format", std::string()) != "msim-module")
      throw std::runtime_error("'format' must be \"msim-module\"");
    if (doc.value("version", json()) != 1) throw std::runtime_error("'version' must be 1");
    auto kernels = doc.find("kernels");
    if (kernels == doc.end() || !kernels->is_array()) throw std::runtime_error("'kernels' must be an array");
    for (size_t i = 0; i < kernels->size(); ++i) {
      std::unique_ptr<KernelDecl> k = ParseKernel((*kernels)[i], i);
      if (out->Find(k->name)) throw std::runtime_error("kernel '" + k->name + "' declared twice");
      out->kernels.push_back(std::move(k));
    }
  } catch (const std::exception& e) {  // json type errors included
    *error = e.what();
    return false;
  }
  return true;
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

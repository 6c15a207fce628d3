#include "workload_parse.h"

#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "expr_json.h"
#include "msched/bounded_input.h"
#include "msched/json_checked.h"

namespace msim {
namespace {

using json = nlohmann::ordered_json;
using msched::Assign;
using msched::Result;
using msched::Status;

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

// A regular file of bounded size and JSON nesting (msched/bounded_input.h):
// module files read here are parsed as JSON later, by the driver. `what`
// prefixes the reason (LoadWorkload names the workload file itself).
Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::string text, error;
  if (!msched::ReadJsonFileText(path, msched::kMaxConfigFileBytes, &text, &error)) return Bad(what + error);
  return text;
}

// ExprFromJson of the member `key`, which must be there.
Result<ExprPtr> RequiredExpr(const json& j, const char* key, const std::string& where) {
  Result<const json*> field = msched::JsonAt(j, key);
  if (!field.ok()) return field.status();
  return ExprFromJson(**field, where);
}

// ExprFromJson of the member `key`; nullptr when it is absent.
Result<ExprPtr> Optional(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return ExprPtr();
  return ExprFromJson(*it, where + "." + key);
}

Result<std::string> Str(const json& j, const char* key, const std::string& where, const std::string& def = "") {
  auto it = j.find(key);
  if (it == j.end()) {
    if (def.empty()) return Bad(where + ": missing '" + key + "'");
    return def;
  }
  if (!it->is_string()) return Bad(where + "." + key + ": must be a string");
  return it->get<std::string>();
}

Result<ArgSpec> ParseArg(const json& j, const std::map<std::string, bool>& buffers, const std::string& where) {
  ArgSpec a;
  if (j.is_string() && buffers.count(j.get<std::string>())) {
    a.kind = ArgSpec::Kind::kPtr;
    a.buffer = j.get<std::string>();
    return a;
  }
  if (j.is_string() || j.is_number_integer()) {
    MSCHED_RETURN_IF_ERROR(Assign(ExprFromJson(j, where), &a.value));
    return a;
  }
  if (!j.is_object() || j.size() != 1 + (j.contains("offset") ? 1 : 0)) {
    return Bad(where + ": an argument is a buffer name, an expression, or one of {ptr, u64, u32, f32, struct}");
  }
  if (j.contains("ptr")) {
    a.kind = ArgSpec::Kind::kPtr;
    MSCHED_RETURN_IF_ERROR(Assign(Str(j, "ptr", where), &a.buffer));
    if (!buffers.count(a.buffer)) return Bad(where + ": no buffer '" + a.buffer + "'");
    MSCHED_RETURN_IF_ERROR(Assign(Optional(j, "offset", where), &a.value));
  } else if (j.contains("u64")) {
    MSCHED_RETURN_IF_ERROR(Assign(ExprFromJson(j["u64"], where + ".u64"), &a.value));
  } else if (j.contains("u32")) {
    a.kind = ArgSpec::Kind::kU32;
    MSCHED_RETURN_IF_ERROR(Assign(ExprFromJson(j["u32"], where + ".u32"), &a.value));
  } else if (j.contains("f32")) {
    a.kind = ArgSpec::Kind::kF32;
    if (!j["f32"].is_number()) return Bad(where + ".f32: must be a number");
    a.f32 = j["f32"].get<double>();
  } else if (j.contains("struct")) {
    a.kind = ArgSpec::Kind::kStruct;
    if (!j["struct"].is_array()) return Bad(where + ".struct: must be an array");
    for (size_t i = 0; i < j["struct"].size(); ++i) {
      Result<ArgSpec> field = ParseArg(j["struct"][i], buffers, where + ".struct[" + std::to_string(i) + "]");
      if (!field.ok()) return field.status();
      a.fields.push_back(std::move(*field));
    }
  } else {
    return Bad(where + ": unknown argument form " + j.dump());
  }
  return a;
}

Result<std::vector<Step>> ParseSteps(const json& arr, const std::map<std::string, bool>& buffers,
                                     const std::string& where);

// ParseSteps of the member `key`, which must be there.
Result<std::vector<Step>> RequiredSteps(const json& j, const char* key, const std::map<std::string, bool>& buffers,
                                        const std::string& where) {
  Result<const json*> steps = msched::JsonAt(j, key);
  if (!steps.ok()) return steps.status();
  return ParseSteps(**steps, buffers, where);
}

// A graph's body may only launch, on the graph's stream (anything else
// would be refused or run outside the graph while the stream captures).
Status CheckCapturable(const std::vector<Step>& body, const std::string& stream, const std::string& where) {
  for (size_t i = 0; i < body.size(); ++i) {
    const Step& b = body[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (b.op == Step::Op::kRepeat) {
      MSCHED_RETURN_IF_ERROR(CheckCapturable(b.body, stream, at + ".steps"));
    } else if (b.op != Step::Op::kLaunch) {
      return Bad(at + ": a graph holds launches and repeats of launches only");
    } else if (b.stream != stream) {
      return Bad(at + ".stream: a graph's launches are on its stream '" + stream + "'");
    }
  }
  return Status::Ok();
}

// The fields of a "launch" step after its op.
Status ParseLaunch(const json& j, const std::map<std::string, bool>& buffers, const std::string& where, Step* s) {
  MSCHED_RETURN_IF_ERROR(Assign(Str(j, "kernel", where), &s->kernel));
  for (const char* dim : {"grid", "block"}) {
    auto it = j.find(dim);
    ExprPtr* out = dim[0] == 'g' ? s->grid : s->block;
    if (it != j.end() && (!it->is_array() || it->size() > 3)) return Bad(where + "." + dim + ": up to 3 values");
    for (size_t i = 0; i < 3; ++i) {
      if (it != j.end() && i < it->size()) {
        MSCHED_RETURN_IF_ERROR(Assign(ExprFromJson((*it)[i], where + "." + dim), &out[i]));
      } else {
        out[i] = Expr::Parse("1", nullptr);
      }
    }
  }
  auto args = j.find("args");
  if (args != j.end()) {
    if (!args->is_array()) return Bad(where + ".args: must be an array");
    for (size_t i = 0; i < args->size(); ++i) {
      Result<ArgSpec> arg = ParseArg((*args)[i], buffers, where + ".args[" + std::to_string(i) + "]");
      if (!arg.ok()) return arg.status();
      s->args.push_back(std::move(*arg));
    }
  }
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "api", "kernel"), &s->pattern));  // kernel | ex | cooperative
  return Assign(msched::JsonStringOr(j, "form", "params"), &s->to);                       // params | extra
}

// The fields of a "serve" step after its op (ServeSpec in workload.h).
Status ParseServe(const json& j, const std::map<std::string, bool>& buffers, const std::string& where, Step* s) {
  auto spec = std::make_shared<ServeSpec>();
  for (auto [key, out] :
       {std::pair{"requests", &spec->requests}, std::pair{"per_s", &spec->per_s}, std::pair{"seed", &spec->seed},
        std::pair{"models", &spec->models}, std::pair{"model", &spec->model}}) {
    MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(j, key, where + "." + key), out));
  }
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "var", ""), &spec->var));
  std::map<std::string, bool> body_buffers = buffers;
  if (j.contains("swap")) {
    const json& sw = j["swap"];
    Result<const json*> swap_buffers = msched::JsonAt(sw, "buffers");
    if (!swap_buffers.ok()) return swap_buffers.status();
    for (const json& b : **swap_buffers) {
      Result<std::string> name = msched::JsonGetString(b);
      if (!name.ok()) return name.status();
      if (!buffers.count(*name)) return Bad(where + ".swap.buffers: no buffer '" + *name + "'");
      spec->swap_buffers.push_back(*name);
    }
    if (spec->swap_buffers.empty()) return Bad(where + ".swap.buffers: one buffer per model");
    MSCHED_RETURN_IF_ERROR(Assign(Str(sw, "as", where + ".swap"), &spec->swap_as));
    if (buffers.count(spec->swap_as)) return Bad(where + ".swap.as: '" + spec->swap_as + "' is a buffer's name");
    MSCHED_RETURN_IF_ERROR(Assign(Str(sw, "from", where + ".swap"), &spec->swap_from));
    if (!buffers.count(spec->swap_from)) return Bad(where + ".swap.from: no buffer '" + spec->swap_from + "'");
    MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(sw, "resident", where + ".swap.resident"), &spec->resident));
    body_buffers[spec->swap_as] = true;
  }
  s->serve = std::move(spec);
  return Assign(RequiredSteps(j, "steps", body_buffers, where + ".steps"), &s->body);
}

Result<Step> ParseStep(const json& j, const std::map<std::string, bool>& buffers, const std::string& where) {
  if (!j.is_object()) return Bad(where + ": a step is an object");
  Step s;
  std::string op;
  MSCHED_RETURN_IF_ERROR(Assign(Str(j, "op", where), &op));
  auto need_buffer = [&](const char* key, std::string* out) -> Status {
    Result<std::string> b = Str(j, key, where);
    if (!b.ok()) return b.status();
    if (!buffers.count(*b)) return Bad(where + "." + key + ": no buffer '" + *b + "'");
    *out = std::move(*b);
    return Status::Ok();
  };
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "stream", ""), &s.stream));
  MSCHED_RETURN_IF_ERROR(Assign(Optional(j, "offset", where), &s.offset));
  MSCHED_RETURN_IF_ERROR(Assign(Optional(j, "bytes", where), &s.count));
  if (op == "write") {
    s.op = Step::Op::kWrite;
    MSCHED_RETURN_IF_ERROR(need_buffer("buffer", &s.buffer));
    MSCHED_RETURN_IF_ERROR(Assign(Str(j, "pattern", where), &s.pattern));
    if (s.pattern == "address") {
      MSCHED_RETURN_IF_ERROR(need_buffer("of", &s.buffer2));
    } else if (s.pattern != "iota_u32" && s.pattern != "const_f32" && s.pattern != "ramp_f32") {
      return Bad(where + ".pattern: '" + s.pattern + "' is not iota_u32, const_f32, ramp_f32 or address");
    }
    MSCHED_RETURN_IF_ERROR(Assign(Optional(j, "seed", where), &s.value));
  } else if (op == "memset") {
    s.op = Step::Op::kMemset;
    MSCHED_RETURN_IF_ERROR(need_buffer("buffer", &s.buffer));
    MSCHED_RETURN_IF_ERROR(Assign(Optional(j, "value", where), &s.value));
  } else if (op == "launch") {
    s.op = Step::Op::kLaunch;
    MSCHED_RETURN_IF_ERROR(ParseLaunch(j, buffers, where, &s));
  } else if (op == "repeat") {
    s.op = Step::Op::kRepeat;
    MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(j, "count", where + ".count"), &s.count));
    MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(j, "var", ""), &s.var));
    MSCHED_RETURN_IF_ERROR(Assign(RequiredSteps(j, "steps", buffers, where + ".steps"), &s.body));
  } else if (op == "graph") {
    s.op = Step::Op::kGraph;
    if (s.stream.empty()) return Bad(where + ".stream: a graph is captured on a named stream");
    MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(j, "replays", where + ".replays"), &s.count));
    MSCHED_RETURN_IF_ERROR(Assign(RequiredSteps(j, "steps", buffers, where + ".steps"), &s.body));
    MSCHED_RETURN_IF_ERROR(CheckCapturable(s.body, s.stream, where + ".steps"));
  } else if (op == "sync") {
    s.op = Step::Op::kSync;
  } else if (op == "prefetch") {
    s.op = Step::Op::kPrefetch;
    MSCHED_RETURN_IF_ERROR(need_buffer("buffer", &s.buffer));
    MSCHED_RETURN_IF_ERROR(Assign(Str(j, "to", where), &s.to));
    if (s.to != "device" && s.to != "host") return Bad(where + ".to: device or host");
  } else if (op == "copy") {
    s.op = Step::Op::kCopy;
    MSCHED_RETURN_IF_ERROR(need_buffer("dst", &s.buffer));
    MSCHED_RETURN_IF_ERROR(need_buffer("src", &s.buffer2));
  } else if (op == "free" || op == "alloc") {
    s.op = op == "free" ? Step::Op::kFree : Step::Op::kAlloc;
    MSCHED_RETURN_IF_ERROR(need_buffer("buffer", &s.buffer));
  } else if (op == "mark") {
    s.op = Step::Op::kMark;
    MSCHED_RETURN_IF_ERROR(Assign(Str(j, "name", where), &s.var));
  } else if (op == "meminfo") {
    s.op = Step::Op::kMemInfo;
  } else if (op == "host_work") {
    s.op = Step::Op::kHostWork;
    MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(j, "us", where + ".us"), &s.value));
  } else if (op == "serve") {
    s.op = Step::Op::kServe;
    MSCHED_RETURN_IF_ERROR(ParseServe(j, buffers, where, &s));
  } else {
    return Bad(where + ".op: unknown op '" + op + "'");
  }
  return s;
}

Result<std::vector<Step>> ParseSteps(const json& arr, const std::map<std::string, bool>& buffers,
                                     const std::string& where) {
  if (!arr.is_array()) return Bad(where + ": must be an array");
  std::vector<Step> steps;
  for (size_t i = 0; i < arr.size(); ++i) {
    Result<Step> step = ParseStep(arr[i], buffers, where + "[" + std::to_string(i) + "]");
    if (!step.ok()) return step.status();
    steps.push_back(std::move(*step));
  }
  return steps;
}

// "vars": variables may refer to earlier ones; overrides replace definitions.
Status ParseVars(const json& vars, const std::map<std::string, int64_t>& overrides, Workload* w) {
  if (!vars.is_object()) return Bad("vars: must be an object");
  for (auto& [k, v] : vars.items()) {
    int64_t value = 0;
    if (overrides.count(k)) {
      value = overrides.at(k);
    } else {
      Result<ExprPtr> e = ExprFromJson(v, "vars." + k);
      if (!e.ok()) return e.status();
      if (!(*e)->Eval(VarContext(w->vars), &value)) {
        return Bad("vars." + k + ": cannot evaluate (it may refer to a later variable)");
      }
    }
    w->vars[k] = value;
  }
  return Status::Ok();
}

// One entry of "buffers"; `names` holds those declared so far.
Result<BufferSpec> ParseBuffer(const json& b, const std::map<std::string, bool>& names) {
  BufferSpec spec;
  MSCHED_RETURN_IF_ERROR(Assign(Str(b, "name", "buffers"), &spec.name));
  MSCHED_RETURN_IF_ERROR(Assign(RequiredExpr(b, "size", "buffers." + spec.name + ".size"), &spec.size));
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(b, "kind", "device"), &spec.kind));
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonBoolOr(b, "deferred", false), &spec.deferred));
  if (spec.kind != "device" && spec.kind != "managed" && spec.kind != "pitch" && spec.kind != "async" &&
      spec.kind != "host" && spec.kind != "vmm" && spec.kind != "vmm_exported" && spec.kind != "expandable") {
    return Bad("buffers." + spec.name + ".kind: '" + spec.kind +
               "' is not device, managed, pitch, async, host, vmm, vmm_exported or expandable");
  }
  if (names.count(spec.name)) return Bad("buffer '" + spec.name + "' declared twice");
  return spec;
}

// The whole document, its problems without the path in front.
Result<Workload> ParseWorkload(const std::string& path, const std::map<std::string, int64_t>& overrides) {
  Result<std::string> text = ReadFile(path, "");
  if (!text.ok()) return text.status();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("not a JSON object (truncated or malformed)");
  Result<std::string> format = msched::JsonStringOr(doc, "format", "");
  if (!format.ok()) return format.status();
  // value() with a json default never throws on an object.
  if (*format != "msim-workload" || doc.value("version", json()) != json(1)) {
    return Bad("expected \"format\": \"msim-workload\", \"version\": 1");
  }
  Workload w;
  MSCHED_RETURN_IF_ERROR(Assign(msched::JsonStringOr(doc, "name", path), &w.name));
  if (auto vars = doc.find("vars"); vars != doc.end()) MSCHED_RETURN_IF_ERROR(ParseVars(*vars, overrides, &w));
  for (const auto& [k, v] : overrides) {
    if (!w.vars.count(k)) return Bad("--set " + k + ": the workload has no variable '" + k + "'");
  }
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  for (const json& m : doc.value("modules", json::array())) {
    if (m.is_string()) {
      const std::string& named = m.get<std::string>();  // relative to the workload's directory, unless absolute
      const std::string file = !named.empty() && named[0] == '/' ? named : dir + "/" + named;
      Result<std::string> module = ReadFile(file, "module " + file + ": ");
      if (!module.ok()) return module.status();
      w.module_texts.push_back(std::move(*module));
    } else if (m.is_object()) {
      w.module_texts.push_back(m.dump());
    } else {
      return Bad("modules: each entry is a path or an inline module");
    }
  }
  std::map<std::string, bool> names;
  for (const json& b : doc.value("buffers", json::array())) {
    Result<BufferSpec> spec = ParseBuffer(b, names);
    if (!spec.ok()) return spec.status();
    names[spec->name] = true;
    w.buffers.push_back(std::move(*spec));
  }
  for (const json& s : doc.value("streams", json::array())) {
    Result<std::string> stream = msched::JsonGetString(s);
    if (!stream.ok()) return stream.status();
    w.streams.push_back(std::move(*stream));
  }
  MSCHED_RETURN_IF_ERROR(Assign(RequiredSteps(doc, "steps", names, "steps"), &w.steps));
  for (const json& c : doc.value("checksum", json::array())) {
    Result<std::string> b = msched::JsonGetString(c);
    if (!b.ok()) return b.status();
    if (!names.count(*b)) return Bad("checksum: no buffer '" + *b + "'");
    w.checksum.push_back(std::move(*b));
  }
  return w;
}

}  // namespace

Result<Workload> LoadWorkload(const std::string& path, const std::map<std::string, int64_t>& overrides) {
  Result<Workload> w = ParseWorkload(path, overrides);
  if (!w.ok()) return Bad(path + ": " + w.status().message());
  return w;
}

}  // namespace msim

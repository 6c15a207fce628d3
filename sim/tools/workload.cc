#include "workload.h"

#include <cuda.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "msched/bounded_input.h"
#include "msched/seeded_draws.h"
#include "msim/msim.h"

namespace msim {
namespace {

using json = nlohmann::ordered_json;

struct ParseError {
  std::string message;
};

class VarContext : public ExprContext {
 public:
  explicit VarContext(const std::map<std::string, int64_t>& vars) : vars_(vars) {}
  bool Var(std::string_view name, int64_t* out) const override {
    auto it = vars_.find(std::string(name));
    if (it == vars_.end()) return false;
    *out = it->second;
    return true;
  }

 private:
  const std::map<std::string, int64_t>& vars_;
};

// A regular file of bounded size and JSON nesting (msched/bounded_input.h):
// module files read here are parsed as JSON later, by the driver. `what`
// prefixes the reason (LoadWorkload names the workload file itself).
std::string ReadFile(const std::string& path, const std::string& what) {
  std::string text, error;
  if (!msched::ReadJsonFileText(path, msched::kMaxConfigFileBytes, &text, &error)) {
    throw ParseError{what + error};
  }
  return text;
}

ExprPtr ParseExprField(const json& j, const std::string& where) {
  std::string text;
  if (j.is_string()) text = j.get<std::string>();
  else if (j.is_number_integer()) text = std::to_string(j.get<int64_t>());
  else throw ParseError{where + ": must be an expression string or integer"};
  std::string err;
  ExprPtr e = Expr::Parse(text, &err);
  if (!e) throw ParseError{where + ": " + err};
  return e;
}

ExprPtr Optional(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : ParseExprField(*it, where + "." + key);
}

std::string Str(const json& j, const char* key, const std::string& where, const std::string& def = "") {
  auto it = j.find(key);
  if (it == j.end()) {
    if (def.empty()) throw ParseError{where + ": missing '" + key + "'"};
    return def;
  }
  if (!it->is_string()) throw ParseError{where + "." + key + ": must be a string"};
  return it->get<std::string>();
}

ArgSpec ParseArg(const json& j, const std::map<std::string, bool>& buffers, const std::string& where) {
  ArgSpec a;
  if (j.is_string() && buffers.count(j.get<std::string>())) {
    a.kind = ArgSpec::Kind::kPtr;
    a.buffer = j.get<std::string>();
    return a;
  }
  if (j.is_string() || j.is_number_integer()) {
    a.value = ParseExprField(j, where);
    return a;
  }
  if (!j.is_object() || j.size() != 1 + (j.contains("offset") ? 1 : 0)) {
    throw ParseError{where + ": an argument is a buffer name, an expression, or one of {ptr, u64, u32, f32, struct}"};
  }
  if (j.contains("ptr")) {
    a.kind = ArgSpec::Kind::kPtr;
    a.buffer = Str(j, "ptr", where);
    if (!buffers.count(a.buffer)) throw ParseError{where + ": no buffer '" + a.buffer + "'"};
    a.value = Optional(j, "offset", where);
  } else if (j.contains("u64")) {
    a.value = ParseExprField(j["u64"], where + ".u64");
  } else if (j.contains("u32")) {
    a.kind = ArgSpec::Kind::kU32;
    a.value = ParseExprField(j["u32"], where + ".u32");
  } else if (j.contains("f32")) {
    a.kind = ArgSpec::Kind::kF32;
    if (!j["f32"].is_number()) throw ParseError{where + ".f32: must be a number"};
    a.f32 = j["f32"].get<double>();
  } else if (j.contains("struct")) {
    a.kind = ArgSpec::Kind::kStruct;
    if (!j["struct"].is_array()) throw ParseError{where + ".struct: must be an array"};
    for (size_t i = 0; i < j["struct"].size(); ++i) {
      a.fields.push_back(ParseArg(j["struct"][i], buffers, where + ".struct[" + std::to_string(i) + "]"));
    }
  } else {
    throw ParseError{where + ": unknown argument form " + j.dump()};
  }
  return a;
}

std::vector<Step> ParseSteps(const json& arr, const std::map<std::string, bool>& buffers, const std::string& where);

// A graph's body may only launch, on the graph's stream (anything else
// would be refused or run outside the graph while the stream captures).
void CheckCapturable(const std::vector<Step>& body, const std::string& stream, const std::string& where) {
  for (size_t i = 0; i < body.size(); ++i) {
    const Step& b = body[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (b.op == Step::Op::kRepeat) {
      CheckCapturable(b.body, stream, at + ".steps");
    } else if (b.op != Step::Op::kLaunch) {
      throw ParseError{at + ": a graph holds launches and repeats of launches only"};
    } else if (b.stream != stream) {
      throw ParseError{at + ".stream: a graph's launches are on its stream '" + stream + "'"};
    }
  }
}

Step ParseStep(const json& j, const std::map<std::string, bool>& buffers, const std::string& where) {
  if (!j.is_object()) throw ParseError{where + ": a step is an object"};
  Step s;
  const std::string op = Str(j, "op", where);
  auto need_buffer = [&](const char* key) {
    std::string b = Str(j, key, where);
    if (!buffers.count(b)) throw ParseError{where + "." + key + ": no buffer '" + b + "'"};
    return b;
  };
  s.stream = j.value("stream", std::string());
  s.offset = Optional(j, "offset", where);
  s.count = Optional(j, "bytes", where);
  if (op == "write") {
    s.op = Step::Op::kWrite;
    s.buffer = need_buffer("buffer");
    s.pattern = Str(j, "pattern", where);
    if (s.pattern == "address") {
      s.buffer2 = need_buffer("of");
    } else if (s.pattern != "iota_u32" && s.pattern != "const_f32" && s.pattern != "ramp_f32") {
      throw ParseError{where + ".pattern: '" + s.pattern + "' is not iota_u32, const_f32, ramp_f32 or address"};
    }
    s.value = Optional(j, "seed", where);
  } else if (op == "memset") {
    s.op = Step::Op::kMemset;
    s.buffer = need_buffer("buffer");
    s.value = Optional(j, "value", where);
  } else if (op == "launch") {
    s.op = Step::Op::kLaunch;
    s.kernel = Str(j, "kernel", where);
    for (const char* dim : {"grid", "block"}) {
      auto it = j.find(dim);
      ExprPtr* out = dim[0] == 'g' ? s.grid : s.block;
      if (it != j.end() && (!it->is_array() || it->size() > 3)) throw ParseError{where + "." + dim + ": up to 3 values"};
      for (size_t i = 0; i < 3; ++i) {
        out[i] = it != j.end() && i < it->size() ? ParseExprField((*it)[i], where + "." + dim) : Expr::Parse("1", nullptr);
      }
    }
    auto args = j.find("args");
    if (args != j.end()) {
      if (!args->is_array()) throw ParseError{where + ".args: must be an array"};
      for (size_t i = 0; i < args->size(); ++i) {
        s.args.push_back(ParseArg((*args)[i], buffers, where + ".args[" + std::to_string(i) + "]"));
      }
    }
    s.pattern = j.value("api", std::string("kernel"));  // kernel | ex | cooperative
    s.to = j.value("form", std::string("params"));      // params | extra
  } else if (op == "repeat") {
    s.op = Step::Op::kRepeat;
    s.count = ParseExprField(j.at("count"), where + ".count");
    s.var = j.value("var", std::string());
    s.body = ParseSteps(j.at("steps"), buffers, where + ".steps");
  } else if (op == "graph") {
    s.op = Step::Op::kGraph;
    if (s.stream.empty()) throw ParseError{where + ".stream: a graph is captured on a named stream"};
    s.count = ParseExprField(j.at("replays"), where + ".replays");
    s.body = ParseSteps(j.at("steps"), buffers, where + ".steps");
    CheckCapturable(s.body, s.stream, where + ".steps");
  } else if (op == "sync") {
    s.op = Step::Op::kSync;
  } else if (op == "prefetch") {
    s.op = Step::Op::kPrefetch;
    s.buffer = need_buffer("buffer");
    s.to = Str(j, "to", where);
    if (s.to != "device" && s.to != "host") throw ParseError{where + ".to: device or host"};
  } else if (op == "copy") {
    s.op = Step::Op::kCopy;
    s.buffer = need_buffer("dst");
    s.buffer2 = need_buffer("src");
  } else if (op == "free" || op == "alloc") {
    s.op = op == "free" ? Step::Op::kFree : Step::Op::kAlloc;
    s.buffer = need_buffer("buffer");
  } else if (op == "mark") {
    s.op = Step::Op::kMark;
    s.var = Str(j, "name", where);
  } else if (op == "host_work") {
    s.op = Step::Op::kHostWork;
    s.value = ParseExprField(j.at("us"), where + ".us");
  } else if (op == "serve") {
    s.op = Step::Op::kServe;
    auto spec = std::make_shared<ServeSpec>();
    spec->requests = ParseExprField(j.at("requests"), where + ".requests");
    spec->per_s = ParseExprField(j.at("per_s"), where + ".per_s");
    spec->seed = ParseExprField(j.at("seed"), where + ".seed");
    spec->models = ParseExprField(j.at("models"), where + ".models");
    spec->model = ParseExprField(j.at("model"), where + ".model");
    spec->var = j.value("var", std::string());
    std::map<std::string, bool> body_buffers = buffers;
    if (j.contains("swap")) {
      const json& sw = j["swap"];
      for (const json& b : sw.at("buffers")) {
        const std::string name = b.get<std::string>();
        if (!buffers.count(name)) throw ParseError{where + ".swap.buffers: no buffer '" + name + "'"};
        spec->swap_buffers.push_back(name);
      }
      if (spec->swap_buffers.empty()) throw ParseError{where + ".swap.buffers: one buffer per model"};
      spec->swap_as = Str(sw, "as", where + ".swap");
      if (buffers.count(spec->swap_as)) throw ParseError{where + ".swap.as: '" + spec->swap_as + "' is a buffer's name"};
      spec->swap_from = Str(sw, "from", where + ".swap");
      if (!buffers.count(spec->swap_from)) throw ParseError{where + ".swap.from: no buffer '" + spec->swap_from + "'"};
      spec->resident = ParseExprField(sw.at("resident"), where + ".swap.resident");
      body_buffers[spec->swap_as] = true;
    }
    s.serve = std::move(spec);
    s.body = ParseSteps(j.at("steps"), body_buffers, where + ".steps");
  } else {
    throw ParseError{where + ".op: unknown op '" + op + "'"};
  }
  return s;
}

std::vector<Step> ParseSteps(const json& arr, const std::map<std::string, bool>& buffers, const std::string& where) {
  if (!arr.is_array()) throw ParseError{where + ": must be an array"};
  std::vector<Step> steps;
  for (size_t i = 0; i < arr.size(); ++i) steps.push_back(ParseStep(arr[i], buffers, where + "[" + std::to_string(i) + "]"));
  return steps;
}

// ---- Execution -------------------------------------------------------------

struct RunError {
  std::string message;
  CUresult code = CUDA_SUCCESS;  // the driver's error, when a driver call failed
};

class Runner {
 public:
  Runner(const Workload& w, const RunOptions& options) : w_(w), options_(options), vars_(w.vars) {}

  RunResult Run() {
    RunResult result;
    try {
      Setup();
      Arrive();
      result.arrival_ns = Now();
      for (int attempt = 1;; ++attempt) {
        const uint64_t started = Now();
        try {
          ++result.attempts;
          Attempt();
          break;
        } catch (const RunError& e) {
          // A program that runs out of device memory crashes and loses its
          // work; a user (or the cluster's requeue) submits it again later.
          if (e.code != CUDA_ERROR_OUT_OF_MEMORY) throw;
          ++result.ooms;
          result.lost_ns += Now() - started;
          if (attempt >= options_.max_attempts) throw;
          Discard();
          msimAdvanceTo(Now() + options_.retry_delay_ns);
        }
      }
      if (options_.checksums) {
        for (const std::string& name : w_.checksum) result.checksums[name] = Checksum(name);
      }
      result.launches = launches_;
      result.first_launch_ns = first_launch_ns_;
      result.marks = marks_;
      result.latencies_ns = latencies_;
      result.virtual_ns = Now();
    } catch (const RunError& e) {
      result.error = e.message;
      result.virtual_ns = Now();
    }
    return result;
  }

 private:
  void Check(CUresult r, const std::string& what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    throw RunError{what + ": " + (name ? name : std::to_string(r)), r};
  }
  static uint64_t Now() {
    uint64_t now = 0;
    msimGetTime(&now);
    return now;
  }
  int64_t Eval(const ExprPtr& e, const std::string& what) {
    int64_t v = 0;
    if (!e->Eval(VarContext(vars_), &v)) throw RunError{what + ": cannot evaluate '" + e->text() + "'"};
    return v;
  }

  void Setup() {
    Check(cuInit(0), "cuInit");
    CUdevice dev;
    Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx;
    Check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    Check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    for (const std::string& text : w_.module_texts) {
      CUmodule m;
      Check(cuModuleLoadData(&m, text.c_str()), "cuModuleLoadData");
      modules_.push_back(m);
    }
    for (const std::string& s : w_.streams) Check(cuStreamCreate(&streams_[s], CU_STREAM_DEFAULT), "cuStreamCreate");
  }

  // The job is submitted at RunOptions::arrival_ns: its clock moves there,
  // and the synchronisation returns once every process sharing the device
  // has reached that time, so that whatever it does next (a coordinator
  // hears of it at its first allocation) happens in virtual-time order.
  void Arrive() {
    if (options_.arrival_ns == 0) return;
    msimAdvanceTo(options_.arrival_ns);
    Check(cuCtxSynchronize(), "arriving");
  }

  // One run of the program from its first allocation to its end.
  void Attempt() {
    vars_ = w_.vars;
    for (const BufferSpec& b : w_.buffers) {
      if (!b.deferred) Alloc(b);
    }
    Exec(w_.steps);
    Check(cuCtxSynchronize(), "final synchronisation");
  }

  // What a crashed attempt held is released, as the process's exit would:
  // its queued work finishes or fails, and its memory is freed.
  void Discard() {
    (void)cuCtxSynchronize();
    for (const auto& entry : ptrs_) (void)Free(entry.first);
    ptrs_.clear();
  }

  // A "serve" step: ServeSpec in workload.h. Arrival times count from the
  // device clock's start, so that processes started together see one trace.
  void Serve(const Step& s) {
    const ServeSpec& sp = *s.serve;
    const int64_t requests = Eval(sp.requests, "requests"), per_s = Eval(sp.per_s, "per_s");
    const int64_t models = Eval(sp.models, "models"), mine = Eval(sp.model, "model");
    if (requests < 0 || per_s <= 0 || models < 1 || mine < -1 || mine >= models) {
      throw RunError{"serve: needs requests >= 0, per_s > 0, models >= 1 and model from -1 to models-1"};
    }
    const bool swapping = !sp.swap_buffers.empty();
    if (swapping && static_cast<int64_t>(sp.swap_buffers.size()) < models) throw RunError{"serve: one swap buffer per model"};
    const int64_t resident = swapping ? Eval(sp.resident, "resident") : 0;
    if (swapping && resident < 1) throw RunError{"serve: swap.resident must be at least 1"};
    msched::SeededDraws draws(static_cast<uint64_t>(Eval(sp.seed, "seed")));  // one trace per seed, anywhere
    double arrival_ns = 0;
    std::vector<std::string> held;  // swap buffers allocated, least recently used first
    for (int64_t i = 0; i < requests; ++i) {
      arrival_ns += draws.ExponentialGapS(static_cast<double>(per_s)) * 1e9;
      const int64_t model =
          std::min<int64_t>(models - 1, static_cast<int64_t>(draws.Uniform() * static_cast<double>(models)));
      if (mine >= 0 && model != mine) continue;
      const uint64_t arrival = static_cast<uint64_t>(arrival_ns);
      if (Now() < arrival) msimAdvanceTo(arrival);
      if (swapping) Load(sp, sp.swap_buffers[model], resident, &held);
      if (!sp.var.empty()) vars_[sp.var] = model;
      Exec(s.body);
      Check(cuCtxSynchronize(), "answering request " + std::to_string(i));
      latencies_.push_back(Now() - arrival);
    }
    if (swapping) aliases_.erase(sp.swap_as);
  }

  // Makes model buffer `name` the one the body names sp.swap_as, as a
  // model-swapping server does: when it is not loaded, the least recently
  // used are freed while `resident` are held, and it is allocated and
  // copied in from the host.
  void Load(const ServeSpec& sp, const std::string& name, int64_t resident, std::vector<std::string>* held) {
    const auto it = std::find(held->begin(), held->end(), name);
    if (it != held->end()) {
      held->erase(it);
    } else {
      while (!held->empty() && static_cast<int64_t>(held->size()) >= resident) {
        Check(Free(held->front()), "unloading " + held->front());
        ptrs_.erase(held->front());
        held->erase(held->begin());
      }
      Alloc(Spec(name));
      const auto [dst, size] = Buffer(name);
      const auto [src, src_size] = Buffer(sp.swap_from);
      Check(cuMemcpyHtoD(dst, reinterpret_cast<const void*>(src), std::min(size, src_size)), "loading " + name);
    }
    held->push_back(name);
    aliases_[sp.swap_as] = name;
  }

  // Frees buffer `name` the way it was allocated.
  CUresult Free(const std::string& name) {
    const CUdeviceptr p = Buffer(name).first;
    const std::string& kind = Spec(name).kind;
    if (kind == "host") return cuMemFreeHost(reinterpret_cast<void*>(p));
    return kind == "async" && !options_.force_managed ? cuMemFreeAsync(p, nullptr) : cuMemFree(p);
  }

  const BufferSpec& Spec(const std::string& name) {
    for (const BufferSpec& b : w_.buffers) {
      if (b.name == name) return b;
    }
    throw RunError{"no buffer " + name};
  }

  void Alloc(const BufferSpec& b) {
    const int64_t size = Eval(b.size, "size of " + b.name);
    if (size <= 0) throw RunError{"buffer " + b.name + " has size " + std::to_string(size)};
    CUdeviceptr p = 0;
    const std::string what = "allocating " + b.name + " (" + b.kind + ", " + std::to_string(size) + " bytes)";
    if (b.kind == "managed" || (options_.force_managed && b.kind != "host")) {
      Check(cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL), what);
    } else if (b.kind == "pitch") {
      size_t pitch = 0;
      Check(cuMemAllocPitch(&p, &pitch, 4096, (size + 4095) / 4096, 4), what);
    } else if (b.kind == "async") {
      Check(cuMemAllocAsync(&p, size, nullptr), what);
    } else if (b.kind == "host") {
      void* h = nullptr;
      Check(cuMemAllocHost(&h, size), what);
      p = reinterpret_cast<CUdeviceptr>(h);
    } else {
      Check(cuMemAlloc(&p, size), what);
    }
    ptrs_[b.name] = {p, static_cast<uint64_t>(size)};
  }

  std::pair<CUdeviceptr, uint64_t> Buffer(const std::string& name) {
    const auto alias = aliases_.find(name);
    auto it = ptrs_.find(alias != aliases_.end() ? alias->second : name);
    if (it == ptrs_.end()) throw RunError{"buffer " + name + " is not allocated"};
    return it->second;
  }

  CUstream Stream(const std::string& name) {
    if (name.empty()) return nullptr;
    auto it = streams_.find(name);
    if (it == streams_.end()) throw RunError{"no stream " + name};
    return it->second;
  }

  // The [offset, offset+bytes) slice of a step's buffer.
  std::pair<CUdeviceptr, uint64_t> Slice(const Step& s, const std::string& name) {
    auto [p, size] = Buffer(name);
    const uint64_t off = s.offset ? static_cast<uint64_t>(Eval(s.offset, "offset")) : 0;
    const uint64_t bytes = s.count ? static_cast<uint64_t>(Eval(s.count, "bytes")) : size - std::min(off, size);
    if (off > size || bytes > size - off) throw RunError{"slice of " + name + " out of bounds"};
    return {p + off, bytes};
  }

  // Packs `a` at byte `at` of `out` with natural alignment; returns the end.
  size_t Pack(const ArgSpec& a, std::vector<uint8_t>* out, size_t at) {
    auto put = [&](const void* v, size_t n) {
      at = (at + n - 1) / n * n;
      if (out->size() < at + n) out->resize(at + n);
      std::memcpy(out->data() + at, v, n);
      return at + n;
    };
    switch (a.kind) {
      case ArgSpec::Kind::kPtr: {
        const uint64_t p = Buffer(a.buffer).first + (a.value ? static_cast<uint64_t>(Eval(a.value, "offset")) : 0);
        return put(&p, 8);
      }
      case ArgSpec::Kind::kU64: {
        const int64_t v = Eval(a.value, "argument");
        return put(&v, 8);
      }
      case ArgSpec::Kind::kU32: {
        const uint32_t v = static_cast<uint32_t>(Eval(a.value, "argument"));
        return put(&v, 4);
      }
      case ArgSpec::Kind::kF32: {
        const float v = static_cast<float>(a.f32);
        return put(&v, 4);
      }
      case ArgSpec::Kind::kStruct:
        for (const ArgSpec& f : a.fields) at = Pack(f, out, at);
        return at;
    }
    return at;
  }

  CUfunction Function(const std::string& name) {
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    for (CUmodule m : modules_) {
      CUfunction f;
      if (cuModuleGetFunction(&f, m, name.c_str()) == CUDA_SUCCESS) return functions_[name] = f;
    }
    throw RunError{"no kernel '" + name + "' in the workload's modules"};
  }

  void Launch(const Step& s) {
    CUfunction f = Function(s.kernel);
    std::vector<std::pair<size_t, size_t>> layout;
    for (size_t i = 0;; ++i) {
      size_t off = 0, size = 0;
      if (cuFuncGetParamInfo(f, i, &off, &size) != CUDA_SUCCESS) break;
      layout.push_back({off, size});
    }
    if (layout.size() != s.args.size()) {
      throw RunError{"kernel " + s.kernel + " takes " + std::to_string(layout.size()) + " arguments, the step gives " +
                     std::to_string(s.args.size())};
    }
    std::vector<std::vector<uint8_t>> values(layout.size());
    std::vector<uint8_t> packed;
    std::vector<void*> params;
    for (size_t i = 0; i < layout.size(); ++i) {
      const size_t n = Pack(s.args[i], &values[i], 0);
      if (n > layout[i].second) throw RunError{"argument " + std::to_string(i) + " of " + s.kernel + " is too large"};
      values[i].resize(layout[i].second);
      if (packed.size() < layout[i].first + layout[i].second) packed.resize(layout[i].first + layout[i].second);
      std::memcpy(packed.data() + layout[i].first, values[i].data(), layout[i].second);
    }
    for (auto& v : values) params.push_back(v.data());
    unsigned dims[6];
    for (int i = 0; i < 3; ++i) {
      dims[i] = static_cast<unsigned>(std::max<int64_t>(1, Eval(s.grid[i], "grid")));
      dims[3 + i] = static_cast<unsigned>(std::max<int64_t>(1, Eval(s.block[i], "block")));
    }
    size_t packed_size = packed.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    void** kp = s.to == "extra" ? nullptr : params.data();
    void** ex = s.to == "extra" ? extra : nullptr;
    const std::string what = "launching " + s.kernel;
    if (s.pattern == "ex") {
      CUlaunchConfig c{};
      c.gridDimX = dims[0], c.gridDimY = dims[1], c.gridDimZ = dims[2];
      c.blockDimX = dims[3], c.blockDimY = dims[4], c.blockDimZ = dims[5];
      c.hStream = Stream(s.stream);
      Check(cuLaunchKernelEx(&c, f, kp, ex), what);
    } else if (s.pattern == "cooperative") {
      Check(cuLaunchCooperativeKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0, Stream(s.stream), kp), what);
    } else {
      Check(cuLaunchKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0, Stream(s.stream), kp, ex), what);
    }
    if (launches_++ == 0) msimGetTime(&first_launch_ns_);
  }

  void Graph(const Step& s) {
    const CUstream stream = Stream(s.stream);
    Check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "beginning a capture");
    Exec(s.body);
    CUgraph graph;
    Check(cuStreamEndCapture(stream, &graph), "ending a capture");
    CUgraphExec exec;
    Check(cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiating a graph");
    // The source graph goes at once, as PyTorch's CUDAGraph lets it go.
    Check(cuGraphDestroy(graph), "destroying a graph");
    const int64_t replays = Eval(s.count, "replays");
    for (int64_t i = 0; i < replays; ++i) Check(cuGraphLaunch(exec, stream), "launching a graph");
    Check(cuGraphExecDestroy(exec), "destroying a graph");
  }

  void Write(const Step& s) {
    auto [p, bytes] = Slice(s, s.buffer);
    if (s.pattern == "address") {  // a descriptor holding another buffer's device address
      const uint64_t address = Buffer(s.buffer2).first;
      if (bytes < sizeof address) throw RunError{"writing " + s.buffer + ": no room for an address"};
      Check(cuMemcpyHtoD(p, &address, sizeof address), "writing " + s.buffer);
      return;
    }
    const uint32_t seed = s.value ? static_cast<uint32_t>(Eval(s.value, "seed")) : 1;
    constexpr uint64_t kBlock = 16ull << 20;
    std::vector<uint32_t> host(kBlock / 4);
    for (uint64_t done = 0; done < bytes; done += kBlock) {
      const uint64_t n = std::min(kBlock, bytes - done);
      for (uint64_t i = 0; i < (n + 3) / 4; ++i) {
        const uint64_t idx = done / 4 + i;
        if (s.pattern == "iota_u32") host[i] = seed + static_cast<uint32_t>(idx) * 2654435761u;
        else {
          const float f = s.pattern == "const_f32" ? static_cast<float>(seed) : static_cast<float>(idx % 1024) * 0.5f + seed;
          std::memcpy(&host[i], &f, 4);
        }
      }
      Check(cuMemcpyHtoD(p + done, host.data(), n), "writing " + s.buffer);
    }
  }

  uint64_t Checksum(const std::string& name) {
    auto [p, size] = Buffer(name);
    uint64_t h = 1469598103934665603ull;
    std::vector<uint8_t> host(std::min<uint64_t>(size, 64ull << 20));
    for (uint64_t done = 0; done < size; done += host.size()) {
      const uint64_t n = std::min<uint64_t>(host.size(), size - done);
      Check(cuMemcpyDtoH(host.data(), p + done, n), "reading " + name);
      for (uint64_t i = 0; i < n; ++i) h = (h ^ host[i]) * 1099511628211ull;
    }
    return h;
  }

  void Exec(const std::vector<Step>& steps) {
    for (const Step& s : steps) {
      switch (s.op) {
        case Step::Op::kWrite: Write(s); break;
        case Step::Op::kMemset: {
          auto [p, bytes] = Slice(s, s.buffer);
          const auto v = static_cast<unsigned char>(s.value ? Eval(s.value, "value") : 0);
          Check(cuMemsetD8Async(p, v, bytes, Stream(s.stream)), "memset " + s.buffer);
          break;
        }
        case Step::Op::kLaunch: Launch(s); break;
        case Step::Op::kRepeat: {
          const int64_t n = Eval(s.count, "repeat count");
          for (int64_t i = 0; i < n; ++i) {
            if (!s.var.empty()) vars_[s.var] = i;
            Exec(s.body);
          }
          break;
        }
        case Step::Op::kGraph: Graph(s); break;
        case Step::Op::kSync:
          Check(s.stream.empty() ? cuCtxSynchronize() : cuStreamSynchronize(Stream(s.stream)), "synchronising");
          break;
        case Step::Op::kPrefetch: {
          auto [p, bytes] = Slice(s, s.buffer);
          CUmemLocation loc{s.to == "device" ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST, 0};
          Check(cuMemPrefetchAsync(p, bytes, loc, 0, Stream(s.stream)), "prefetching " + s.buffer);
          break;
        }
        case Step::Op::kCopy: {
          auto [dst, dsize] = Slice(s, s.buffer);
          auto [src, ssize] = Buffer(s.buffer2);
          Check(cuMemcpyAsync(dst, src, std::min(dsize, ssize), Stream(s.stream)), "copying to " + s.buffer);
          break;
        }
        case Step::Op::kFree:
          Check(Free(s.buffer), "freeing " + s.buffer);
          ptrs_.erase(s.buffer);
          break;
        case Step::Op::kAlloc: Alloc(Spec(s.buffer)); break;
        case Step::Op::kMark: {
          Check(cuCtxSynchronize(), "synchronising at mark " + s.var);
          msimGetTime(&marks_[s.var]);
          break;
        }
        case Step::Op::kHostWork:
          msimAdvanceTo(Now() + static_cast<uint64_t>(Eval(s.value, "host_work")) * 1000);
          break;
        case Step::Op::kServe: Serve(s); break;
      }
    }
  }

  const Workload& w_;
  const RunOptions options_;
  std::map<std::string, int64_t> vars_;
  std::vector<CUmodule> modules_;
  std::map<std::string, CUstream> streams_;
  std::map<std::string, std::pair<CUdeviceptr, uint64_t>> ptrs_;
  std::map<std::string, std::string> aliases_;  // a serve step's swap_as: the model buffer it names now
  std::vector<uint64_t> latencies_;
  std::map<std::string, CUfunction> functions_;
  uint64_t launches_ = 0;
  uint64_t first_launch_ns_ = 0;
  std::map<std::string, uint64_t> marks_;
};

}  // namespace

bool LoadWorkload(const std::string& path, const std::map<std::string, int64_t>& overrides, Workload* out,
                  std::string* error) {
  try {
    json doc = json::parse(ReadFile(path, ""), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) throw ParseError{"not a JSON object (truncated or malformed)"};
    if (doc.value("format", std::string()) != "msim-workload" || doc.value("version", json()) != json(1)) {
      throw ParseError{"expected \"format\": \"msim-workload\", \"version\": 1"};
    }
    Workload w;
    w.name = doc.value("name", path);
    if (auto vars = doc.find("vars"); vars != doc.end()) {
      if (!vars->is_object()) throw ParseError{"vars: must be an object"};
      // Variables may refer to earlier ones; overrides replace definitions.
      for (auto& [k, v] : vars->items()) {
        int64_t value = 0;
        if (overrides.count(k)) {
          value = overrides.at(k);
        } else if (!ParseExprField(v, "vars." + k)->Eval(VarContext(w.vars), &value)) {
          throw ParseError{"vars." + k + ": cannot evaluate (it may refer to a later variable)"};
        }
        w.vars[k] = value;
      }
    }
    for (const auto& [k, v] : overrides) {
      if (!w.vars.count(k)) throw ParseError{"--set " + k + ": the workload has no variable '" + k + "'"};
    }
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    for (const json& m : doc.value("modules", json::array())) {
      if (m.is_string()) {
        const std::string file = dir + "/" + m.get<std::string>();
        w.module_texts.push_back(ReadFile(file, "module " + file + ": "));
      } else if (m.is_object()) {
        w.module_texts.push_back(m.dump());
      } else {
        throw ParseError{"modules: each entry is a path or an inline module"};
      }
    }
    std::map<std::string, bool> names;
    for (const json& b : doc.value("buffers", json::array())) {
      BufferSpec spec;
      spec.name = Str(b, "name", "buffers");
      spec.size = ParseExprField(b.at("size"), "buffers." + spec.name + ".size");
      spec.kind = b.value("kind", std::string("device"));
      spec.deferred = b.value("deferred", false);
      if (spec.kind != "device" && spec.kind != "managed" && spec.kind != "pitch" && spec.kind != "async" &&
          spec.kind != "host") {
        throw ParseError{"buffers." + spec.name + ".kind: '" + spec.kind + "' is not device, managed, pitch, async or host"};
      }
      if (names.count(spec.name)) throw ParseError{"buffer '" + spec.name + "' declared twice"};
      names[spec.name] = true;
      w.buffers.push_back(spec);
    }
    for (const json& s : doc.value("streams", json::array())) w.streams.push_back(s.get<std::string>());
    w.steps = ParseSteps(doc.at("steps"), names, "steps");
    for (const json& c : doc.value("checksum", json::array())) {
      const std::string b = c.get<std::string>();
      if (!names.count(b)) throw ParseError{"checksum: no buffer '" + b + "'"};
      w.checksum.push_back(b);
    }
    *out = std::move(w);
    return true;
  } catch (const ParseError& e) {
    *error = path + ": " + e.message;
  } catch (const std::exception& e) {
    *error = path + ": " + e.what();
  }
  return false;
}

RunResult RunWorkload(const Workload& w, const RunOptions& options) { return Runner(w, options).Run(); }

}  // namespace msim

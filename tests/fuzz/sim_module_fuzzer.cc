// Fuzzes the simulator's module-file parser, msim::ParseModule
// (sim/src/kernel_decl.cc), the pure function cuModuleLoad* call in
// sim/src/driver_module.cc (whose own code is bound to a Process). For each
// kernel that parses, the cost expressions are evaluated over zeroed
// arguments. Accesses are not: a declared count or page total may be any
// size, so evaluating them is the driver's (and a module author's) affair.
#include <string>
#include <vector>

#include "kernel_decl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  msim::Module module;
  if (!msim::ParseModule(std::string(reinterpret_cast<const char*>(data), size), &module).ok()) return 0;
  for (const auto& k : module.kernels) {
    if (module.Find(k->name) != k.get()) __builtin_trap();
    std::vector<std::vector<char>> storage;
    std::vector<void*> params;
    bool small = true;
    for (const auto& [offset, bytes] : k->params) {
      if (bytes > 4096) small = false;
      storage.emplace_back(small ? bytes + 8 : 0, 0);
      params.push_back(storage.back().data());
    }
    if (!small) continue;
    msim::LaunchArgs args;
    args.kernel = k.get();
    args.params = params.data();
    args.dims.grid[0] = args.dims.block[0] = 1;
    int64_t bytes = 0, flops = 0;
    (void)msim::EvaluateCost(args, &bytes, &flops);
  }
  return 0;
}

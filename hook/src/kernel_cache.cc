#include "kernel_cache.h"

#include "real_driver.h"

namespace msched::hook {
namespace {

using NameFn = CUresult (*)(const char**, void*);
using ParamFn = CUresult (*)(void*, size_t, size_t*, size_t*);

}  // namespace

KernelInfo ResolveKernel(CUfunction f, const TemplateStore& templates) {
  KernelInfo info;
  // A CUkernel may be launched as a CUfunction; whether cuFunc* accept one is
  // undocumented, so the cuKernel* form is tried when cuFunc* refuses.
  static const auto func_name = reinterpret_cast<NameFn>(RealSymbol("cuFuncGetName"));
  static const auto kernel_name = reinterpret_cast<NameFn>(RealSymbol("cuKernelGetName"));
  static const auto func_param = reinterpret_cast<ParamFn>(RealSymbol("cuFuncGetParamInfo"));
  static const auto kernel_param = reinterpret_cast<ParamFn>(RealSymbol("cuKernelGetParamInfo"));
  const char* name = nullptr;
  if (!(func_name && func_name(&name, f) == CUDA_SUCCESS && name) &&
      !(kernel_name && kernel_name(&name, f) == CUDA_SUCCESS && name)) {
    name = nullptr;
  }
  info.name = name ? name : "";
  ParamFn param = nullptr;
  size_t off = 0, size = 0;
  if (func_param && func_param(f, 0, &off, &size) == CUDA_SUCCESS) param = func_param;
  else if (kernel_param && kernel_param(f, 0, &off, &size) == CUDA_SUCCESS) param = kernel_param;
  if (param != nullptr) {
    info.layout_known = true;
    for (size_t i = 0; i < kMaxParams && param(f, i, &off, &size) == CUDA_SUCCESS; ++i) {
      info.layout.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    }
  } else {
    // A kernel without parameters also refuses index 0; its empty layout is right.
    info.layout_known = func_param != nullptr || kernel_param != nullptr;
  }
  if (info.name.empty()) {
    info.why_unpredicted = "the driver gave no name";
  } else if (!info.layout_known) {
    info.why_unpredicted = "the driver cannot report parameter layouts (needs CUDA 12.4+)";
  } else {
    info.tmpl = templates.Find(info.name, info.layout, &info.why_unpredicted);
  }
  return info;
}

const KernelInfo* KernelCache::Insert(CUfunction f, KernelInfo info) {
  auto& slot = by_handle_[f];
  if (!slot) slot = std::make_unique<KernelInfo>(std::move(info));
  return slot.get();
}

}  // namespace msched::hook

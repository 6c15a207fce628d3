#include "job/kernel_cache.h"

#include "interpose/driver_functions.h"

namespace msched::hook {

KernelInfo ResolveKernel(CUfunction f, const TemplateStore& templates) {
  KernelInfo info;
  // A CUkernel may be launched as a CUfunction; whether cuFunc* accept one is
  // undocumented, so the cuKernel* form is tried when cuFunc* refuses.
  const DriverFunctions& real = RealDriver();
  const auto kernel = reinterpret_cast<CUkernel>(f);
  const char* name = nullptr;
  if (!(real.cuFuncGetName && real.cuFuncGetName(&name, f) == CUDA_SUCCESS && name) &&
      !(real.cuKernelGetName && real.cuKernelGetName(&name, kernel) == CUDA_SUCCESS && name)) {
    name = nullptr;
  }
  info.name = name ? name : "";
  // Parameter i's offset and size, by the form that answers for index 0.
  size_t off = 0, size = 0;
  bool kernel_form = false;
  auto param = [&](size_t i) {
    return kernel_form ? real.cuKernelGetParamInfo(kernel, i, &off, &size) : real.cuFuncGetParamInfo(f, i, &off, &size);
  };
  bool answered = real.cuFuncGetParamInfo && param(0) == CUDA_SUCCESS;
  if (!answered && real.cuKernelGetParamInfo) {
    kernel_form = true;
    answered = param(0) == CUDA_SUCCESS;
  }
  if (answered) {
    info.layout_known = true;
    for (size_t i = 0; i < kMaxParams && param(i) == CUDA_SUCCESS; ++i) {
      info.layout.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(size)});
    }
  } else {
    // A kernel without parameters also refuses index 0; its empty layout is right.
    info.layout_known = real.cuFuncGetParamInfo != nullptr || real.cuKernelGetParamInfo != nullptr;
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

// Driver API: modules, libraries and functions. A module image is a JSON
// module file (see docs/simulator.md); a CUfunction and a CUkernel are both
// a pointer to the KernelDecl, so either may be launched, as on the real
// driver where a CUkernel can be cast to CUfunction.
#include <cerrno>

#include "api.h"
#include "msched/bounded_input.h"

using msim::Call;
using msim::KernelDecl;
using msim::Module;
using msim::NeedCtx;
using msim::Process;

namespace {

CUresult LoadText(Process& p, const std::string& text, const std::string& origin, Module** out) {
  auto m = std::make_unique<Module>();
  std::string error;
  // Depth first: the JSON parser and its messages recurse over nesting.
  if (!msched::CheckJsonDepth(text, msched::kMaxJsonDepth, &error)) {
    msim::ReportError("module " + origin + ": " + error);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (const msched::Status parsed = msim::ParseModule(text, m.get()); !parsed.ok()) {
    msim::ReportError("module " + origin + ": " + parsed.message());
    return CUDA_ERROR_INVALID_IMAGE;
  }
  for (const auto& k : m->kernels) p.functions.insert(k.get());
  *out = m.release();
  p.modules.insert(*out);
  return CUDA_SUCCESS;
}

CUresult LoadFile(Process& p, const char* path, Module** out) {
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string text, error;
  if (!msched::ReadRegularFile(path, msched::kMaxConfigFileBytes, &text, &error)) {
    // A missing file is FILE_NOT_FOUND, as on the real driver; anything else
    // (a device, a FIFO, a directory, too large) is not a module image.
    if (errno == ENOENT || errno == EACCES) return CUDA_ERROR_FILE_NOT_FOUND;
    msim::ReportError(std::string("module '") + path + "': " + error);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return LoadText(p, text, std::string("'") + path + "'", out);
}

CUresult LoadImage(Process& p, const void* image, Module** out) {
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LoadText(p, static_cast<const char*>(image), "image", out);
}

CUresult Unload(Process& p, Module* m) {
  if (!p.modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& k : m->kernels) p.functions.erase(k.get());
  delete m;
  return CUDA_SUCCESS;
}

// Handles are the KernelDecl's address; the driver never writes through them.
template <typename Handle>
CUresult GetKernel(Process& p, Module* m, const char* name, Handle* out) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!p.modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  const KernelDecl* k = m->Find(name);
  if (k == nullptr) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<Handle>(const_cast<KernelDecl*>(k));
  return CUDA_SUCCESS;
}

const KernelDecl* Func(Process& p, const void* handle) {
  auto* k = static_cast<const KernelDecl*>(handle);
  return p.functions.count(k) ? k : nullptr;
}

CUresult ParamInfo(const void* handle, size_t index, size_t* offset, size_t* size) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    const KernelDecl* k = Func(p, handle);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (index >= k->params.size()) return CUDA_ERROR_INVALID_VALUE;
    if (offset) *offset = k->params[index].first;
    if (size) *size = k->params[index].second;
    return CUDA_SUCCESS;
  });
}

CUresult Name(const void* handle, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    const KernelDecl* k = Func(p, handle);
    if (k == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name.c_str();
    return CUDA_SUCCESS;
  });
}

CUresult Attribute(const void* handle, int* pi, CUfunction_attribute attrib) {
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (Func(p, handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
      case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
      case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = p.dev->profile().cc_major * 10 + p.dev->profile().cc_minor; break;
      default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
  });
}

Module* AsModule(void* h) { return static_cast<Module*>(h); }

}  // namespace

MSIM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) { return LoadFile(p, fname, reinterpret_cast<Module**>(module)); });
}

MSIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) { return LoadImage(p, image, reinterpret_cast<Module**>(module)); });
}

MSIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*, void**) {
  return cuModuleLoadData(module, image);
}

MSIM_EXPORT CUresult cuModuleUnload(CUmodule module) {
  return Call(NeedCtx::kNo, [&](Process& p) { return Unload(p, AsModule(module)); });
}

MSIM_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) { return GetKernel(p, AsModule(module), name, f); });
}

MSIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned int,
                                       CUlibraryOption*, void**, unsigned int) {
  if (library == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) { return LoadImage(p, code, reinterpret_cast<Module**>(library)); });
}

MSIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* file, CUjit_option*, void**, unsigned int,
                                           CUlibraryOption*, void**, unsigned int) {
  if (library == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) { return LoadFile(p, file, reinterpret_cast<Module**>(library)); });
}

MSIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  return Call(NeedCtx::kNo, [&](Process& p) { return Unload(p, AsModule(library)); });
}

MSIM_EXPORT CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (!p.modules.count(AsModule(library))) return CUDA_ERROR_INVALID_HANDLE;
    *module = reinterpret_cast<CUmodule>(library);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (kernel == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) { return GetKernel(p, AsModule(library), name, kernel); });
}

MSIM_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel kernel) {
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    if (Func(p, kernel) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    *f = reinterpret_cast<CUfunction>(kernel);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) { return Name(f, name); }
MSIM_EXPORT CUresult cuKernelGetName(const char** name, CUkernel k) { return Name(k, name); }
MSIM_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  return ParamInfo(f, i, off, size);
}
MSIM_EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t* off, size_t* size) {
  return ParamInfo(k, i, off, size);
}
MSIM_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute a, CUfunction f) { return Attribute(f, pi, a); }
MSIM_EXPORT CUresult cuKernelGetAttribute(int* pi, CUfunction_attribute a, CUkernel k, CUdevice) {
  return Attribute(k, pi, a);
}
MSIM_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute, int) {
  return Call(NeedCtx::kNo, [&](Process& p) { return Func(p, f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; });
}
MSIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache) { return cuFuncSetAttribute(f, {}, 0); }

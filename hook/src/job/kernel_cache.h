// What the hook knows about each kernel handle (CUfunction, or a CUkernel
// cast to one): its mangled name and parameter layout, asked of the real
// driver once per handle (cuFuncGetName / cuFuncGetParamInfo, falling back to
// the cuKernel* forms), and the template that matches them.
// Externally synchronized (by the Runtime's lock), except ResolveKernel.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "model/template_store.h"
#include "msched/kernel_desc.h"

namespace msched::hook {

struct KernelInfo {
  std::string name;
  ParamLayout layout;
  bool layout_known = false;  // false: the driver would not say
  const CompiledTemplate* tmpl = nullptr;
  std::string why_unpredicted;  // when tmpl is null
};

// Asks the real driver; no lock needed, may be called concurrently.
KernelInfo ResolveKernel(CUfunction f, const TemplateStore& templates);

class KernelCache {
 public:
  // nullptr when `f` was never resolved. Entries are never removed or moved:
  // a KernelInfo* stays valid for the life of the process.
  const KernelInfo* Find(CUfunction f) const {
    auto it = by_handle_.find(f);
    return it == by_handle_.end() ? nullptr : it->second.get();
  }
  const KernelInfo* Insert(CUfunction f, KernelInfo info);
  size_t size() const { return by_handle_.size(); }

 private:
  std::unordered_map<CUfunction, std::unique_ptr<KernelInfo>> by_handle_;
};

}  // namespace msched::hook

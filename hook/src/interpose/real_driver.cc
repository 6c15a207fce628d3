#include "interpose/real_driver.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "job/hook_config.h"
#include "msched/no_destructor.h"
#include "observe/log.h"

// Read by the dlsym entry stub (dlsym_entry.S): a tail call through it keeps
// the caller's return address, which glibc uses to resolve RTLD_NEXT.
extern "C" {
__attribute__((visibility("hidden"))) void* (*msched_real_dlsym)(void*, const char*) = nullptr;
}

namespace msched::hook {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// glibc >= 2.34 exports dlsym@@GLIBC_2.34 beside the compatibility
// dlsym@GLIBC_2.2.5 (x86-64); older ones only the latter. dlvsym is not
// interposed, so it reaches glibc's own. Runs when libmsched is loaded: no
// CUDA involved.
__attribute__((constructor)) void ResolveRealDlsym() {
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5"}) {
    if (void* fn = dlvsym(RTLD_NEXT, "dlsym", version)) {
      msched_real_dlsym = reinterpret_cast<DlsymFn>(fn);
      return;
    }
  }
}

struct Driver {
  std::once_flag once;
  void* handle = nullptr;
  const void* base = nullptr;  // load address, to tell the driver's own calls apart
};

Driver& D() {
  static NoDestructor<Driver> d;
  return *d;
}

// libmsched's own dlopen handle (the same for every path naming it), or
// nullptr if it cannot be found.
void* OwnHandle() {
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&OwnHandle), &self) || self.dli_fname == nullptr) return nullptr;
  void* own = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (own != nullptr) dlclose(own);  // loaded anyway: this only balances the count
  return own;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  if (msched_real_dlsym == nullptr) ResolveRealDlsym();
  return msched_real_dlsym ? msched_real_dlsym(handle, name) : nullptr;
}

void* RealDriverHandle() {
  Driver& d = D();
  std::call_once(d.once, [&d] {
    const std::string& path = HookConfig().real_libcuda;
    // dlopen of a FIFO waits for a writer forever: a path must name a
    // regular file (through any symbolic links). A bare name is searched
    // for in the library path as the dynamic loader does.
    if (path.find('/') != std::string::npos) {
      struct stat st {};
      const char* why = ::stat(path.c_str(), &st) != 0 ? std::strerror(errno)
                        : !S_ISREG(st.st_mode)         ? "not a regular file"
                                                       : nullptr;
      if (why != nullptr) {
        LogError("cannot load the real driver '{}' (MSCHED_REAL_LIBCUDA): {}", path, why);
        return;
      }
    }
    d.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (d.handle == nullptr) {
      const char* err = dlerror();
      LogError("cannot load the real driver '{}' (MSCHED_REAL_LIBCUDA): {}", path, err ? err : "unknown error");
      return;
    }
    // MSCHED_REAL_LIBCUDA naming libmsched itself would make every hook call
    // itself forever: refuse it, so calls fail as with no driver at all.
    if (d.handle == OwnHandle()) {
      LogError("MSCHED_REAL_LIBCUDA '{}' is libmsched itself, not the driver; no driver is used", path);
      dlclose(d.handle);  // drops only the reference taken above
      d.handle = nullptr;
      return;
    }
    Dl_info info{};
    if (void* probe = RealDlsym(d.handle, "cuInit"); probe && dladdr(probe, &info)) d.base = info.dli_fbase;
  });
  return d.handle;
}

void* LoadedDriverHandle() {
  if (void* h = D().handle) return h;
  return dlopen(HookConfig().real_libcuda.c_str(), RTLD_NOW | RTLD_NOLOAD);
}

bool InsideRealDriver(const void* address) {
  const void* base = D().base;
  if (base == nullptr || address == nullptr) return false;
  Dl_info info{};
  return dladdr(address, &info) && info.dli_fbase == base;
}

}  // namespace msched::hook

// The dlsym entry stub (dlsym_entry.S) calls this for an RTLD_NEXT lookup
// made before libmsched's constructor ran, so that the lookup is forwarded
// to glibc's dlsym with its caller's return address, as every later one is.
extern "C" __attribute__((visibility("hidden"))) void* msched_resolve_real_dlsym() {
  if (msched_real_dlsym == nullptr) msched::hook::ResolveRealDlsym();
  return reinterpret_cast<void*>(msched_real_dlsym);
}

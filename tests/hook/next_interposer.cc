// A second interposer for the hook tests, preloaded after libmsched: it
// wraps getppid and, in its constructor (which runs before libmsched's),
// finds the next getppid with dlsym(RTLD_NEXT). It reports on stderr where
// that lookup landed: libc ("next: libc") is right; anything else (its own
// wrapper, or libmsched's idea of "next") is what a stacked interposer
// would recurse into.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

using GetppidFn = pid_t (*)();
GetppidFn next_getppid = nullptr;

__attribute__((constructor)) void FindNext() {
  next_getppid = reinterpret_cast<GetppidFn>(dlsym(RTLD_NEXT, "getppid"));
  Dl_info info{};
  const bool libc = next_getppid != nullptr && dladdr(reinterpret_cast<void*>(next_getppid), &info) &&
                    info.dli_fname != nullptr && std::strstr(info.dli_fname, "libc.so") != nullptr;
  std::fprintf(stderr, "next: %s\n", libc ? "libc" : (info.dli_fname ? info.dli_fname : "nothing"));
}

}  // namespace

extern "C" pid_t getppid() { return next_getppid != nullptr ? next_getppid() : -1; }

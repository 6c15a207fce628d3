// Fuzzes the simulator's workload-file parser, msim::LoadWorkload
// (sim/tools/workload_parse.cc). It takes a path and reads module files relative
// to it, so the input is written to w.json in a private directory under
// /dev/shm whose kernels/ links to bench/workloads/kernels: the shipped
// workloads' module references resolve and parsing goes on past them.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "workload_parse.h"

namespace {

// Removed at a normal exit; left behind only when the process dies.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (path.empty()) return;
    ::unlink((path + "/kernels").c_str());
    ::unlink((path + "/w.json").c_str());
    ::rmdir(path.c_str());
  }
} temp_dir;

const std::string& Dir() {
  if (temp_dir.path.empty()) {
    char dir[] = "/dev/shm/msched_fuzz_workload.XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    if (::symlink(MSCHED_WORKLOAD_KERNELS_DIR, (std::string(dir) + "/kernels").c_str()) != 0) std::abort();
    temp_dir.path = dir;
  }
  return temp_dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = Dir() + "/w.json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
  (void)msim::LoadWorkload(path, {});
  return 0;
}

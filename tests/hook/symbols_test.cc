// libmsched.so must not leak into the host process: it exports only the
// hooked entry points (exactly the generated table) and dlsym at both glibc
// versions, and needs no libstdc++ (a private static copy is inside).
// Also runs entry_check, which resolves every hooked variant, and checks
// that the simulator has every driver function the hook calls.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include "base/subprocess.h"

namespace {

std::string Capture(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

std::set<std::string> Expected() {
  std::set<std::string> names = {"dlsym@@GLIBC_2.34", "dlsym@GLIBC_2.2.5"};
#define MSCHED_HOOK_ENTRY(sym, base, ver, flavour, pfn, params, args, tail) names.insert(#sym "@@MSCHED_1");
#include "hook_entries.inc"
#undef MSCHED_HOOK_ENTRY
  return names;
}

TEST(HookSymbolsTest, ExportsExactlyTheHookedEntryPointsAndDlsym) {
  std::istringstream nm(Capture("nm -D --defined-only " LIBMSCHED));
  std::set<std::string> exported;
  for (std::string line; std::getline(nm, line);) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    if (name.rfind("GLIBC_", 0) == 0 || name == "MSCHED_1") continue;  // version definitions
    exported.insert(name);
  }
  EXPECT_EQ(exported, Expected());
}

TEST(HookSymbolsTest, NeedsNoSharedLibstdcxx) {
  const std::string needed = Capture("readelf -d " LIBMSCHED);
  EXPECT_EQ(needed.find("libstdc++"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libgcc_s"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libfmt"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libspdlog"), std::string::npos) << needed;
}

TEST(HookSymbolsTest, EveryHookedVariantResolvesToItsWrapper) {
  msched::SpawnOptions o;
  o.env = {{"LD_PRELOAD", LIBMSCHED}, {"LD_LIBRARY_PATH", SIM_LIB_DIR}};
  const std::string out = testing::TempDir() + "entry_check_" + std::to_string(getpid()) + ".out";
  o.stdout_path = out;
  auto p = msched::Subprocess::Spawn({ENTRY_CHECK}, o);
  ASSERT_TRUE(p.ok());
  const int status = p->Wait();
  const std::string text = Capture("cat " + out);
  std::remove(out.c_str());
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("0 failures"), std::string::npos) << text;
}

// The driver functions libmsched calls itself (hook/called_driver_functions.txt)
// are all in the simulated driver, so the hook tests exercise every one; a
// real driver lacking one leaves its slot null.
TEST(HookSymbolsTest, SimulatedDriverExportsEveryCalledFunction) {
  std::istringstream nm(Capture("nm -D --defined-only " SIM_LIB_DIR "/libcuda.so.1"));
  std::set<std::string> exported;
  for (std::string line; std::getline(nm, line);) exported.insert(line.substr(line.rfind(' ') + 1));
  std::set<std::string> missing;
#define MSCHED_DRIVER_FUNCTION(sym, base, ver, pfn) \
  if (!exported.contains(#sym)) missing.insert(#sym);
#define MSCHED_DRIVER_FUNCTION_HOOKED MSCHED_DRIVER_FUNCTION
#include "driver_functions.inc"
#undef MSCHED_DRIVER_FUNCTION_HOOKED
#undef MSCHED_DRIVER_FUNCTION
  EXPECT_EQ(missing, std::set<std::string>{});
}

}  // namespace

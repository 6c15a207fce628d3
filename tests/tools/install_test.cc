// The installed tree (packaging/): `cmake --install` into a fresh prefix,
// then a copy of it elsewhere, run with PATH only to that copy: its programs
// find their library, its library finds the shipped templates, a job runs
// under the coordinator `msched run` starts, msched-profile fits templates,
// and no installed file names the build tree. The unit: it passes
// `systemd-analyze verify`, its ExecStart, as written, serves `msched
// status` at its socket, and it gives the msched group that socket's
// directory. The .deb: its files, its dependencies and its maintainer
// scripts. The simulator is never installed: jobs find its libcuda.so.1
// through LD_LIBRARY_PATH, named here.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "run_program.h"

namespace {

namespace fs = std::filesystem;
namespace ts = msched::testsupport;
using nlohmann::json;

constexpr uint64_t kHbm = 64ull << 20;

std::string RealPath(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::canonical(path, ec);
  return ec ? path : p.string();
}

std::string Unit(const std::string& prefix) { return prefix + "/lib/systemd/system/mschedd@.service"; }

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0 && fs::is_regular_file(path); }

// The unit file's settings: key -> values, in order.
std::multimap<std::string, std::string> UnitSettings(const std::string& path) {
  std::multimap<std::string, std::string> settings;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || line[0] == '[' || eq == std::string::npos) continue;
    settings.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return settings;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

class InstallTest : public ::testing::Test {
 protected:
  // One install per test process (ctest runs each test as its own), into a
  // prefix that then moves: nothing may depend on where it was installed.
  static void SetUpTestSuite() {
    root_ = ::testing::TempDir() + "install_" + std::to_string(getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    install_ = ts::RunProgram({CMAKE_COMMAND, "--install", BUILD_DIR, "--prefix", Stage(), "--strip"}, {});
    if (install_.status == 0) {
      copy_ = ts::RunProgram({"cp", "-a", Stage(), Prefix()}, {});
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  void SetUp() override {
    ASSERT_EQ(install_.status, 0) << install_.out << install_.err;
    ASSERT_EQ(copy_.status, 0) << copy_.err;
  }

  static std::string Stage() { return root_ + "/stage"; }
  static std::string Prefix() { return root_ + "/moved"; }
  static std::string Lib() { return Prefix() + "/" INSTALL_LIBDIR "/msched/libmsched.so"; }
  static std::string Share() { return Prefix() + "/share/msched"; }

  // A program of the installed copy, with PATH only to it and nothing of the
  // caller's msched settings; `env` adds to that.
  static ts::ProgramRun Installed(const std::string& program, std::vector<std::string> args,
                                  std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), Prefix() + "/bin/" + program);
    env.emplace("PATH", Prefix() + "/bin:/usr/bin:/bin");
    for (const char* unset : {"MSCHED_LIB", "MSCHED_SOCKET", "MSCHED_TEMPLATES", "MSCHED_MODE", "MSCHED_COORD",
                              "MSCHED_LOG", "MSCHED_STATS", "LD_PRELOAD", "LD_LIBRARY_PATH", "MSIM_DEVICE"}) {
      env.emplace(unset, "");
    }
    return ts::RunProgram(args, env);
  }
  static std::string Workload(const std::string& name) { return Share() + "/bench/workloads/" + name; }

  static std::string root_;
  static ts::ProgramRun install_, copy_;
};

std::string InstallTest::root_;
ts::ProgramRun InstallTest::install_, InstallTest::copy_;

TEST_F(InstallTest, LaysOutTheProgramsLibraryDataUnitAndDocs) {
  for (const char* program : {"msched", "mschedd", "msched-profile"}) {
    EXPECT_TRUE(Executable(Prefix() + "/bin/" + program)) << program;
  }
  EXPECT_TRUE(fs::is_regular_file(Lib())) << Lib();
  for (const std::string& file :
       {Share() + "/templates/devices/rtx5080-pcie5.json", Share() + "/bench/workloads/micro_vadd.json",
        Share() + "/bench/scenarios/micro.json", Share() + "/bench/traces/llama-8x1024-t3.trace.xz",
        Share() + "/bench/scenarios/real-llama.json", Unit(Prefix()), Prefix() + "/lib/sysusers.d/msched.conf",
        Prefix() + "/libexec/msched/slurm-taskprolog", Prefix() + "/share/doc/msched/operate.md",
        Prefix() + "/share/doc/msched/README.md", Prefix() + "/share/doc/msched/LICENSE",
        Prefix() + "/share/doc/msched/quickstart.md", Share() + "/grafana/msched-dashboard.json",
        Share() + "/prometheus/msched-alerts.yml"}) {
    EXPECT_TRUE(fs::is_regular_file(file)) << file;
  }
  // A man page for each program, made from its own --help and --version.
  for (const char* program : {"msched", "mschedd", "msched-profile"}) {
    const std::string page = ts::Slurp(Prefix() + "/share/man/man1/" + program + ".1");
    EXPECT_NE(page.find(".TH "), std::string::npos) << program;
    EXPECT_NE(page.find(" " MSCHED_VERSION "\""), std::string::npos) << program << ": its version\n" << page;
    EXPECT_NE(page.find("usage: "), std::string::npos) << program << ": its usage\n" << page;
  }
  // Only the three programs, and no piece of the simulator anywhere.
  std::set<std::string> bin;
  for (const auto& e : fs::directory_iterator(Prefix() + "/bin")) bin.insert(e.path().filename().string());
  EXPECT_EQ(bin, (std::set<std::string>{"msched", "mschedd", "msched-profile"}));
  for (const auto& e : fs::recursive_directory_iterator(Prefix())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name != "libcuda.so.1" && name != "msim-run") << e.path();
  }
}

TEST_F(InstallTest, NoInstalledFileNamesTheBuildTree) {
  for (const auto& e : fs::recursive_directory_iterator(Prefix())) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content.find(BUILD_DIR), std::string::npos) << e.path() << " names " << BUILD_DIR;
  }
}

TEST_F(InstallTest, MschedRunPreloadsTheInstalledLibrary) {
  const ts::ProgramRun r =
      Installed("msched", {"run", "--coord", "off", "--", "/bin/sh", "-c", "printf %s \"$LD_PRELOAD\""});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(RealPath(r.out), RealPath(Lib())) << r.out;
}

// The shipped templates are those in share/msched/templates beside the
// installed library: with the simulator's kernels' templates there, every
// launch is predicted; without them, only the shipped PyTorch templates
// load, which match none of the simulator's kernels, and every launch takes
// the pointer fallback. MSCHED_SHIPPED_TEMPLATES=off loads none of them.
TEST_F(InstallTest, TheInstalledLibraryLoadsTheTemplatesInShare) {
  const std::string stats = root_ + "/stats.json";
  const std::string shipped = Share() + "/templates/basic.templates.json";
  auto run = [&](const std::string& load_shipped = "on") {
    ::unlink(stats.c_str());
    const ts::ProgramRun r =
        Installed("msched", {"run", "--coord", "off", "--mode", "msched", "--", MSIM_RUN, Workload("integrity.json")},
                  {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                   {"MSCHED_STATS", stats},
                   {"MSCHED_SHIPPED_TEMPLATES", load_shipped},
                   {"MSIM_HBM_BYTES", std::to_string(256ull << 20)}});
    EXPECT_EQ(r.status, 0) << r.err;
    return json::parse(ts::Slurp(stats), nullptr, false);
  };
  fs::copy_file(WORKLOADS_DIR "/kernels/basic.templates.json", shipped, fs::copy_options::overwrite_existing);
  const json with = run();
  EXPECT_GT(ts::JsonU64(with, {"templates", "loaded"}), 0u) << with.dump();
  EXPECT_EQ(ts::JsonU64(with, {"launches", "predicted"}), 16u) << with.dump();
  const json none = run("off");
  EXPECT_EQ(ts::JsonU64(none, {"templates", "loaded"}), 0u) << none.dump();
  EXPECT_EQ(ts::JsonU64(none, {"launches", "predicted"}), 0u) << none.dump();
  fs::remove(shipped);
  const json without = run();
  EXPECT_LT(ts::JsonU64(without, {"templates", "loaded"}), ts::JsonU64(with, {"templates", "loaded"}))
      << without.dump();
  EXPECT_EQ(ts::JsonU64(without, {"templates", "problems"}), 0u) << without.dump();
  EXPECT_EQ(ts::JsonU64(without, {"launches", "predicted"}), 0u) << without.dump();
  EXPECT_EQ(ts::JsonU64(without, {"launches", "fallback"}), 16u) << without.dump();
}

// `msched run` starts the installed mschedd beside it; the job joins it and
// computes what it computes alone.
TEST_F(InstallTest, AJobRunsUnderTheCoordinatorTheInstalledMschedStarts) {
  const std::string device = "install" + std::to_string(getpid());
  const std::string socket = root_ + "/run/gpu0.sock";
  const std::vector<std::string> job = {MSIM_RUN, Workload("micro_vadd.json"), "--set", "FOOT=8388608", "--set",
                                        "TASKS=3"};
  const std::map<std::string, std::string> sim = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                                                  {"MSIM_HBM_BYTES", std::to_string(kHbm)}};
  std::map<std::string, std::string> alone_env = sim;
  alone_env["MSIM_DEVICE"] = device + "alone";
  const ts::ProgramRun alone = ts::RunProgram(job, alone_env);
  ::unlink(("/dev/shm/msim-" + device + "alone").c_str());
  ASSERT_EQ(alone.status, 0) << alone.err;

  std::vector<std::string> args = {"run", "--coord", "required", "--socket", socket, "--name", "installed-job", "--"};
  args.insert(args.end(), job.begin(), job.end());
  std::map<std::string, std::string> env = sim;
  env["MSIM_DEVICE"] = device;
  const ts::ProgramRun r = Installed("msched", args, env);
  ::unlink(("/dev/shm/msim-" + device).c_str());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(ts::Checksums(alone.out).empty()) << alone.out;
  EXPECT_EQ(ts::Checksums(r.out), ts::Checksums(alone.out));

  const ts::ProgramRun status = Installed("msched", {"--socket", socket, "status", "--json"});
  ASSERT_EQ(status.status, 0) << status.err;
  const json s = json::parse(status.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << status.out;
  const int pid = s["coordinator"].value("pid", 0);
  ASSERT_GT(pid, 0) << status.out;
  EXPECT_EQ(RealPath("/proc/" + std::to_string(pid) + "/exe"), RealPath(Prefix() + "/bin/mschedd"));
  bool joined = false;
  for (const json& j : s["jobs"]) joined = joined || j.value("name", std::string()) == "installed-job";
  EXPECT_TRUE(joined) << status.out;
  ::kill(pid, SIGTERM);
}

TEST_F(InstallTest, MschedProfileFromTheInstalledTreeFitsTemplates) {
  const std::string out = root_ + "/vadd.templates.json";
  const ts::ProgramRun r =
      Installed("msched-profile",
                {"-o", out, "--", MSIM_RUN, Workload("micro_vadd.json"), "--set", "FOOT=4194304", "--set", "TASKS=1"},
                {{"LD_LIBRARY_PATH", SIM_LIB_DIR}});
  ASSERT_EQ(r.status, 0) << r.err;
  const json t = json::parse(ts::Slurp(out), nullptr, false);
  ASSERT_TRUE(t.is_object()) << ts::Slurp(out);
  EXPECT_FALSE(t.value("kernels", json::array()).empty()) << t.dump();
}

// The suite's data comes from share/msched (a scenario taken out of it is
// gone), the simulator from MSCHED_SIM_DIR: never installed, named here.
TEST_F(InstallTest, MschedBenchQuickMicroRunsFromTheInstalledTree) {
  const std::map<std::string, std::string> sim = {{"MSCHED_SIM_DIR", SIM_DIR}};
  const std::string out = root_ + "/bench";
  const ts::ProgramRun r = Installed("msched", {"bench", "--quick", "micro", "--out", out}, sim);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(fs::is_regular_file(out + "/report.md")) << r.err;
  EXPECT_NE(r.out.find("| micro | 150%"), std::string::npos) << r.out;
  fs::remove(Share() + "/bench/scenarios/overhead.json");
  const ts::ProgramRun list = Installed("msched", {"bench", "--list"}, sim);
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_NE(list.out.find("micro\t"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("overhead\t"), std::string::npos) << list.out;
}

// verify loads the unit as systemd would (specifiers, settings, that
// ExecStart's program exists), with no systemd running. The stage prefix is
// where the unit's paths point.
TEST_F(InstallTest, TheUnitPassesSystemdAnalyzeVerify) {
  ASSERT_TRUE(Executable(SYSTEMD_ANALYZE)) << "systemd-analyze is missing: run scripts/setup.sh";
  // An instance is verified through a link named for it.
  const std::string instance = root_ + "/units/mschedd@0.service";
  fs::create_directories(root_ + "/units");
  fs::create_symlink(Unit(Stage()), instance);
  const ts::ProgramRun r = ts::RunProgram({SYSTEMD_ANALYZE, "verify", "--man=no", instance}, {});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("mschedd@"), std::string::npos) << "a complaint about the unit:\n" << r.err;
}

// The socket lies in the runtime directory that systemd makes root:msched
// 0750, and instance 0's is the one jobs look for first (DefaultSocketPath).
TEST_F(InstallTest, TheUnitGivesTheMschedGroupItsSocketDirectory) {
  const auto settings = UnitSettings(Unit(Stage()));
  auto one = [&](const std::string& key) {
    EXPECT_EQ(settings.count(key), 1u) << key;
    const auto it = settings.find(key);
    return it == settings.end() ? std::string() : it->second;
  };
  EXPECT_EQ(one("Group"), "msched");
  EXPECT_EQ(one("RuntimeDirectory"), "msched");
  EXPECT_EQ(one("RuntimeDirectoryMode"), "0750");
  EXPECT_EQ(one("RuntimeDirectoryPreserve"), "yes") << "instances share the directory";
  EXPECT_EQ(settings.count("User"), 0u) << "root: jobs trust only root or themselves";
  EXPECT_EQ(one("Restart"), "on-failure");
  const std::string exec = one("ExecStart");
  EXPECT_EQ(exec.rfind(Stage() + "/bin/mschedd ", 0), 0u) << exec;
  EXPECT_NE(Replace(Replace(exec, "%t", "/run"), "%i", "0").find(" --socket /run/msched/gpu0.sock"), std::string::npos)
      << exec;
}

// ExecStart as written, with %t and %i as systemd would give them (a
// runtime directory here instead of /run), serves `msched status` on its
// socket and stops cleanly on SIGTERM, as systemctl stop sends.
TEST_F(InstallTest, TheUnitsExecStartServesStatusAtItsSocket) {
  const auto settings = UnitSettings(Unit(Stage()));
  ASSERT_EQ(settings.count("ExecStart"), 1u);
  const std::string runtime = root_ + "/run";
  fs::create_directories(runtime + "/msched");
  fs::permissions(runtime + "/msched", fs::perms(0750));
  const std::string line = Replace(Replace(settings.find("ExecStart")->second, "%t", runtime), "%i", "3");
  std::vector<std::string> argv;
  std::istringstream words(line);
  for (std::string w; words >> w;) argv.push_back(w);
  auto d = msched::Subprocess::Spawn(argv);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const std::string socket = runtime + "/msched/gpu3.sock";
  json s;
  for (int i = 0; i < 250 && !s.is_object(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = json::parse(Installed("msched", {"--socket", socket, "status", "--json"}).out, nullptr, false);
  }
  ASSERT_TRUE(s.is_object()) << "no answer at " << socket << " from: " << line;
  EXPECT_EQ(s["coordinator"].value("socket", std::string()), socket);
  EXPECT_EQ(s["coordinator"].value("pid", 0), d->pid());
  d->Kill(SIGTERM);
  EXPECT_EQ(d->Wait(), 0);
  EXPECT_FALSE(fs::exists(socket)) << "a clean stop removes the socket";
}

// cpack builds the .deb from the same install; its files, dependencies and
// maintainer scripts are checked with dpkg-deb.
TEST(PackageTest, TheDebHoldsTheInstallUnderUsrWithItsDependenciesAndScripts) {
  ASSERT_TRUE(Executable(DPKG_DEB)) << "dpkg-deb is missing";
  const std::string dir = ::testing::TempDir() + "package_" + std::to_string(getpid());
  fs::remove_all(dir);
  const ts::ProgramRun cpack =
      ts::RunProgram({CPACK_COMMAND, "-G", "DEB", "--config", BUILD_DIR "/CPackConfig.cmake", "-B", dir}, {});
  ASSERT_EQ(cpack.status, 0) << cpack.out << cpack.err;
  std::string deb;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".deb") deb = e.path().string();
  }
  ASSERT_FALSE(deb.empty()) << cpack.out;
  EXPECT_EQ(fs::path(deb).filename().string().rfind("msched_" MSCHED_VERSION "-1_", 0), 0u) << deb;

  const ts::ProgramRun list = ts::RunProgram({DPKG_DEB, "-c", deb}, {});
  ASSERT_EQ(list.status, 0) << list.err;
  for (const char* file : {"./usr/bin/msched", "./usr/bin/mschedd", "./usr/bin/msched-profile",
                           "./usr/" INSTALL_LIBDIR "/msched/libmsched.so", "./usr/lib/systemd/system/mschedd@.service",
                           "./usr/lib/sysusers.d/msched.conf", "./usr/libexec/msched/slurm-taskprolog",
                           "./usr/share/msched/templates/devices/rtx5080-pcie5.json",
                           "./usr/share/msched/bench/scenarios/micro.json", "./usr/share/doc/msched/operate.md"}) {
    EXPECT_NE(list.out.find(std::string(" ") + file + "\n"), std::string::npos) << file << "\n" << list.out;
  }
  EXPECT_EQ(list.out.find("libcuda"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("msim"), std::string::npos) << list.out;
  std::istringstream entries(list.out);
  for (std::string entry; std::getline(entries, entry);) {
    EXPECT_NE(entry.find(" root/root "), std::string::npos) << "every file belongs to root: " << entry;
  }

  const ts::ProgramRun fields = ts::RunProgram({DPKG_DEB, "-f", deb, "Package", "Version", "Depends"}, {});
  ASSERT_EQ(fields.status, 0) << fields.err;
  EXPECT_NE(fields.out.find("Package: msched\n"), std::string::npos) << fields.out;
  EXPECT_NE(fields.out.find("Version: " MSCHED_VERSION "-1\n"), std::string::npos) << fields.out;
  // The C and C++ runtimes the programs link, and passwd for postinst's groupadd: nothing else.
  const size_t at = fields.out.find("Depends: ");
  ASSERT_NE(at, std::string::npos) << fields.out;
  std::set<std::string> depends;
  std::istringstream items(fields.out.substr(at + 9));
  for (std::string item; std::getline(items, item, ',');) {
    item.erase(0, item.find_first_not_of(' '));
    depends.insert(item.substr(0, item.find_first_of(" \n")));
  }
  EXPECT_TRUE(depends.count("libc6") && depends.count("libstdc++6") && depends.count("passwd")) << fields.out;
  for (const std::string& d : depends) {
    EXPECT_TRUE(d == "libc6" || d == "libstdc++6" || d == "libgcc-s1" || d == "passwd") << d << " in " << fields.out;
  }

  // The unit names /usr/bin/mschedd; postinst creates the group and is a valid sh script.
  const std::string tree = dir + "/tree";
  ASSERT_EQ(ts::RunProgram({DPKG_DEB, "-x", deb, tree}, {}).status, 0);
  EXPECT_NE(ts::Slurp(Unit(tree + "/usr")).find("\nExecStart=/usr/bin/mschedd --socket %t/msched/gpu%i.sock\n"),
            std::string::npos)
      << ts::Slurp(Unit(tree + "/usr"));
  const std::string control = dir + "/control";
  ASSERT_EQ(ts::RunProgram({DPKG_DEB, "-e", deb, control}, {}).status, 0);
  for (const char* script : {"postinst", "prerm", "postrm"}) {
    const std::string path = control + "/" + script;
    EXPECT_TRUE(Executable(path)) << script;
    EXPECT_EQ(ts::RunProgram({"/bin/sh", "-n", path}, {}).status, 0) << script;
  }
  EXPECT_NE(ts::Slurp(control + "/postinst").find("groupadd --system msched"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace

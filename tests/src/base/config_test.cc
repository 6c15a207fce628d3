#include <gtest/gtest.h>

#include <map>

#include "msched/config.h"

namespace msched {
namespace {

ConfigParse Parse(const std::map<std::string, std::string>& env, const char* const* environ = nullptr) {
  return ParseConfig(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      environ);
}

TEST(ParseBytesTest, AcceptsUnits) {
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("512M"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("8GiB"), 8ull << 30);
  EXPECT_EQ(*ParseBytes("8gib"), 8ull << 30);
  EXPECT_EQ(*ParseBytes("1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseBytes("10GB"), 10'000'000'000ull);
  EXPECT_EQ(*ParseBytes(" 2 KiB "), 2048u);
  EXPECT_EQ(*ParseBytes("1T"), 1ull << 40);
}

TEST(ParseBytesTest, RejectsGarbage) {
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("G").ok());
  EXPECT_FALSE(ParseBytes("8 parsecs").ok());
  EXPECT_FALSE(ParseBytes("-1G").ok());
  EXPECT_FALSE(ParseBytes("1..2G").ok());
  EXPECT_FALSE(ParseBytes("99999999999T").ok());
}

TEST(ParseDurationTest, NeedsAUnit) {
  EXPECT_EQ(*ParseDurationNs("250ms"), 250'000'000u);
  EXPECT_EQ(*ParseDurationNs("2s"), 2'000'000'000u);
  EXPECT_EQ(*ParseDurationNs("1.5s"), 1'500'000'000u);
  EXPECT_EQ(*ParseDurationNs("100us"), 100'000u);
  EXPECT_EQ(*ParseDurationNs("2min"), 120'000'000'000u);
  EXPECT_FALSE(ParseDurationNs("250").ok());
  EXPECT_FALSE(ParseDurationNs("5 fortnights").ok());
}

TEST(ParseIntegerTest, TakesOnlyAWholeIntegerWithinItsBounds) {
  EXPECT_EQ(*ParseInteger("-100", -100, 100), -100);
  EXPECT_EQ(*ParseInteger("256", 1, 256), 256);
  for (const char* bad : {"", "101", "-101", "1.5", "12x", " 5", "+5", "99999999999999999999"}) {
    EXPECT_FALSE(ParseInteger(bad, -100, 100).ok()) << bad;
  }
}

TEST(ConfigTest, DefaultsWhenNothingIsSet) {
  ConfigParse p = Parse({});
  EXPECT_TRUE(p.errors.empty());
  EXPECT_EQ(p.config.mode, Mode::kMsched);
  EXPECT_EQ(p.config.unknown, UnknownPolicy::kPointers);
  EXPECT_TRUE(p.config.shipped_templates);
  EXPECT_EQ(p.config.coord, CoordMode::kAuto);
  EXPECT_EQ(p.config.log_level, LogLevel::kError);
  EXPECT_FALSE(p.config.gpu_memory.has_value());
  EXPECT_EQ(p.config.real_libcuda, "libcuda.so.1");
  EXPECT_TRUE(p.config.socket_path.empty()) << "unset: each GPU's own coordinator";
  EXPECT_TRUE(p.config.socket_dir.empty());
}

TEST(ConfigTest, ParsesEveryVariable) {
  ConfigParse p = Parse({{"MSCHED_MODE", "UM"},
                         {"MSCHED_TEMPLATES", "/a.json: /dir ::"},
                         {"MSCHED_SHIPPED_TEMPLATES", "OFF"},
                         {"MSCHED_GPU_MEMORY", "8GiB"},
                         {"MSCHED_UNKNOWN", "alloc"},
                         {"MSCHED_STATS", "/tmp/s.json"},
                         {"MSCHED_LOG", "/tmp/l.log"},
                         {"MSCHED_LOG_LEVEL", "debug"},
                         {"MSCHED_REAL_LIBCUDA", "/opt/libcuda.so.1"},
                         {"MSCHED_COORD", "required"},
                         {"MSCHED_SOCKET", "/run/m.sock"},
                         {"MSCHED_SOCKET_DIR", "/srv/msched"},
                         {"MSCHED_COORD_WAIT", "5s"},
                         {"MSCHED_MEM", "20G"},
                         {"MSCHED_CLASS", "short"},
                         {"MSCHED_PRIORITY", "-7"},
                         {"MSCHED_JOB_NAME", "train"},
                         {"MSCHED_PROFILE_TRACE", "/tmp/t.jsonl"}});
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  const Config& c = p.config;
  EXPECT_EQ(c.mode, Mode::kUm);
  EXPECT_EQ(c.template_paths, (std::vector<std::string>{"/a.json", "/dir"}));
  EXPECT_FALSE(c.shipped_templates);
  EXPECT_EQ(c.gpu_memory, 8ull << 30);
  EXPECT_EQ(c.unknown, UnknownPolicy::kAlloc);
  EXPECT_EQ(c.stats_path, "/tmp/s.json");
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.coord, CoordMode::kRequired);
  EXPECT_EQ(c.coord_wait_ns, 5'000'000'000u);
  EXPECT_EQ(c.socket_path, "/run/m.sock");
  EXPECT_EQ(c.socket_dir, "/srv/msched");
  EXPECT_EQ(c.job_memory, 20ull << 30);
  EXPECT_EQ(c.job_class, JobClass::kShort);
  EXPECT_EQ(Parse({{"MSCHED_CLASS", "service"}}).config.job_class, JobClass::kService);
  EXPECT_FALSE(Parse({{"MSCHED_CLASS", "server"}}).errors.empty());
  EXPECT_EQ(c.priority, -7);
  EXPECT_EQ(c.job_name, "train");
  EXPECT_EQ(c.profile_trace, "/tmp/t.jsonl");
}

// Each GPU of the machine has its coordinator; MSCHED_SOCKET names one for
// every GPU, MSCHED_SOCKET_DIR moves them all.
TEST(ConfigTest, EachGpuHasItsCoordinatorSocket) {
  Config c;
  EXPECT_EQ(CoordinatorSocket(c, 3), DefaultSocketPath(3));
  EXPECT_NE(DefaultSocketPath(3), DefaultSocketPath(0));
  EXPECT_EQ(DefaultSocketPath(3).substr(DefaultSocketPath(3).rfind('/')), "/gpu3.sock");
  c.socket_dir = "/srv/msched";
  EXPECT_EQ(CoordinatorSocket(c, 3), "/srv/msched/gpu3.sock");
  c.socket_path = "/run/one.sock";
  EXPECT_EQ(CoordinatorSocket(c, 3), "/run/one.sock");
  EXPECT_EQ(CoordinatorSocket(c, 0), "/run/one.sock");
}

TEST(ConfigTest, EachBadValueIsOneErrorAndKeepsTheDefault) {
  ConfigParse p = Parse({{"MSCHED_MODE", "fast"},
                         {"MSCHED_GPU_MEMORY", "lots"},
                         {"MSCHED_PRIORITY", "1000"},
                         {"MSCHED_COORD_WAIT", "30"},
                         {"MSCHED_SHIPPED_TEMPLATES", "no"},
                         {"MSCHED_UNKNOWN", "alloc"}});
  ASSERT_EQ(p.errors.size(), 5u);
  EXPECT_EQ(p.errors[0].variable, "MSCHED_MODE");
  EXPECT_NE(p.errors[0].ToString().find("off|um|alloc|msched|profile"), std::string::npos);
  EXPECT_NE(p.errors[0].ToString().find("'fast'"), std::string::npos);
  EXPECT_EQ(p.config.mode, Mode::kMsched);
  EXPECT_FALSE(p.config.gpu_memory.has_value());
  EXPECT_EQ(p.config.priority, 0);
  EXPECT_TRUE(p.config.shipped_templates);
  EXPECT_EQ(p.config.unknown, UnknownPolicy::kAlloc);  // the good one still applies
}

// A name over 63 bytes (64 ASCII bytes, 40 two-byte characters) is a valid
// setting, not "expected any text". Any text is taken whole;
// the hook cuts it to 63 bytes on a character boundary when it sends it
// (proto::SanitizeName, tested in protocol_test.cc).
TEST(ConfigTest, AJobNameOfAnyLengthIsAccepted) {
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";  // é
  for (const std::string& name : {std::string(64, 'x'), accents, std::string(1000, 'y')}) {
    const ConfigParse p = Parse({{"MSCHED_JOB_NAME", name}});
    EXPECT_TRUE(p.errors.empty()) << p.errors[0].ToString();
    EXPECT_EQ(p.config.job_name, name);
  }
  const ConfigParse blank = Parse({{"MSCHED_JOB_NAME", "  "}});
  ASSERT_EQ(blank.errors.size(), 1u) << "an empty name leaves the program's";
  EXPECT_NE(blank.errors[0].ToString().find("any non-empty text"), std::string::npos) << blank.errors[0].ToString();
}

TEST(ConfigTest, ReportsUnknownMschedVariables) {
  const char* environ[] = {
      "PATH=/bin", "MSCHED_MODEE=um", "MSCHED_MODE=um", "MSCHED_LIB=/x/libmsched.so", "MSCHED_SIM_DIR=/x/sim", nullptr};
  ConfigParse p = Parse({{"MSCHED_MODE", "um"}}, environ);
  EXPECT_EQ(p.unknown_variables, (std::vector<std::string>{"MSCHED_MODEE"})) << "the programs' own variables are known";
}

TEST(ConfigTest, EveryVariableIsDocumented) {
  for (const ConfigVariable& v : ConfigVariables()) {
    EXPECT_NE(std::string(v.meaning), "");
    EXPECT_NE(std::string(v.accepted), "");
  }
  EXPECT_GE(ConfigVariables().size(), 15u);
}

TEST(FormatBytesTest, PicksUnits) {
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(8ull << 30), "8.0 GiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace msched

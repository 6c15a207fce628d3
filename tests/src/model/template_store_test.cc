#include "model/template_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace msched {
namespace {

// A directory of this test's own (TempDir outlives runs and is shared).
std::string File(const std::string& name, const std::string& text) {
  const std::string dir = testing::TempDir() + "tstore_" + std::to_string(getpid()) + "_" +
                          testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  std::filesystem::create_directories(dir + "sub");
  std::filesystem::create_directories(dir + "devices");
  std::ofstream(dir + name) << text;
  return dir;
}

const char* Templates(const char* name, int extent) {
  static std::string s;
  s = std::string(R"({"format":"msched-templates","version":1,"kernels":[{"name":")") + name +
      R"(","params":[[0,8],[8,8]],"regions":[{"base":"p0","kind":"fixed","extent":)" + std::to_string(extent) +
      R"(}]}],"unpredictable":[{"name":"chase","reason":"base read from memory"}]})";
  return s.c_str();
}

TEST(TemplateStoreTest, LoadsTemplatesFilesBelowDirectoriesAndLetsLaterFilesOverride) {
  File("a.templates.json", Templates("k", 4096));
  File("sub/b.templates.json", Templates("k", 8192));
  File("module.json", R"({"format":"msim-module"})");  // not a templates file: ignored
  const std::string dir = File("devices/rtx.json", R"({"format":"msim-device"})");
  TemplateStore store;
  std::vector<TemplateProblem> problems;
  store.LoadPaths({dir}, &problems);
  EXPECT_TRUE(problems.empty()) << problems[0].ToString();
  std::string why;
  const CompiledTemplate* t = store.Find("k", {{0, 8}, {8, 8}}, &why);
  ASSERT_NE(t, nullptr) << why;
  EXPECT_EQ(t->source().regions[0].extent.add, 8192);  // sub/b.json sorts after a.json
  EXPECT_EQ(store.Find("k", {{0, 8}}, &why), nullptr);
  EXPECT_NE(why.find("layout differs"), std::string::npos);
  EXPECT_EQ(store.Find("chase", {}, &why), nullptr);
  EXPECT_NE(why.find("unpredictable: base read from memory"), std::string::npos);
  EXPECT_EQ(store.Find("other", {}, &why), nullptr);
  EXPECT_EQ(why, "no template");
}

TEST(TemplateStoreTest, ProblemsAreReportedAndTheRestLoads) {
  File("a.templates.json", Templates("k", 4096));
  const std::string dir = File("broken.json", "{\"format\": \"msched-templates\", \"kernels\": [");
  TemplateStore store;
  std::vector<TemplateProblem> problems;
  store.LoadPaths({dir + "broken.json", dir + "a.templates.json", "/nonexistent.json"}, &problems);
  EXPECT_EQ(problems.size(), 2u);
  EXPECT_EQ(store.size(), 1u);
}

// Every path MSCHED_TEMPLATES lists, and every file found below a
// listed directory, is read only if it is a regular file: devices and FIFOs
// are reported (when named) or passed over (when found), never read or waited on.
TEST(TemplateStoreTest, DevicesAndFifosAreNeverReadFromPathsOrDirectories) {
  const std::string dir = File("a.templates.json", Templates("k", 4096));
  const std::string fifo = dir + "sub/pipe.templates.json";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::remove(dir + "sub/zero.templates.json");
  std::filesystem::create_symlink("/dev/zero", dir + "sub/zero.templates.json");
  TemplateStore store;
  std::vector<TemplateProblem> problems;
  store.LoadPaths({dir, "/dev/zero", fifo}, &problems);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].file, "/dev/zero");
  EXPECT_NE(problems[0].message.find("not a regular file"), std::string::npos) << problems[0].ToString();
  EXPECT_EQ(problems[1].file, fifo);
  EXPECT_EQ(store.size(), 1u) << "the regular file still loads";
}

}  // namespace
}  // namespace msched

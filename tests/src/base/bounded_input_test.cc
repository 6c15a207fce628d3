// msched/bounded_input.h: only regular files are read, never past their cap
// and never by blocking; JSON nesting is bounded without recursion.
#include "msched/bounded_input.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace msched {
namespace {

std::string Temp(const std::string& name) {
  return testing::TempDir() + "bounded_" + std::to_string(getpid()) + "_" + name;
}

TEST(BoundedInputTest, ReadsARegularFileWithinItsCap) {
  const std::string path = Temp("small.json");
  std::ofstream(path) << "[1, 2, 3]";
  std::string text, error;
  ASSERT_TRUE(ReadRegularFile(path, 9, &text, &error)) << error;
  EXPECT_EQ(text, "[1, 2, 3]");
  EXPECT_FALSE(ReadRegularFile(path, 8, &text, &error));
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
  ::unlink(path.c_str());
}

TEST(BoundedInputTest, RefusesDevicesFifosAndDirectoriesWithoutReadingOrBlocking) {
  std::string text, error;
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    EXPECT_FALSE(ReadRegularFile(device, kMaxTemplatesFileBytes, &text, &error)) << device;
    EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
    EXPECT_TRUE(text.empty()) << "nothing was read from " << device;
  }
  const std::string fifo = Temp("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ReadRegularFile(fifo, kMaxTemplatesFileBytes, &text, &error)) << "a FIFO with no writer";
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  ::unlink(fifo.c_str());
  EXPECT_FALSE(ReadRegularFile(testing::TempDir(), kMaxTemplatesFileBytes, &text, &error));
  EXPECT_NE(error.find("is a directory"), std::string::npos) << error;
  EXPECT_FALSE(ReadRegularFile("/nonexistent/x.json", kMaxTemplatesFileBytes, &text, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(BoundedInputTest, NestingIsCountedOutsideStringsOnly) {
  std::string error;
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [[1], {"b": [2]}]})", 4, &error)) << error;
  EXPECT_FALSE(CheckJsonDepth(R"({"a": [[1], {"b": [2]}]})", 3, &error));
  EXPECT_NE(error.find("nested deeper than 3"), std::string::npos) << error;
  EXPECT_TRUE(CheckJsonDepth(R"(["[[[[{{{{", "\"[[[[", 1])", 1, &error)) << "brackets in strings do not count";
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(CheckJsonDepth(deep, kMaxJsonDepth, &error));
}

}  // namespace
}  // namespace msched

#include "base/chrome_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace msched::trace {
namespace {

using json = nlohmann::json;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/chrome_trace_" + std::to_string(::getpid()) + "_" + name;
}

json ParseFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

TEST(ChromeTraceTest, EventsHaveTheFieldsTheViewersExpect) {
  const json span = ToJson({'X', "running", "job", 1500, 2'000'250, 42, 1, {{"job", 3}}});
  EXPECT_EQ(span["ph"], "X");
  EXPECT_DOUBLE_EQ(span["ts"].get<double>(), 1.5);  // microseconds
  EXPECT_DOUBLE_EQ(span["dur"].get<double>(), 2000.25);
  EXPECT_EQ(span["pid"], 42);
  EXPECT_EQ(span["tid"], 1);
  EXPECT_EQ(span["cat"], "job");
  EXPECT_EQ(span["args"]["job"], 3);
  const json instant = ToJson({'i', "admitted", "", 7000, 0, 42, 1, nullptr});
  EXPECT_EQ(instant["s"], "t");
  EXPECT_FALSE(instant.contains("dur"));
  EXPECT_FALSE(instant.contains("args"));
  const json meta = ToJson(ProcessName(42, "job 3: train"));
  EXPECT_EQ(meta["ph"], "M");
  EXPECT_EQ(meta["args"]["name"], "job 3: train");
}

TEST(ChromeTraceTest, ClosedTraceIsAJsonArrayOfTheEventsWritten) {
  const std::string path = TempPath("closed.json");
  Result<std::unique_ptr<Writer>> w = Writer::Create(path, 1 << 20);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (int i = 0; i < 5; ++i) (*w)->Write({'i', "e" + std::to_string(i), "", uint64_t(i) * 1000, 0, 1, 1, nullptr});
  ASSERT_TRUE((*w)->Close().ok());
  const json j = ParseFile(path);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 5u);
  EXPECT_EQ(j[4]["name"], "e4");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a timeline names other users' jobs";
  std::remove(path.c_str());
}

TEST(ChromeTraceTest, NeverGrowsPastItsCapAndSaysHowManyEventsItDropped) {
  const std::string path = TempPath("capped.json");
  constexpr uint64_t kCap = 8192;
  Result<std::unique_ptr<Writer>> w = Writer::Create(path, kCap);
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 10000; ++i) {
    (*w)->Write({'X', "running", "job", uint64_t(i) * 1000, 500, 7, 1, {{"job", i}}});
  }
  const uint64_t dropped = (*w)->dropped();
  EXPECT_GT(dropped, 9000u);
  EXPECT_LE((*w)->bytes(), kCap);
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_LE(FileSize(path), kCap);
  const json j = ParseFile(path);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), 10000u - dropped + 1);
  EXPECT_EQ(j.back()["name"], "trace truncated");
  EXPECT_EQ(j.back()["args"]["dropped_events"], dropped);
  std::remove(path.c_str());
}

TEST(ChromeTraceTest, RefusesACapTooSmallForTheClosingNote) {
  EXPECT_FALSE(Writer::Create(TempPath("tiny.json"), 100).ok());
}

TEST(ChromeTraceTest, ReadsATraceWhoseWriterDiedBeforeClosingIt) {
  const std::string path = TempPath("unclosed.json");
  std::ofstream(path) << "[\n{\"ph\":\"i\",\"name\":\"a\",\"ts\":1,\"pid\":1,\"tid\":1},\n"
                         "{\"ph\":\"i\",\"name\":\"b\",\"ts\":2,\"pid\":1,\"tid\":1},\n";
  Result<std::vector<json>> events = ReadTraceEvents(path);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1]["name"], "b");
  std::ofstream(path) << "{\"not\": \"a trace\"}";
  EXPECT_FALSE(ReadTraceEvents(path).ok());
  std::remove(path.c_str());
}

TEST(ChromeTraceTest, MergePutsMetadataFirstThenEventsInTimeOrder) {
  const std::string a = TempPath("a.json"), b = TempPath("b.json"), out = TempPath("merged.json");
  {
    auto wa = Writer::Create(a, 1 << 20);
    auto wb = Writer::Create(b, 1 << 20);
    ASSERT_TRUE(wa.ok() && wb.ok());
    (*wa)->Write({'i', "late", "", 3000, 0, 1, 1, nullptr});
    (*wa)->Write({'i', "early", "", 1000, 0, 1, 1, nullptr});
    (*wb)->Write({'i', "middle", "", 2000, 0, 2, 1, nullptr});
    (*wb)->Write(ProcessName(2, "job b"));
  }  // closed by the destructors
  Status s = MergeTraceFiles({a, b, TempPath("missing.json")}, out, 1 << 20);
  EXPECT_FALSE(s.ok()) << "the missing input is named";
  EXPECT_NE(s.message().find("missing.json"), std::string::npos) << s.message();
  const json j = ParseFile(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["ph"], "M");
  EXPECT_EQ(j[1]["name"], "early");
  EXPECT_EQ(j[2]["name"], "middle");
  EXPECT_EQ(j[3]["name"], "late");
  for (const std::string& p : {a, b, out}) std::remove(p.c_str());
}

}  // namespace
}  // namespace msched::trace

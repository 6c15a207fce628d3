#include "profile/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace msched {
namespace {

class TraceFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = ::testing::TempDir() + "trace_" + std::to_string(getpid()) + ".jsonl";
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

TraceLaunch SampleLaunch() {
  TraceLaunch l;
  l.seq = 7;
  l.kernel = "_Z6kernelPfm";
  l.layout = {{0, 8}, {8, 4}};
  l.args = {{1, 2, 3, 4, 5, 6, 7, 8}, {0xff, 0, 0, 0x10}};
  l.dims.grid[0] = 3, l.dims.block[0] = 128, l.dims.block[1] = 2, l.dims.shared_mem = 64;
  l.touched = {{{0x1000, 0x1800}, AccessMode::kRead}, {{0x9000, 0x9004}, AccessMode::kReadWrite}};
  l.latency_ns = 1234;
  return l;
}

TEST_F(TraceFileTest, WrittenLinesReadBackEqual) {
  const TraceLaunch l = SampleLaunch();
  const std::string text = TraceHeaderLine("simulator", 1, "./app") + "\n" + TraceAllocLine(0x1000, 0x10000) + "\n" +
                           TraceNoteLine("hello") + "\n" + TraceLaunchLine(l) + "\n" + TraceFreeLine(0x1000) + "\n";
  TraceReadResult r = ReadTrace(Write(text));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.trace.source, "simulator");
  EXPECT_EQ(r.trace.precision, 1u);
  EXPECT_EQ(r.trace.notes, std::vector<std::string>{"hello"});
  ASSERT_EQ(r.trace.allocs.size(), 2u);
  EXPECT_TRUE(r.trace.allocs[0].alloc);
  EXPECT_EQ(r.trace.allocs[0].size, 0x10000u);
  EXPECT_FALSE(r.trace.allocs[1].alloc);
  ASSERT_EQ(r.trace.launches.size(), 1u);
  const TraceLaunch& got = r.trace.launches[0];
  EXPECT_EQ(got.seq, 7u);
  EXPECT_EQ(got.kernel, l.kernel);
  EXPECT_EQ(got.layout, l.layout);
  EXPECT_EQ(got.args, l.args);
  EXPECT_EQ(got.dims.grid[0], 3u);
  EXPECT_EQ(got.dims.block[1], 2u);
  EXPECT_EQ(got.dims.shared_mem, 64u);
  ASSERT_EQ(got.touched.size(), 2u);
  EXPECT_EQ(got.touched[1].range, (ByteRange{0x9000, 0x9004}));
  EXPECT_EQ(got.touched[1].mode, AccessMode::kReadWrite);
  EXPECT_EQ(got.latency_ns, 1234u);
  EXPECT_EQ(got.alloc_epoch, 1u);  // after the alloc, before the free
}

TEST_F(TraceFileTest, ALineCutShortByACrashIsSkippedAndTheRestKept) {
  const std::string launch = TraceLaunchLine(SampleLaunch());
  const std::string text = TraceHeaderLine("simulator", 1, "app") + "\n" + launch + "\n" + launch.substr(0, 40);
  TraceReadResult r = ReadTrace(Write(text));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.trace.launches.size(), 1u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(":3: not a JSON object"), std::string::npos) << r.problems[0];
}

TEST_F(TraceFileTest, MalformedRecordsAreNamedAndSkipped) {
  std::string bad_hex = TraceLaunchLine(SampleLaunch());
  bad_hex.replace(bad_hex.find("0102030405060708"), 16, "01020304050607zz");
  std::string empty_range = TraceLaunchLine(SampleLaunch());
  empty_range.replace(empty_range.find("[4096,6144,1]"), 13, "[6144,4096,1]");
  const std::string text = TraceHeaderLine("simulator", 1, "app") + "\n" + bad_hex + "\n" + empty_range + "\n" +
                           R"({"type":"alloc","base":-1,"size":5})"
                           "\n"
                           R"({"type":"wat"})"
                           "\n";
  TraceReadResult r = ReadTrace(Write(text));
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.trace.launches.empty());
  EXPECT_TRUE(r.trace.allocs.empty());
  ASSERT_EQ(r.problems.size(), 4u);
  EXPECT_NE(r.problems[0].find("argument 0 is not the hex"), std::string::npos) << r.problems[0];
  EXPECT_NE(r.problems[1].find("begin < end"), std::string::npos) << r.problems[1];
  EXPECT_NE(r.problems[2].find("'base' must be an unsigned integer"), std::string::npos) << r.problems[2];
  EXPECT_NE(r.problems[3].find("unknown record type 'wat'"), std::string::npos) << r.problems[3];
}

TEST_F(TraceFileTest, AFileThatIsNotATraceIsRefused) {
  EXPECT_EQ(ReadTrace(Write("{\"format\": \"msched-templates\"}\n")).status.code(), StatusCode::kCorruption);
  EXPECT_EQ(ReadTrace(Write("")).status.code(), StatusCode::kCorruption);
  const Status newer = ReadTrace(Write(R"({"type":"header","format":"msched-trace","version":99})"
                                       "\n"))
                           .status;
  EXPECT_EQ(newer.code(), StatusCode::kCorruption);
  EXPECT_NE(newer.message().find("version 99 is not supported"), std::string::npos) << newer.ToString();
}

TEST(TraceTest, AMissingFileIsAnIoError) {
  EXPECT_EQ(ReadTrace("/nonexistent/trace.jsonl").status.code(), StatusCode::kIoError);
}

// A trace path that is a device or a directory is refused at once, naming
// the path, rather than read forever or read as empty.
TEST(TraceTest, OnlyRegularFilesAreRead) {
  for (const std::string path : {"/dev/zero", "/dev/urandom", "/tmp"}) {
    const Status s = ReadTrace(path).status;
    EXPECT_EQ(s.code(), StatusCode::kIoError) << path;
    EXPECT_NE(s.message().find("cannot open trace " + path + ": "), std::string::npos) << s.ToString();
  }
}

// A record nested 100,000 deep is skipped as a problem without
// being parsed or quoted; the records around it still load.
TEST_F(TraceFileTest, ADeeplyNestedRecordIsSkippedUnparsed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const TraceReadResult r = ReadTrace(Write(TraceHeaderLine("simulator", 1, "prog") + "\n" +
                                            R"({"type":"note","text":)" + deep + "}\n" + TraceNoteLine("kept") + "\n"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(":2: JSON nested deeper than"), std::string::npos) << r.problems[0].substr(0, 200);
  EXPECT_LT(r.problems[0].size(), 300u);
  EXPECT_EQ(r.trace.notes, std::vector<std::string>{"kept"});
}

}  // namespace
}  // namespace msched

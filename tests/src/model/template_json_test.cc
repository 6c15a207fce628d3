#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "msched/templates.h"

namespace msched {
namespace {

constexpr const char* kGood = R"({
  "format": "msched-templates", "version": 1,
  "kernels": [
    {"name": "vector_add", "params": [[0,8],[8,8],[16,8],[24,4]], "latency_us": 12.5, "calls": 40,
     "regions": [
       {"base": "p0", "kind": "linear", "mode": "read", "extent": {"coef": 4, "factors": ["p3:u32"]}},
       {"base": "p1", "kind": "linear", "mode": "read", "extent": {"coef": 4, "factors": ["p3:u32"]}},
       {"base": "p2", "kind": "linear", "mode": "write", "extent": {"coef": 4, "factors": ["p3:u32"]}}]},
    {"name": "kv_read", "params": [[0,24],[24,8]],
     "regions": [
       {"base": "p0", "offset": 128, "kind": "fixed", "mode": "readwrite", "extent": 65536},
       {"base": "p0+8", "kind": "strided", "mode": "read",
        "count": {"factors": ["p1"]}, "stride": {"coef": 2, "factors": ["grid.x", "block.x"], "add": 64},
        "extent": {"add": 4096}, "list": {"slot": 1, "slot_of_block": "p0+16"}}]}
  ],
  "unpredictable": [{"name": "gather", "reason": "base read from memory"}]
})";

TEST(TemplateJsonTest, ParsesAllThreeKinds) {
  TemplateLoadResult r = ParseTemplates(kGood, "good.json");
  ASSERT_TRUE(r.problems.empty()) << r.problems[0].ToString();
  ASSERT_EQ(r.templates.kernels.size(), 2u);
  const KernelTemplate& va = r.templates.kernels[0];
  EXPECT_EQ(va.name, "vector_add");
  EXPECT_EQ(va.layout.size(), 4u);
  EXPECT_EQ(va.latency_us, 12.5);
  EXPECT_EQ(va.calls_seen, 40u);
  ASSERT_EQ(va.regions.size(), 3u);
  EXPECT_EQ(va.regions[0].kind, Region::Kind::kLinear);
  EXPECT_EQ(va.regions[0].extent.coef, 4);
  ASSERT_EQ(va.regions[0].extent.factors.size(), 1u);
  EXPECT_EQ(va.regions[0].extent.factors[0].arg, (ArgRef{3, 0, 4}));
  EXPECT_EQ(va.regions[2].mode, AccessMode::kWrite);
  const KernelTemplate& kv = r.templates.kernels[1];
  EXPECT_EQ(kv.regions[0].kind, Region::Kind::kFixed);
  EXPECT_EQ(kv.regions[0].base_offset, 128);
  EXPECT_EQ(kv.regions[0].extent, LinearExpr::Constant(65536));
  EXPECT_EQ(kv.regions[1].kind, Region::Kind::kStrided);
  EXPECT_EQ(kv.regions[1].base, (ArgRef{0, 8, 8}));
  EXPECT_EQ(kv.regions[1].extent, LinearExpr::Constant(4096));
  EXPECT_EQ(kv.regions[1].stride.factors[0].kind, Factor::Kind::kGridX);
  EXPECT_EQ(kv.regions[1].stride.add, 64);
  EXPECT_FALSE(kv.regions[0].list.has_value());
  EXPECT_EQ(kv.regions[1].list, (ListSlot{1, {0, 16, 8}}));
  ASSERT_EQ(r.templates.unpredictable.size(), 1u);
  EXPECT_EQ(r.templates.unpredictable[0].reason, "base read from memory");
}

TEST(TemplateJsonTest, SerializeRoundTrips) {
  TemplateLoadResult r = ParseTemplates(kGood, "good.json");
  const std::string text = SerializeTemplates(r.templates);
  TemplateLoadResult again = ParseTemplates(text, "again.json");
  ASSERT_TRUE(again.problems.empty()) << again.problems[0].ToString();
  EXPECT_EQ(again.templates.kernels, r.templates.kernels);
  EXPECT_EQ(again.templates.unpredictable, r.templates.unpredictable);
}

TEST(TemplateJsonTest, TruncatedFileIsOneProblem) {
  const std::string text(kGood);
  TemplateLoadResult r = ParseTemplates(text.substr(0, text.size() / 2), "cut.json");
  EXPECT_TRUE(r.templates.kernels.empty());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].ToString().find("cut.json"), std::string::npos);
}

// Each broken entry is reported with file, kernel and field; the others load.
struct BrokenCase {
  const char* name;  // the test's name
  const char* entry;
  const char* field;
};

class BrokenEntryTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenEntryTest, SkipsOnlyTheBrokenEntry) {
  const std::string text = std::string(R"({"format":"msched-templates","version":1,"kernels":[)") +
                           R"({"name":"ok1","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","extent":64}]},)" +
                           GetParam().entry + R"(,{"name":"ok2","params":[[0,8]],"regions":[]}]})";
  TemplateLoadResult r = ParseTemplates(text, "f.json");
  ASSERT_EQ(r.problems.size(), 1u) << text;
  EXPECT_EQ(r.problems[0].file, "f.json");
  EXPECT_EQ(r.problems[0].kernel, "bad");
  EXPECT_EQ(r.problems[0].field, GetParam().field) << r.problems[0].ToString();
  ASSERT_EQ(r.templates.kernels.size(), 2u);
  EXPECT_EQ(r.templates.kernels[0].name, "ok1");
  EXPECT_EQ(r.templates.kernels[1].name, "ok2");
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BrokenEntryTest,
    ::testing::Values(
        // wrong types
        BrokenCase{"ParamsNotArray", R"({"name":"bad","params":"x","regions":[]})", "params"},
        BrokenCase{"ParamSizeString", R"({"name":"bad","params":[[0,"8"]],"regions":[]})", "params[0].size"},
        BrokenCase{"RegionsNotArray", R"({"name":"bad","params":[[0,8]],"regions":{}})", "regions"},
        BrokenCase{"BaseNotString",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":7,"kind":"fixed","extent":1}]})",
                   "regions[0].base"},
        BrokenCase{"FractionalExtent",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","extent":1.5}]})",
                   "regions[0].extent"},
        BrokenCase{"UnknownKind",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"blob","extent":1}]})",
                   "regions[0].kind"},
        BrokenCase{"UnknownMode",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","mode":"rw","extent":1}]})",
                   "regions[0].mode"},
        // references outside the layout
        BrokenCase{"BaseParamMissing",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p1","kind":"fixed","extent":1}]})",
                   "regions[0].base"},
        BrokenCase{"BaseTooNarrow",
                   R"({"name":"bad","params":[[0,8],[8,4]],"regions":[{"base":"p1","kind":"fixed","extent":1}]})",
                   "regions[0].base"},
        BrokenCase{
            "FactorParamMissing",
            R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"linear","extent":{"factors":["p5"]}}]})",
            "regions[0].extent.factors[0]"},
        // absurd sizes and overflow-prone coefficients
        BrokenCase{
            "ExtentTooLarge",
            R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","extent":1000000000000000000000}]})",
            "regions[0].extent"},
        BrokenCase{"NegativeExtent",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","extent":-4}]})",
                   "regions[0].extent"},
        BrokenCase{
            "CoefOverflow",
            R"({"name":"bad","params":[[0,8],[8,8]],"regions":[{"base":"p0","kind":"linear","extent":{"coef":9223372036854775807,"factors":["p1"]}}]})",
            "regions[0].extent.coef"},
        BrokenCase{
            "ZeroDivisor",
            R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"linear","extent":{"coef":1,"div":0,"factors":["p0"]}}]})",
            "regions[0].extent.div"},
        BrokenCase{
            "TooManyFactors",
            R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"linear","extent":{"factors":["p0","p0","p0","p0","p0"]}}]})",
            "regions[0].extent.factors"},
        BrokenCase{"ParamTooLarge", R"({"name":"bad","params":[[0,99999]],"regions":[]})", "params[0].size"},
        // structure
        BrokenCase{"StridedWithoutCount",
                   R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"strided","extent":4}]})",
                   "regions[0].count"},
        BrokenCase{
            "FixedWithFactors",
            R"({"name":"bad","params":[[0,8]],"regions":[{"base":"p0","kind":"fixed","extent":{"factors":["p0"]}}]})",
            "regions[0].extent"},
        BrokenCase{
            "ListSlotPastAByte",
            R"({"name":"bad","params":[[0,24]],"regions":[{"base":"p0","kind":"fixed","extent":1,"list":{"slot":256,"slot_of_block":"p0+16"}}]})",
            "regions[0].list.slot"},
        BrokenCase{
            "ListArrayOutsideTheLayout",
            R"({"name":"bad","params":[[0,24]],"regions":[{"base":"p0","kind":"fixed","extent":1,"list":{"slot":1,"slot_of_block":"p0+24"}}]})",
            "regions[0].list.slot_of_block"},
        BrokenCase{
            "ListWithoutArray",
            R"({"name":"bad","params":[[0,24]],"regions":[{"base":"p0","kind":"fixed","extent":1,"list":{"slot":1}}]})",
            "regions[0].list.slot_of_block"},
        BrokenCase{"UnknownEntryVersion", R"({"name":"bad","version":7,"params":[[0,8]],"regions":[]})", "version"},
        BrokenCase{"NoParams", R"({"name":"bad","regions":[]})", "params"}),
    [](const ::testing::TestParamInfo<BrokenCase>& p) { return std::string(p.param.name); });

TEST(TemplateJsonTest, UnknownFileVersionStillLoadsEntriesThatDeclareAKnownOne) {
  const char* text = R"({"format":"msched-templates","version":99,"kernels":[
      {"name":"old","params":[[0,8]],"regions":[]},
      {"name":"new","version":1,"params":[[0,8]],"regions":[]}]})";
  TemplateLoadResult r = ParseTemplates(text, "v.json");
  ASSERT_EQ(r.templates.kernels.size(), 1u);
  EXPECT_EQ(r.templates.kernels[0].name, "new");
  ASSERT_EQ(r.problems.size(), 2u);  // the file version, and the entry that inherits it
  EXPECT_EQ(r.problems[0].field, "version");
  EXPECT_EQ(r.problems[1].kernel, "old");
}

TEST(TemplateJsonTest, WrongFormatAndTopLevelAreReported) {
  EXPECT_EQ(ParseTemplates("[]", "a").problems.size(), 1u);
  EXPECT_EQ(ParseTemplates(R"({"format":"other"})", "a").problems.size(), 1u);
  TemplateLoadResult r = ParseTemplates(R"({"format":"msched-templates","kernels":[{"params":[]}]})", "a");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].field, "name");
}

TEST(TemplateJsonTest, MissingFileIsOneProblem) {
  TemplateLoadResult r = LoadTemplatesFile("/nonexistent/dir/t.json");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].file, "/nonexistent/dir/t.json");
}

// A value nested 100,000 deep (200 KB) is refused before parsing: formatting
// the problem message for it would overflow the stack.
TEST(TemplateJsonTest, DeeplyNestedValuesAreOneProblemNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string text = R"({"format":"msched-templates","version":1,"kernels":[{"name":"k","params":[[0,8]],)"
                           R"("regions":[{"base":"p0","kind":"fixed","extent":)" +
                           deep + "}]}]}";
  const std::string path = testing::TempDir() + "deep_" + std::to_string(getpid()) + ".templates.json";
  std::ofstream(path) << text;
  for (const TemplateLoadResult& r : {ParseTemplates(text, "deep.json"), LoadTemplatesFile(path)}) {
    ASSERT_EQ(r.problems.size(), 1u);
    EXPECT_NE(r.problems[0].message.find("nested deeper than"), std::string::npos) << r.problems[0].ToString();
    EXPECT_LT(r.problems[0].ToString().size(), 300u) << "the offending text is not quoted";
    EXPECT_TRUE(r.templates.kernels.empty());
  }
  ::unlink(path.c_str());
}

// Only regular files are read: MSCHED_TEMPLATES=/dev/zero would be read
// forever, and a FIFO would block forever.
TEST(TemplateJsonTest, OnlyRegularFilesAreRead) {
  const std::string fifo = testing::TempDir() + "fifo_" + std::to_string(getpid()) + ".templates.json";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo, testing::TempDir()}) {
    const TemplateLoadResult r = LoadTemplatesFile(path);
    ASSERT_EQ(r.problems.size(), 1u) << path;
    EXPECT_EQ(r.problems[0].file, path);
    EXPECT_TRUE(r.problems[0].message.find("not a regular file") != std::string::npos ||
                r.problems[0].message.find("is a directory") != std::string::npos)
        << r.problems[0].ToString();
  }
  ::unlink(fifo.c_str());
}

TEST(FactorTest, ParsesTextForms) {
  EXPECT_EQ(ParseFactor("block.y")->kind, Factor::Kind::kBlockY);
  EXPECT_EQ(ParseFactor("p12+16:u32")->arg, (ArgRef{12, 16, 4}));
  EXPECT_FALSE(ParseFactor("q1").has_value());
  EXPECT_FALSE(ParseFactor("p1:u16").has_value());
  EXPECT_FALSE(ParseFactor("p99999").has_value());
  EXPECT_FALSE(ParseFactor("p1+").has_value());
  EXPECT_EQ(LinearExprToString({4, 1, {*ParseFactor("p3:u32")}, 64}), "4*p3:u32+64");
}

}  // namespace
}  // namespace msched

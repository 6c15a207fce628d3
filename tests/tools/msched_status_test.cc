// `msched status` against a live coordinator with a job: `--json` carries
// exactly the fields, of the types, that docs/operate.md documents, and the
// table fits $COLUMNS, or shows every column when written to a file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "run_program.h"

namespace {

namespace ts = msched::testsupport;
using nlohmann::json;

constexpr uint64_t kHbm = 64ull << 20;

// field ("coordinator.pid", "jobs[].id") -> type, from the table in docs/operate.md.
std::map<std::string, std::string> DocumentedFields() {
  std::map<std::string, std::string> fields;
  std::ifstream doc(DOCS_DIR "/operate.md");
  const std::regex row(R"(^\| `((coordinator|jobs\[\])\.[a-z_]+)` \| ([a-z ]+) \|)");
  std::smatch m;
  for (std::string line; std::getline(doc, line);) {
    if (std::regex_search(line, m, row)) fields[m[1]] = m[3];
  }
  return fields;
}

bool OfType(const json& v, const std::string& type) {
  if (type == "integer") return v.is_number_integer();
  if (type == "integer or null") return v.is_number_integer() || v.is_null();
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  return false;
}

class MschedStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "status_" + std::to_string(getpid());
    ::mkdir(dir_.c_str(), 0700);
    device_ = "status" + std::to_string(getpid());
    auto d = msched::Subprocess::Spawn(
        {MSCHEDD, "--socket", Socket(), "--gpu-memory", std::to_string(kHbm), "--log", dir_ + "/mschedd.log"});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_.emplace(std::move(*d));
    // A job long enough to be live while the tests ask.
    msched::SpawnOptions o;
    o.env = {{"LD_LIBRARY_PATH", SIM_LIB_DIR},         {"LD_PRELOAD", LIBMSCHED},   {"MSIM_DEVICE", device_},
             {"MSIM_HBM_BYTES", std::to_string(kHbm)}, {"MSCHED_SOCKET", Socket()}, {"MSCHED_COORD", "required"},
             {"MSCHED_JOB_NAME", "status-job"},        {"MSCHED_MEM", "16MiB"}};
    o.stdout_path = o.stderr_path = dir_ + "/job.out";
    auto j = msched::Subprocess::Spawn(
        {MSIM_RUN, WORKLOADS_DIR "/micro_vadd.json", "--set", "FOOT=8388608", "--set", "TASKS=1000000"}, o);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    job_.emplace(std::move(*j));
    for (int i = 0; i < 600 && !HasJob(Json()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(HasJob(Json())) << "the job never showed; its output:\n" << ts::Slurp(dir_ + "/job.out");
  }
  void TearDown() override {
    if (job_) job_->Kill(SIGKILL), job_->Wait();
    if (daemon_) daemon_->Kill(SIGTERM), daemon_->Wait();
    ::unlink(("/dev/shm/msim-" + device_).c_str());
  }

  std::string Socket() const { return dir_ + "/gpu0.sock"; }
  ts::ProgramRun Status(std::map<std::string, std::string> env, bool as_json = false) {
    std::vector<std::string> argv = {MSCHED_CLI, "--socket", Socket(), "status"};
    if (as_json) argv.push_back("--json");
    return ts::RunProgram(argv, env);
  }
  json Json() { return json::parse(Status({}, true).out, nullptr, false); }
  static bool HasJob(const json& s) { return s.is_object() && s["jobs"].is_array() && !s["jobs"].empty(); }

  std::string dir_, device_;
  std::optional<msched::Subprocess> daemon_, job_;
};

TEST_F(MschedStatusTest, JsonHasExactlyTheDocumentedFieldsOfTheDocumentedTypes) {
  const std::map<std::string, std::string> documented = DocumentedFields();
  ASSERT_GT(documented.size(), 20u) << "the field table in docs/operate.md was not found";
  const json s = Json();
  ASSERT_TRUE(HasJob(s));
  std::map<std::string, const json*> seen;
  for (const auto& [key, value] : s["coordinator"].items()) seen["coordinator." + key] = &value;
  for (const auto& [key, value] : s["jobs"][0].items()) seen["jobs[]." + key] = &value;
  for (const auto& [field, value] : seen) {
    const auto doc = documented.find(field);
    if (doc == documented.end()) {
      ADD_FAILURE() << field << " is sent but not documented in docs/operate.md";
      continue;
    }
    EXPECT_TRUE(OfType(*value, doc->second)) << field << " is " << value->dump() << ", documented as " << doc->second;
  }
  for (const auto& [field, type] : documented) {
    EXPECT_TRUE(seen.count(field)) << field << " is documented but not sent";
  }
  EXPECT_EQ(s.size(), 2u) << "top level: coordinator and jobs";
}

TEST_F(MschedStatusTest, TheTableFitsColumnsAndAFileGetsEveryColumn) {
  const ts::ProgramRun narrow = Status({{"COLUMNS", "50"}});
  ASSERT_EQ(narrow.status, 0) << narrow.err;
  std::istringstream lines(narrow.out);
  bool header = false, row = false;
  for (std::string line; std::getline(lines, line);) {
    size_t columns = 0;  // one per UTF-8 code point
    for (char c : line) columns += (c & 0xC0) != 0x80;
    EXPECT_LE(columns, 50u) << "'" << line << "'";
    header = header || line.rfind("JOB", 0) == 0;
    row = row || line.find("status-job") != std::string::npos;
  }
  EXPECT_TRUE(header && row) << narrow.out;
  const ts::ProgramRun file = Status({{"COLUMNS", ""}});  // stdout is a file, and no $COLUMNS
  ASSERT_EQ(file.status, 0) << file.err;
  // 50 columns keep what shows who holds the GPU, why the others wait and
  // since when, and how much it holds.
  for (const char* column : {"STATE", "WHY", "WAITED", "RESIDENT"}) {
    EXPECT_NE(file.out.find(column), std::string::npos) << column << "\n" << file.out;
    EXPECT_NE(narrow.out.find(column), std::string::npos) << column << " in 50 columns\n" << narrow.out;
  }
  for (const char* column :
       {"USER", "PID", "SLICES", "CLASS", "PRIO", "DECLARED", "ALLOCATED", "WORKSET", "BUDGET", "SWAPS"}) {
    EXPECT_NE(file.out.find(column), std::string::npos) << column << "\n" << file.out;
    EXPECT_EQ(narrow.out.find(column), std::string::npos) << column << " in 50 columns\n" << narrow.out;
  }
  EXPECT_NE(file.out.find("16.0 MiB"), std::string::npos) << "the declared memory\n" << file.out;
  EXPECT_NE(file.out.find("running"), std::string::npos) << "alone, it holds the GPU\n" << file.out;
}

}  // namespace

// Belady's minimum (bench/suite/belady.h): exact on small hand-made access
// logs, and a floor under what real runs move: a job's demand-paged and
// msched runs on the simulator, logged by MSIM_ACCESS_LOG, both move at
// least it, and nothing is owed when the job fits.
#include "suite/belady.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "msim/access_log.h"
#include "run_program.h"

namespace {

namespace b = msched::bench;
namespace al = msim::access_log;
namespace ts = msched::testsupport;

constexpr uint64_t kUnit = al::kUnitBytes;

// Writes an access log: each operation a list of unit addresses (one unit
// each), a free as {0, begin, end}.
class LogWriter {
 public:
  explicit LogWriter(const std::string& path) : out_(path, std::ios::binary) { out_.write(al::kMagic, 8); }
  LogWriter& Op(const std::vector<uint64_t>& unit_addresses) {
    out_.put(al::kOperation);
    const uint32_t n = static_cast<uint32_t>(unit_addresses.size());
    out_.write(reinterpret_cast<const char*>(&n), 4);
    for (uint64_t a : unit_addresses) {
      const uint64_t block = a / (kUnit * al::kUnitsPerBlock) * (kUnit * al::kUnitsPerBlock);
      const uint32_t mask = 1u << ((a - block) / kUnit);
      out_.write(reinterpret_cast<const char*>(&block), 8);
      out_.write(reinterpret_cast<const char*>(&mask), 4);
    }
    return *this;
  }
  LogWriter& Free(uint64_t begin, uint64_t end) {
    out_.put(al::kFree);
    out_.write(reinterpret_cast<const char*>(&begin), 8);
    out_.write(reinterpret_cast<const char*>(&end), 8);
    return *this;
  }

 private:
  std::ofstream out_;
};

std::string LogPath(const std::string& name) {
  return testing::TempDir() + "belady_" + name + "_" + std::to_string(getpid()) + ".log";
}

constexpr uint64_t A = 0, B = kUnit, C = 2 * kUnit;

TEST(BeladyTest, EvictsWhatIsNeededFurthestAheadAndFirstTouchesAreFree) {
  const std::string path = LogPath("cyclic");
  LogWriter(path).Op({A}).Op({B}).Op({C}).Op({A}).Op({B}).Op({C});
  // Room for two: A B C are first touches; OPT keeps A and B (needed next),
  // lets C go, and misses only C's second use. LRU would miss all three.
  const auto two = b::BeladyMinimum(path, 2 * kUnit, 2 * kUnit);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->h2d_bytes, kUnit);
  EXPECT_EQ(two->accesses, 6u);
  EXPECT_EQ(two->units, 3u);
  EXPECT_EQ(b::BeladyMinimum(path, 3 * kUnit, 3 * kUnit)->h2d_bytes, 0u) << "everything fits";
  EXPECT_EQ(b::BeladyMinimum(path, 1 * kUnit, 1 * kUnit)->h2d_bytes, 2 * kUnit)
      << "room for one: two of the three second uses miss";
}

TEST(BeladyTest, FreedMemoryAllocatedAgainIsNewMemory) {
  // Room for one unit, A and B each used twice: one second use must miss.
  const std::string kept = LogPath("kept");
  LogWriter(kept).Op({A}).Op({B}).Op({A}).Op({B});
  EXPECT_EQ(b::BeladyMinimum(kept, kUnit, kUnit)->h2d_bytes, kUnit);
  // A freed in between: its second use is a first touch of new memory, and
  // B can stay.
  const std::string freed = LogPath("freed");
  LogWriter(freed).Op({A}).Op({B}).Free(A, A + kUnit).Op({A}).Op({B});
  EXPECT_EQ(b::BeladyMinimum(freed, kUnit, kUnit)->h2d_bytes, 0u);
}

TEST(BeladyTest, AnOperationsUnitsAreResidentTogether) {
  const std::string path = LogPath("together");
  LogWriter(path).Op({A, B}).Op({C}).Op({A, B}).Op({C});
  // Room for two. Unit by unit, C's first touch can pass through and only
  // C's second use misses. Operation by operation, C needs a slot while it
  // runs: B (needed after A) goes, then B misses, and C, evicted for it,
  // misses too.
  const auto two = b::BeladyMinimum(path, 2 * kUnit, 2 * kUnit);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->h2d_bytes, kUnit);
  EXPECT_EQ(two->whole_operation_h2d_bytes, 2 * kUnit);
  EXPECT_EQ(b::BeladyMinimum(path, 2 * kUnit, 3 * kUnit)->whole_operation_budget_h2d_bytes, 0u)
      << "the budget is a capacity of its own";
  EXPECT_EQ(b::BeladyMinimum(path, 2 * kUnit, 2 * kUnit)->whole_operation_budget_h2d_bytes, 2 * kUnit);
  // An operation larger than the capacity cannot be resident whole (such a
  // kernel faults in any policy): its own units compete with the rest, the
  // one needed furthest ahead going first. Here C goes, and A and B stay for
  // the operations that follow; evicting the nearest use would miss twice.
  const std::string big = LogPath("big");
  LogWriter(big).Op({A, B, C}).Op({A}).Op({B}).Op({C});
  const auto over = b::BeladyMinimum(big, 2 * kUnit, 2 * kUnit);
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_EQ(over->h2d_bytes, kUnit);
  EXPECT_EQ(over->whole_operation_h2d_bytes, kUnit);
}

TEST(BeladyTest, AMalformedLogIsAnErrorSayingWhere) {
  const std::string path = LogPath("bad");
  std::ofstream(path, std::ios::binary) << "not a log";
  EXPECT_NE(b::BeladyMinimum(path, kUnit, kUnit).status().message().find("not an msim access log"), std::string::npos);
  LogWriter(path).Op({A});
  std::ofstream(path, std::ios::binary | std::ios::app).put(al::kOperation);  // a record cut short
  EXPECT_NE(b::BeladyMinimum(path, kUnit, kUnit).status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(b::BeladyMinimum(LogPath("missing"), kUnit, kUnit).ok());
}

// A vector add over 48 MiB on a 32 MiB GPU, demand-paged and under msched:
// each moves at least Belady's minimum for the accesses it logged.
TEST(BeladyTest, NoRealRunMovesLessThanTheMinimum) {
  constexpr uint64_t kHbm = 32ull << 20, kFoot = 48ull << 20;
  for (const char* mode : {"um", "msched"}) {
    const std::string log = LogPath(mode), stats = LogPath(std::string(mode) + "_stats");
    const std::string device = std::string("belady") + mode + std::to_string(getpid());
    const ts::ProgramRun r =
        ts::RunProgram({MSIM_RUN, std::string(WORKLOADS_DIR) + "/micro_vadd.json", "--set",
                        "FOOT=" + std::to_string(kFoot), "--set", "TASKS=4", "--set", "INIT=0", "--no-checksum"},
                       {{"LD_LIBRARY_PATH", SIM_LIB_DIR},
                        {"LD_PRELOAD", LIBMSCHED},
                        {"MSCHED_MODE", mode},
                        {"MSCHED_COORD", "off"},
                        {"MSCHED_TEMPLATES", std::string(WORKLOADS_DIR) + "/kernels"},
                        {"MSIM_DEVICE", device},
                        {"MSIM_HBM_BYTES", std::to_string(kHbm)},
                        {"MSIM_HOST_KERNELS", "off"},
                        {"MSIM_ACCESS_LOG", log},
                        {"MSIM_STATS", stats}});
    ::unlink(("/dev/shm/msim-" + device).c_str());
    ASSERT_EQ(r.status, 0) << r.err;
    std::ifstream in(stats);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(j.is_object()) << stats;
    const uint64_t moved = ts::JsonU64(j, {"bytes", "h2d", "fault"}) + ts::JsonU64(j, {"bytes", "h2d", "prefetch"});
    const auto bound = b::BeladyMinimum(log, kHbm, kHbm);
    ASSERT_TRUE(bound.ok()) << bound.status().ToString();
    EXPECT_GT(bound->h2d_bytes, 0u) << mode << ": 48 MiB swept on 32 MiB must move something";
    EXPECT_GE(moved, bound->h2d_bytes) << mode;
    EXPECT_EQ(b::BeladyMinimum(log, kFoot, kFoot)->h2d_bytes, 0u) << mode << ": nothing is owed when the job fits";
    std::printf("%-7s moved %8.1f MB, Belady's minimum %8.1f MB\n", mode, moved / 1e6, bound->h2d_bytes / 1e6);
  }
}

}  // namespace

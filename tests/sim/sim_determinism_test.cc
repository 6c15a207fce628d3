// Processes sharing a simulated device interleave in virtual-time order with
// a stable tie-break (MSIM_RANK), so a multi-process run gives the same
// virtual times whatever the host's load: the same thrashing scenario run
// on an idle host and under competing CPU load must end at identical times,
// and so must runs repeated back to back.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "msim_run_jobs.h"

namespace {

using msim_test::Job;

// Three LLM decoders and a vector-add at about 190% of a 16 GiB device,
// under demand paging: every step evicts another process's memory, so any
// change in the order of their calls changes every process's time.
std::vector<Job> ThrashingJobs() {
  const std::string llm_foot = "FOOT=" + std::to_string((uint64_t{8} << 30) & ~0xffffull);
  const Job llama{"llm_decode.json", {llm_foot, "LAYERS=32", "KVDIM=128", "STEPS=4", "COLS=4096", "MAXCTX=1024"}};
  const Job vadd{"micro_vadd.json", {"FOOT=" + std::to_string(uint64_t{6} << 30), "TASKS=6"}};
  return {llama, vadd, llama, llama};
}

TEST(SimDeterminismTest, AThrashingRunGivesTheSameTimesUnderHostLoad) {
  const std::vector<uint64_t> quiet = msim_test::RunJobs(ThrashingJobs(), true, "quiet");
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i) {
    load.emplace_back([&stop] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  const std::vector<uint64_t> loaded = msim_test::RunJobs(ThrashingJobs(), true, "loaded");
  stop = true;
  for (std::thread& t : load) t.join();
  ASSERT_EQ(quiet.size(), 4u);
  EXPECT_GT(quiet[0], 0u);
  EXPECT_EQ(quiet, loaded);
}

// The benchmark's micro jobs at 150% of a 64 MiB device under demand
// paging: two vector-adds and two products of 32x32 matrices (thousands of
// short launches), 24 MiB each, which end at different times. A process that ends frees its memory at its end on the
// virtual clock, not when it gets there in real time: freed early, peers
// behind it on the clock found HBM free and evicted less, in one run of
// three or so.
TEST(SimDeterminismTest, JobsThatEndAtDifferentTimesRepeatExactly) {
  const std::string foot = "FOOT=" + std::to_string(uint64_t{24} << 20);
  const Job vadd{"micro_vadd.json", {foot, "TASKS=6"}};
  const Job matmul{"micro_matmul.json", {foot, "TASKS=6", "DIM=32"}};
  const std::vector<Job> jobs = {vadd, vadd, matmul, matmul};
  const std::vector<uint64_t> first = msim_test::RunJobs(jobs, true, "micro0", uint64_t{64} << 20, /*compute=*/true);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_NE(first[0], first[2]) << "the jobs end at different times";
  for (int run = 1; run < 8; ++run) {
    EXPECT_EQ(msim_test::RunJobs(jobs, true, "micro" + std::to_string(run), uint64_t{64} << 20, true), first)
        << "run " << run;
  }
}

}  // namespace

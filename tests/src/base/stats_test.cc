#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/stats.h"

namespace msched {
namespace {

TEST(HistogramTest, PercentilesAreWithinBucketPrecision) {
  Histogram h;
  for (uint64_t v = 1; v <= 1000; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_EQ(h.max(), 1000u);
  EXPECT_NEAR(h.mean(), 500.5, 1e-9);
  const uint64_t p50 = h.Percentile(50);
  EXPECT_GE(p50, 500u);
  EXPECT_LE(p50, 500u * 1.25);
  const uint64_t p99 = h.Percentile(99);
  EXPECT_GE(p99, 990u);
  EXPECT_LE(p99, 1000u);
}

TEST(HistogramTest, EmptyAndHugeValues) {
  Histogram h;
  EXPECT_EQ(h.Percentile(50), 0u);
  h.Record(UINT64_MAX);
  h.Record(0);
  EXPECT_EQ(h.max(), UINT64_MAX);
  EXPECT_EQ(h.Percentile(100), UINT64_MAX);
}

TEST(StatsRegistryTest, CountersAreSharedByNameAndThreadSafe) {
  StatsRegistry r;
  Counter* c = r.GetCounter("launches.total");
  EXPECT_EQ(r.GetCounter("launches.total"), c);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([c] {
      for (int i = 0; i < 10000; ++i) c->Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.CounterValue("launches.total"), 40000u);
  c->Max(5);
  EXPECT_EQ(c->value(), 40000u);
  c->Max(50000);
  EXPECT_EQ(c->value(), 50000u);
}

TEST(StatsRegistryTest, JsonNestsDottedNames) {
  StatsRegistry r;
  r.GetCounter("launches.total")->Add(3);
  r.GetCounter("launches.predicted")->Add(2);
  r.GetCounter("allocations")->Add(1);
  r.GetHistogram("hook.latency_ns")->Record(100);
  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["launches"]["total"], 3);
  EXPECT_EQ(j["launches"]["predicted"], 2);
  EXPECT_EQ(j["allocations"], 1);
  EXPECT_EQ(j["hook"]["latency_ns"]["count"], 1);
  EXPECT_TRUE(j["hook"]["latency_ns"].contains("p99"));
}

}  // namespace
}  // namespace msched

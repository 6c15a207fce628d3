// File: src/base/stats.h
// Counters and latency histograms that any component registers once and
// updates from hot paths without locks, exported together as JSON.
// Thread-safe: Counter and Histogram updates are lock-free atomics;
// registration takes a mutex and is meant for start-up.
// Included by src/, hook/ and the programs.
//
// Example:
//   StatsRegistry stats;
//   Counter* launches = stats.GetCounter("launches.total");
//   launches->Add();
//   std::string json = stats.ToJson();  // {"launches": {"total": 1}}
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace msched {

class Counter {
 public:
  void Add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  void Set(uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  // Raises the value to at least v (for peaks).
  void Max(uint64_t v);
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Log-linear histogram of non-negative values (nanoseconds, bytes): four
// buckets per power of two, so percentiles are within 19% of the truth.
class Histogram {
 public:
  void Record(uint64_t value);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t max() const { return max_.load(std::memory_order_relaxed); }
  double mean() const;
  // The upper bound of the bucket holding the p-th percentile (0 < p <= 100); 0 when empty.
  uint64_t Percentile(double p) const;

 private:
  static constexpr int kSubBuckets = 4;
  static constexpr int kBuckets = 64 * kSubBuckets;
  static int BucketOf(uint64_t v);
  static uint64_t BucketUpperBound(int b);

  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
};

// Named counters and histograms. Pointers returned stay valid for the
// registry's lifetime. Dotted names nest in the JSON output.
class StatsRegistry {
 public:
  StatsRegistry() = default;
  StatsRegistry(const StatsRegistry&) = delete;
  StatsRegistry& operator=(const StatsRegistry&) = delete;

  Counter* GetCounter(std::string_view name) MSCHED_EXCLUDES(mu_);
  Histogram* GetHistogram(std::string_view name) MSCHED_EXCLUDES(mu_);
  // Counters as numbers; histograms as {count, mean, p50, p99, max}.
  std::string ToJson() const MSCHED_EXCLUDES(mu_);
  uint64_t CounterValue(std::string_view name) const MSCHED_EXCLUDES(mu_);  // 0 if unregistered

 private:
  mutable Mutex mu_;
  std::deque<Counter> counter_storage_ MSCHED_GUARDED_BY(mu_);
  std::deque<Histogram> histogram_storage_ MSCHED_GUARDED_BY(mu_);
  std::map<std::string, Counter*, std::less<>> counters_ MSCHED_GUARDED_BY(mu_);
  std::map<std::string, Histogram*, std::less<>> histograms_ MSCHED_GUARDED_BY(mu_);
};

}  // namespace msched

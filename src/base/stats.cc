#include "base/stats.h"

#include <bit>

#include <nlohmann/json.hpp>

#include "base/atomic_max.h"

namespace msched {

void Counter::Max(uint64_t v) { RaiseAtLeast(v_, v, std::memory_order_relaxed); }

// Values below 4 get their own bucket; above, bucket = 4 * (log2 v - 1) + the
// next two bits below the top bit.
int Histogram::BucketOf(uint64_t v) {
  if (v < kSubBuckets) return static_cast<int>(v);
  const int top = 63 - std::countl_zero(v);
  const int sub = static_cast<int>((v >> (top - 2)) & (kSubBuckets - 1));
  const int b = (top - 1) * kSubBuckets + sub;
  return b < kBuckets ? b : kBuckets - 1;
}

uint64_t Histogram::BucketUpperBound(int b) {
  if (b < kSubBuckets) return static_cast<uint64_t>(b);
  const int top = b / kSubBuckets + 1;
  const uint64_t sub = static_cast<uint64_t>(b % kSubBuckets);
  if (top >= 63) return UINT64_MAX;
  const uint64_t lower = (uint64_t{1} << top) | (sub << (top - 2));
  return lower + (uint64_t{1} << (top - 2)) - 1;
}

void Histogram::Record(uint64_t value) {
  buckets_[BucketOf(value)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  RaiseAtLeast(max_, value, std::memory_order_relaxed);
}

double Histogram::mean() const {
  const uint64_t n = count();
  return n == 0 ? 0.0 : static_cast<double>(sum_.load(std::memory_order_relaxed)) / static_cast<double>(n);
}

uint64_t Histogram::Percentile(double p) const {
  const uint64_t n = count();
  if (n == 0) return 0;
  const double target = p / 100.0 * static_cast<double>(n);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[b].load(std::memory_order_relaxed);
    if (static_cast<double>(seen) >= target && seen > 0) {
      const uint64_t bound = BucketUpperBound(b);
      return bound < max() ? bound : max();
    }
  }
  return max();
}

Counter* StatsRegistry::GetCounter(std::string_view name) {
  MutexLock lock(&mu_);
  auto it = counters_.find(name);
  if (it != counters_.end()) return it->second;
  Counter* c = &counter_storage_.emplace_back();
  counters_.emplace(std::string(name), c);
  return c;
}

Histogram* StatsRegistry::GetHistogram(std::string_view name) {
  MutexLock lock(&mu_);
  auto it = histograms_.find(name);
  if (it != histograms_.end()) return it->second;
  Histogram* h = &histogram_storage_.emplace_back();
  histograms_.emplace(std::string(name), h);
  return h;
}

uint64_t StatsRegistry::CounterValue(std::string_view name) const {
  MutexLock lock(&mu_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second->value();
}

namespace {

// Places `value` at the dotted path `name` inside `root`.
void Put(nlohmann::json& root, const std::string& name, nlohmann::json value) {
  nlohmann::json* node = &root;
  size_t start = 0;
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
    nlohmann::json& child = (*node)[name.substr(start, dot - start)];
    if (!child.is_object()) child = nlohmann::json::object();
    node = &child;
    start = dot + 1;
  }
  (*node)[name.substr(start)] = std::move(value);
}

}  // namespace

std::string StatsRegistry::ToJson() const {
  MutexLock lock(&mu_);
  nlohmann::json root = nlohmann::json::object();
  for (const auto& [name, c] : counters_) Put(root, name, c->value());
  for (const auto& [name, h] : histograms_) {
    Put(root, name,
        {{"count", h->count()},
         {"mean", h->mean()},
         {"p50", h->Percentile(50)},
         {"p99", h->Percentile(99)},
         {"max", h->max()}});
  }
  return root.dump(2) + "\n";
}

}  // namespace msched

#include "coord/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Whether `line` is one of `lines`, whole.
bool Has(const std::vector<std::string>& lines, const std::string& line) {
  for (const std::string& l : lines) {
    if (l == line) return true;
  }
  return false;
}

// A snapshot with every figure set, and two jobs, one of them with a name
// that needs escaping.
MetricsSnapshot Known() {
  MetricsSnapshot s;
  s.version = "1.2.3";
  s.start_time_seconds = 1700000000.5;
  s.hbm_bytes = 16 * kGiB;
  s.link_bytes_per_second = 25e9;
  s.jobs_waiting = 1, s.jobs_running = 2, s.jobs_paused = 0;
  s.jobs_submitted = 4;
  s.admissions = 3;
  s.admission_wait_ns = 1'500'000'000;
  s.groups = 2;
  s.switches = 7;
  s.swap_in_bytes = 1000, s.swap_out_bytes = 2000;
  s.faults = 5;
  s.prefetched_bytes = 4096;
  // Binary fractions, so that the sum is exact; 0.5 lies on a bound, which
  // counts it (le: less than or equal).
  for (double v : {0.001953125, 0.0078125, 0.5, 4.0, 4096.0}) s.slice_seconds.Observe(v);
  JobMetrics a;
  a.id = 3, a.uid = 1000, a.name = "we\"ird\\name\nx";
  a.declared_bytes = 8 * kGiB, a.allocated_bytes = 6 * kGiB, a.resident_bytes = 5 * kGiB, a.budget_bytes = 12 * kGiB;
  a.waited_ns = 250'000'000, a.on_gpu = true, a.faults = 2, a.prefetched_bytes = 1024;
  a.peak_over_budget_bytes = 3 << 20;
  a.shared_bytes = 2 << 20;
  JobMetrics b;
  b.id = 5, b.uid = 0, b.name = "plain";
  b.waited_ns = 2'000'000'000;
  s.jobs = {a, b};
  return s;
}

TEST(MetricsTest, AKnownSnapshotRendersExactly) {
  const std::vector<std::string> lines = Lines(RenderPrometheus(Known()));
  for (const char* line : {
           "# HELP msched_build_info The msched version of this coordinator; always 1.",
           "# TYPE msched_build_info gauge",
           "msched_build_info{version=\"1.2.3\"} 1",
           "msched_start_time_seconds 1700000000.5",
           "msched_gpu_memory_bytes 17179869184",
           "msched_link_bytes_per_second 2.5e+10",
           "# TYPE msched_jobs gauge",
           "msched_jobs{state=\"waiting\"} 1",
           "msched_jobs{state=\"running\"} 2",
           "msched_jobs{state=\"paused\"} 0",
           "# TYPE msched_jobs_submitted_total counter",
           "msched_jobs_submitted_total 4",
           "msched_admissions_total 3",
           "msched_admission_wait_seconds_total 1.5",
           "msched_groups 2",
           "# TYPE msched_switches_total counter",
           "msched_switches_total 7",
           "# TYPE msched_swap_bytes_total counter",
           "msched_swap_bytes_total{direction=\"in\"} 1000",
           "msched_swap_bytes_total{direction=\"out\"} 2000",
           "msched_faults_total 5",
           "msched_prefetched_bytes_total 4096",
           "# TYPE msched_job_resident_bytes gauge",
           "msched_job_declared_bytes{job_id=\"3\",uid=\"1000\"} 8589934592",
           "msched_job_allocated_bytes{job_id=\"3\",uid=\"1000\"} 6442450944",
           "msched_job_resident_bytes{job_id=\"3\",uid=\"1000\"} 5368709120",
           "msched_job_budget_bytes{job_id=\"3\",uid=\"1000\"} 12884901888",
           "msched_job_peak_over_budget_bytes{job_id=\"3\",uid=\"1000\"} 3145728",
           "msched_job_peak_over_budget_bytes{job_id=\"5\",uid=\"0\"} 0",
           "msched_job_shared_bytes{job_id=\"3\",uid=\"1000\"} 2097152",
           "msched_job_shared_bytes{job_id=\"5\",uid=\"0\"} 0",
           "msched_job_waited_seconds{job_id=\"3\",uid=\"1000\"} 0.25",
           "msched_job_on_gpu{job_id=\"3\",uid=\"1000\"} 1",
           "# TYPE msched_job_faults_total counter",
           "msched_job_faults_total{job_id=\"3\",uid=\"1000\"} 2",
           "msched_job_prefetched_bytes_total{job_id=\"3\",uid=\"1000\"} 1024",
           "msched_job_resident_bytes{job_id=\"5\",uid=\"0\"} 0",
           "msched_job_waited_seconds{job_id=\"5\",uid=\"0\"} 2",
           "msched_job_on_gpu{job_id=\"5\",uid=\"0\"} 0",
       }) {
    EXPECT_TRUE(Has(lines, line)) << "missing: " << line;
  }
}

TEST(MetricsTest, TheSliceHistogramIsCumulativeWithInfSumAndCount) {
  const std::vector<std::string> lines = Lines(RenderPrometheus(Known()));
  std::vector<std::string> histogram;
  for (const std::string& l : lines) {
    if (l.rfind("msched_slice_seconds", 0) == 0) histogram.push_back(l);
  }
  const std::vector<std::string> expected = {
      "msched_slice_seconds_bucket{le=\"0.005\"} 1", "msched_slice_seconds_bucket{le=\"0.01\"} 2",
      "msched_slice_seconds_bucket{le=\"0.02\"} 2",  "msched_slice_seconds_bucket{le=\"0.05\"} 2",
      "msched_slice_seconds_bucket{le=\"0.1\"} 2",   "msched_slice_seconds_bucket{le=\"0.2\"} 2",
      "msched_slice_seconds_bucket{le=\"0.5\"} 3",   "msched_slice_seconds_bucket{le=\"1\"} 3",
      "msched_slice_seconds_bucket{le=\"2\"} 3",     "msched_slice_seconds_bucket{le=\"5\"} 4",
      "msched_slice_seconds_bucket{le=\"10\"} 4",    "msched_slice_seconds_bucket{le=\"30\"} 4",
      "msched_slice_seconds_bucket{le=\"60\"} 4",    "msched_slice_seconds_bucket{le=\"300\"} 4",
      "msched_slice_seconds_bucket{le=\"3600\"} 4",  "msched_slice_seconds_bucket{le=\"+Inf\"} 5",
      "msched_slice_seconds_sum 4100.509765625",     "msched_slice_seconds_count 5",
  };
  EXPECT_EQ(histogram, expected);
  EXPECT_TRUE(Has(lines, "# TYPE msched_slice_seconds histogram"));
  const MetricsHistogram empty(SliceSecondsBounds());
  MetricsSnapshot none;
  const std::vector<std::string> zero = Lines(RenderPrometheus(none));
  EXPECT_TRUE(Has(zero, "msched_slice_seconds_bucket{le=\"+Inf\"} 0"));
  EXPECT_TRUE(Has(zero, "msched_slice_seconds_sum 0"));
  EXPECT_TRUE(Has(zero, "msched_slice_seconds_count 0"));
  EXPECT_EQ(empty.counts.size(), empty.bounds.size() + 1);
}

TEST(MetricsTest, NamesAreLabelsOnlyWhenPublishedAndAreEscaped) {
  MetricsSnapshot s = Known();
  const std::string hidden = RenderPrometheus(s);
  EXPECT_EQ(hidden.find("name="), std::string::npos) << hidden;
  EXPECT_EQ(hidden.find("plain"), std::string::npos);
  s.job_names = true;
  const std::vector<std::string> lines = Lines(RenderPrometheus(s));
  EXPECT_TRUE(
      Has(lines, "msched_job_resident_bytes{job_id=\"3\",uid=\"1000\",name=\"we\\\"ird\\\\name\\nx\"} 5368709120"));
  EXPECT_TRUE(Has(lines, "msched_job_on_gpu{job_id=\"5\",uid=\"0\",name=\"plain\"} 0"));
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("caf\xc3\xa9 tab\there"), "caf\xc3\xa9 tab\there") << "UTF-8 and tabs stay";
}

// The exposition format's rules and Prometheus' naming conventions, over
// every line: a family's HELP, then its TYPE, then only its own samples;
// no series twice; counters end in _total; units are base units.
TEST(MetricsTest, EveryFamilyFollowsTheFormatAndTheNamingConventions) {
  MetricsSnapshot s = Known();
  s.job_names = true;
  const std::vector<std::string> lines = Lines(RenderPrometheus(s));
  const std::regex help(R"(^# HELP (msched_[a-z_]+) [^\n]+$)");
  const std::regex type(R"(^# TYPE (msched_[a-z_]+) (gauge|counter|histogram)$)");
  const std::regex sample(R"(^(msched_[a-z_]+)(\{([a-z_]+="([^"\\]|\\.)*",?)+\})? (\S+)$)");
  std::string family, family_type, expect_type_for;
  std::set<std::string> families, series;
  std::smatch m;
  for (const std::string& line : lines) {
    if (std::regex_match(line, m, help)) {
      ASSERT_TRUE(expect_type_for.empty()) << "HELP without TYPE before: " << line;
      family = m[1];
      EXPECT_TRUE(families.insert(family).second) << "family twice: " << family;
      expect_type_for = family;
    } else if (std::regex_match(line, m, type)) {
      ASSERT_EQ(m[1], expect_type_for) << line;
      family_type = m[2];
      expect_type_for.clear();
      EXPECT_EQ(family.ends_with("_total"), family_type == "counter")
          << family << ": counters, and only they, end in _total";
      EXPECT_TRUE(family.ends_with("_bytes") || family.ends_with("_bytes_total") || family.ends_with("_seconds") ||
                  family.ends_with("_seconds_total") || family.ends_with("_per_second") || family == "msched_jobs" ||
                  family == "msched_groups" || family.ends_with("_info") || family == "msched_job_on_gpu" ||
                  family_type == "counter")
          << family << ": a quantity with a unit names its base unit";
    } else {
      ASSERT_TRUE(std::regex_match(line, m, sample)) << "not a sample line: " << line;
      ASSERT_TRUE(expect_type_for.empty()) << line;
      const std::string name = m[1];
      if (family_type == "histogram") {
        EXPECT_TRUE(name == family + "_bucket" || name == family + "_sum" || name == family + "_count") << line;
      } else {
        EXPECT_EQ(name, family) << line;
      }
      EXPECT_TRUE(series.insert(line.substr(0, line.rfind(' '))).second) << "series twice: " << line;
      const std::string value = m[5];
      EXPECT_TRUE(value == "+Inf" || std::regex_match(value, std::regex(R"(-?[0-9.]+(e[+-][0-9]+)?)"))) << line;
    }
  }
  EXPECT_TRUE(expect_type_for.empty());
  EXPECT_GE(families.size(), 20u);
}

TEST(MetricsTest, TheBoardHandsTheLatestSnapshotToAnotherThread) {
  MetricsBoard board;
  EXPECT_EQ(board.Latest(), nullptr);
  std::thread writer([&] {
    for (uint64_t i = 1; i <= 1000; ++i) {
      auto s = std::make_shared<MetricsSnapshot>();
      s->switches = i;
      board.Publish(std::move(s));
    }
  });
  uint64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    if (std::shared_ptr<const MetricsSnapshot> s = board.Latest()) {
      EXPECT_GE(s->switches, last) << "snapshots arrive in order";
      last = s->switches;
    }
  }
  writer.join();
  ASSERT_NE(board.Latest(), nullptr);
  EXPECT_EQ(board.Latest()->switches, 1000u);
}

}  // namespace
}  // namespace msched

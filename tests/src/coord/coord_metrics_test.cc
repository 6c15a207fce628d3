#include "coord/coord_metrics.h"

#include <gtest/gtest.h>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The scheduler and its metrics, driven as the server drives them.
class CoordMetricsTest : public ::testing::Test {
 protected:
  explicit CoordMetricsTest(bool names = false) : s_(Options()), m_("9.9.9", 1234.5, names) {}

  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.hbm_bytes = 16 * kGiB;
    o.usable_fraction = 1.0;
    o.oversubscribe = 2.0;  // 32 GiB admitted at most
    o.fixed_slice_ns = 1000;
    return o;
  }
  void Apply(const Commands&) { m_.Sync(s_); }
  void Submit(uint64_t id, uint64_t mem, uint64_t now) {
    Job j;
    j.id = id;
    j.uid = 1000 + static_cast<uint32_t>(id);
    j.name = "job" + std::to_string(id);
    j.declared = mem;
    Apply(s_.Submit(std::move(j), 0, now));
  }
  void Stopped(uint64_t id, uint64_t now, uint64_t resident, uint64_t loaded = 0) {
    proto::Stopped m;
    m.now_ns = now;
    m.resident = resident;
    m.loaded = loaded;
    m.load_ns = loaded ? 100 : 0;
    m_.Stopped(s_, id, m);
    Apply(s_.Stopped(id, m));
  }
  const JobMetrics* JobIn(const MetricsSnapshot& snap, uint64_t id) {
    for (const JobMetrics& j : snap.jobs) {
      if (j.id == id) return &j;
    }
    return nullptr;
  }

  Scheduler s_;
  CoordMetrics m_;
};

TEST_F(CoordMetricsTest, TurnsSwapsWaitsAndJobsAreCounted) {
  Submit(1, 10 * kGiB, 0);    // alone: runs at once
  Submit(2, 10 * kGiB, 100);  // admitted; the two take turns of 1000 ns
  Submit(3, 16 * kGiB, 200);  // 36 GiB > 32: waits
  MetricsSnapshot snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.jobs_running, 2u);
  EXPECT_EQ(snap.jobs_waiting, 1u);
  EXPECT_EQ(snap.jobs_submitted, 3u);
  EXPECT_EQ(snap.admissions, 2u);
  EXPECT_EQ(snap.admission_wait_ns, 0u) << "both were admitted as they arrived";
  EXPECT_EQ(snap.groups, 2u);
  EXPECT_EQ(snap.slice_seconds.count, 0u) << "no turn has ended";
  ASSERT_NE(JobIn(snap, 3), nullptr);
  EXPECT_EQ(JobIn(snap, 3)->waited_ns, 0u) << "the scheduler's clock is still at 200";

  Apply(s_.SliceEnded(1, 1100));  // job 1's turn (0 to 1100) ends: told to stop
  // The scheduler counted job 1 as holding its whole 10 GiB; it gave up 4.
  Stopped(1, 1200, 6 * kGiB);     // job 2's turn begins at 1200
  Apply(s_.SliceEnded(2, 2200));  // and ends at 2200 (1000 ns)
  Stopped(2, 2300, 6 * kGiB);     // job 1 goes again, bringing its working set back
  Apply(s_.SliceEnded(1, 3300));
  Stopped(1, 3400, 6 * kGiB, 4 * kGiB);  // it reports having loaded 4 GiB
  snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.switches, 3u);
  EXPECT_EQ(snap.slice_seconds.count, 3u);
  EXPECT_DOUBLE_EQ(snap.slice_seconds.sum, (1100 + 1000 + 1000) / 1e9);
  EXPECT_EQ(snap.slice_seconds.counts[0], 3u) << "all under 5 ms";
  EXPECT_EQ(snap.swap_in_bytes, 4 * kGiB);
  EXPECT_EQ(snap.swap_out_bytes, 3 * 4 * kGiB) << "each stop took a job from 10 GiB (its turn) to 6";

  Apply(s_.Exited(1, 5000));  // job 3 fits now: admitted after waiting 4800 ns
  snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.admissions, 3u);
  EXPECT_EQ(snap.admission_wait_ns, 4800u);
  ASSERT_NE(JobIn(snap, 3), nullptr);
  EXPECT_EQ(JobIn(snap, 3)->waited_ns, 4800u);
  EXPECT_EQ(JobIn(snap, 1), nullptr) << "a finished job has no series";
  EXPECT_EQ(snap.jobs.size(), 2u);
  EXPECT_EQ(snap.jobs_running, 2u);
  EXPECT_EQ(snap.jobs_waiting, 0u);
  EXPECT_EQ(snap.jobs_submitted, 3u) << "each job once, however often it is seen";
  EXPECT_EQ(snap.version, "9.9.9");
  EXPECT_EQ(snap.start_time_seconds, 1234.5);
  EXPECT_EQ(snap.hbm_bytes, 16 * kGiB);
}

TEST_F(CoordMetricsTest, ReportedCountersAddEachJobsRiseAndNeverFall) {
  Submit(1, 4 * kGiB, 0);
  Submit(2, 4 * kGiB, 0);
  m_.Counted(1, {10, 100});
  m_.Counted(1, {7, 100});   // lower: ignored
  m_.Counted(1, {15, 300});  // counts only the rise above 10
  m_.Counted(2, {3, 50});
  m_.Counted(99, {1000, 1000});  // no such job
  MetricsSnapshot snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.faults, 18u);
  EXPECT_EQ(snap.prefetched_bytes, 350u);
  EXPECT_EQ(JobIn(snap, 1)->faults, 15u);
  EXPECT_EQ(JobIn(snap, 1)->prefetched_bytes, 300u);
  m_.Counted(2, {UINT64_MAX, UINT64_MAX});  // a hostile job: the sums saturate
  Apply(s_.Exited(2, 10));
  snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.faults, UINT64_MAX);
  EXPECT_EQ(snap.jobs.size(), 1u);
}

TEST_F(CoordMetricsTest, AJobAloneHasOneTurnEndedByItsExitAndSnapshotsClearTheChange) {
  Submit(1, 4 * kGiB, 1000);
  EXPECT_TRUE(m_.changed());
  MetricsSnapshot snap = m_.Snapshot(s_);
  EXPECT_FALSE(m_.changed());
  ASSERT_NE(JobIn(snap, 1), nullptr);
  EXPECT_TRUE(JobIn(snap, 1)->on_gpu);
  EXPECT_EQ(JobIn(snap, 1)->name, "") << "names stay inside unless published";
  EXPECT_EQ(JobIn(snap, 1)->uid, 1001u);
  EXPECT_EQ(JobIn(snap, 1)->declared_bytes, 4 * kGiB);
  EXPECT_EQ(JobIn(snap, 1)->budget_bytes, 16 * kGiB);
  EXPECT_EQ(JobIn(snap, 1)->peak_over_budget_bytes, 0u);
  s_.Counted(1, {.peak_over_budget = 7 << 20});
  EXPECT_EQ(m_.Snapshot(s_).jobs[0].peak_over_budget_bytes, 7u << 20) << "the scheduler's figure, as status shows it";
  Apply(s_.Exited(1, 3'001'000));
  EXPECT_TRUE(m_.changed());
  snap = m_.Snapshot(s_);
  EXPECT_EQ(snap.slice_seconds.count, 1u);
  EXPECT_DOUBLE_EQ(snap.slice_seconds.sum, 0.003);
  EXPECT_EQ(snap.jobs.size(), 0u);
}

class CoordMetricsWithNamesTest : public CoordMetricsTest {
 protected:
  CoordMetricsWithNamesTest() : CoordMetricsTest(/*names=*/true) {}
};

TEST_F(CoordMetricsWithNamesTest, NamesAreCopiedWhenPublished) {
  Submit(1, 4 * kGiB, 0);
  const MetricsSnapshot snap = m_.Snapshot(s_);
  EXPECT_TRUE(snap.job_names);
  ASSERT_NE(JobIn(snap, 1), nullptr);
  EXPECT_EQ(JobIn(snap, 1)->name, "job1");
}

}  // namespace
}  // namespace msched

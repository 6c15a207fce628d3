#include "coord/job_side.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

namespace msched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kDrainNs = 10;  // what the fake device's drain takes
constexpr uint64_t kLoadNs = 200;  // a working set's load
constexpr uint64_t kWaitNs = 500;  // a pause's wait for its evictions

// The job side with a fake clock, device and coordinator: the device
// records its calls as short lines ("drain", "end slice, evict 1 GiB, wait",
// "start slice, budget 8 GiB, load", "fit 4 GiB", "withdraw grant",
// "advance to 100") and moves the clock as its work would; the coordinator
// keeps what was sent. Each order is given as the hook gives it, under its
// lock.
class JobSideTest : public ::testing::Test, public JobClock, public JobDevice, public CoordLink {
 protected:
  static std::string Bytes(uint64_t b) {
    if (b == proto::kNever) return "all";
    return b % kGiB == 0 ? std::to_string(b / kGiB) + " GiB" : std::to_string(b) + " B";
  }

  // JobClock
  uint64_t Now() override { return now; }
  void AdvanceTo(uint64_t t) override {
    calls.push_back("advance to " + std::to_string(t));
    if (t > now) now = t;
  }
  // JobDevice
  void Drain() override {
    calls.push_back("drain");
    now += kDrainNs;
  }
  Ended EndSlice(uint64_t evict_bytes, bool wait) override {
    calls.push_back("end slice, evict " + Bytes(evict_bytes) + (wait ? ", wait" : ""));
    resident -= std::min(resident, evict_bytes);
    if (wait) now += kWaitNs;
    return {working_set, resident};
  }
  uint64_t StartSlice(uint64_t budget, bool load) override {
    calls.push_back("start slice, budget " + Bytes(budget) + (load ? ", load" : ""));
    if (!load) return 0;
    now += kLoadNs;
    resident += working_set;
    return working_set;
  }
  void FitBudget(uint64_t budget) override {
    calls.push_back("fit " + Bytes(budget));
    resident = std::min(resident, budget);
  }
  void WithdrawGrant() override { calls.push_back("withdraw grant"); }
  proto::JobCounters Counters() override { return {7, 9}; }
  // CoordLink
  void Send(const proto::Message& m) override { sent.push_back(m); }
  uint64_t SliceEnd() override { return slice_end; }

  // The inputs, under the locks the hook holds.
  void Welcome(uint64_t idle_yield_ns = 0) {
    proto::Welcome w;
    w.job = 1;
    w.idle_yield_ns = idle_yield = idle_yield_ns;
    MutexLock lock(&side.mu());
    side.OnWelcome(w);
  }
  // A Go with the welcome's idle yield, unless `idle_yield` was changed since.
  bool Go(uint64_t start, uint64_t budget, bool load = false) {
    MutexLock order(&side.order_mu());
    return side.OnGo(proto::Go{start, budget, slice_end, idle_yield, load});
  }
  void Stop(uint64_t evict, proto::StopReason reason = proto::StopReason::kSlice) {
    MutexLock order(&side.order_mu());
    side.OnStop(proto::Stop{evict, reason});
  }
  void Budget(uint64_t budget, uint64_t answers = 0) {
    MutexLock order(&side.order_mu());
    side.OnBudget(proto::Budget{budget, answers});
  }
  void Report(uint64_t bytes, bool coordinated = true) {
    MutexLock usage(&side.usage_mu());
    side.ReportUsage(bytes, coordinated);
  }
  // A hello that reports `bytes`, and its welcome.
  void Join(uint64_t bytes, uint64_t idle_yield_ns = 0) {
    side.Hello(bytes);
    Welcome(idle_yield_ns);
  }

  // A job with an idle yield of 100 ns and a slice that ends at 10 us,
  // holding its turn from 1 us...
  void StartIdleTurn() {
    Join(kGiB, /*idle_yield_ns=*/100);
    slice_end = 10'000;
    Go(1000, 8 * kGiB);
  }
  // ... that, at 1.5 us, has given its turn up as of 1.1 us.
  void ReportIdle() {
    StartIdleTurn();
    now = 1500;
    MutexLock order(&side.order_mu());
    ASSERT_TRUE(side.GiveTurnUp());
    MutexLock lock(&side.mu());
    ASSERT_TRUE(side.AskIdle(true, slice_end, 1100));
  }

  // The messages of type T sent so far.
  template <typename T>
  std::vector<T> Sent() const {
    std::vector<T> out;
    for (const proto::Message& m : sent) {
      if (auto* t = std::get_if<T>(&m)) out.push_back(*t);
    }
    return out;
  }
  template <typename T>
  T Last() const {
    const std::vector<T> all = Sent<T>();
    EXPECT_FALSE(all.empty());
    return all.empty() ? T{} : all.back();
  }
  bool Called(const std::string& call) const { return std::find(calls.begin(), calls.end(), call) != calls.end(); }

  uint64_t now = 0;
  uint64_t slice_end = proto::kNever;
  uint64_t idle_yield = 0;  // what Go sends
  uint64_t resident = 0;
  uint64_t working_set = 3 * kGiB;
  std::vector<std::string> calls;
  std::vector<proto::Message> sent;
  JobSide side{*this, *this, *this};
};

TEST_F(JobSideTest, AGoHoldsTheTurnAndAStopDrainsEndsTheSliceAndAnswers) {
  Join(kGiB);
  EXPECT_FALSE(side.Runnable()) << "welcomed: no turn until a Go";
  Go(100, 8 * kGiB);
  EXPECT_EQ(now, 100u) << "the clock moves to the turn's start";
  EXPECT_TRUE(side.Runnable());
  resident = 5 * kGiB;
  now = 1000;
  Stop(kGiB);
  EXPECT_FALSE(side.holds_turn());
  EXPECT_EQ(calls, (std::vector<std::string>{"advance to 100", "start slice, budget 8 GiB", "drain",
                                             "end slice, evict 1 GiB"}));
  const proto::Stopped s = Last<proto::Stopped>();
  EXPECT_EQ(s.now_ns, 1000 + kDrainNs) << "after the drain; the evictions overlap what comes next";
  EXPECT_EQ(s.resident, 4 * kGiB);
  EXPECT_EQ(s.working_set, 3 * kGiB);
  EXPECT_EQ(s.counters.faults, 7u);
  EXPECT_EQ(s.counters.prefetched, 9u);
}

TEST_F(JobSideTest, AStopDuringAnOpenAskIsCarriedOutAndLaunchesStillWaitForTheAnswer) {
  Join(kGiB);
  Go(100, 4 * kGiB);
  Report(2 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 1u) << "more than the coordinator knows: it asks";
  EXPECT_FALSE(side.Runnable()) << "launches wait for the answer";

  Stop(kGiB);
  EXPECT_EQ(Sent<proto::Stopped>().size(), 1u) << "the Stop is carried out and answered";
  EXPECT_TRUE(Called("end slice, evict 1 GiB"));
  Go(300, 4 * kGiB);
  EXPECT_TRUE(side.holds_turn());
  EXPECT_FALSE(side.Runnable()) << "neither the Stop nor the Go answered the ask";

  Budget(0, 1);
  EXPECT_TRUE(side.Runnable());
  EXPECT_FALSE(Called("fit all")) << "a budget of 0 leaves the grant";
  Report(2 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 0u) << "the answer raised what the coordinator knows";
  EXPECT_TRUE(side.Runnable());
}

TEST_F(JobSideTest, AnAnswerToAnOlderAskLeavesTheLastOneOpen) {
  Join(kGiB);
  Go(0, 8 * kGiB);
  Report(2 * kGiB);
  Report(3 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 2u);
  Budget(0, 1);
  EXPECT_FALSE(side.Runnable());
  Report(3 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 3u) << "the coordinator has not seen 3 GiB yet";
  Budget(0, 3);
  EXPECT_TRUE(side.Runnable());
  Report(kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 0u) << "less than it knows: no ask";
  Report(2 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 4u) << "a report that asked nothing lowered what it knows";
}

TEST_F(JobSideTest, UsageWhileAloneIsNotSentButTheNextHelloCarriesIt) {
  Report(5 * kGiB, /*coordinated=*/false);
  EXPECT_TRUE(sent.empty());
  EXPECT_EQ(side.Hello(kGiB), 5 * kGiB);
  EXPECT_EQ(side.Hello(6 * kGiB), 6 * kGiB) << "at least the allocation being made";
}

TEST_F(JobSideTest, AGoAfterAReconnectForgetsOldAsksAndUsesTheNewHello) {
  Join(kGiB);
  Go(100, 8 * kGiB);
  Report(3 * kGiB);
  ASSERT_FALSE(side.Runnable());

  EXPECT_TRUE(side.ConnectionLost()) << "the lost connection had been welcomed";
  EXPECT_TRUE(Called("withdraw grant")) << "alone, on its own budget";
  EXPECT_FALSE(side.holds_turn());
  {
    MutexLock lock(&side.mu());
    EXPECT_FALSE(side.welcomed());
    EXPECT_FALSE(side.dropped());
  }
  EXPECT_EQ(side.Hello(kGiB), 3 * kGiB) << "the new hello says what the job holds";
  Welcome();
  EXPECT_FALSE(side.Runnable()) << "no turn until the new coordinator's Go";

  calls.clear();
  now = 1000;
  Go(5000, 6 * kGiB, /*load=*/true);
  EXPECT_EQ(calls, (std::vector<std::string>{"advance to 5000", "start slice, budget 6 GiB, load"}));
  EXPECT_EQ(now, 5000 + kLoadNs);
  EXPECT_TRUE(side.Runnable()) << "the old connection's ask is forgotten";
  Report(3 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 0u) << "the hello told the coordinator";
  Report(4 * kGiB);
  EXPECT_EQ(Last<proto::Usage>().ask, 2u) << "asks keep their numbering";
}

TEST_F(JobSideTest, AConnectionLostBeforeItsWelcomeCountsAsDropped) {
  side.Hello(kGiB);
  EXPECT_FALSE(side.ConnectionLost());
  {
    MutexLock lock(&side.mu());
    EXPECT_TRUE(side.dropped());
  }
  Welcome();
  MutexLock lock(&side.mu());
  EXPECT_TRUE(side.welcomed());
  EXPECT_FALSE(side.dropped());
}

TEST_F(JobSideTest, ABudgetEvictsDownToTheGrant) {
  Join(kGiB);
  Go(0, 8 * kGiB);
  resident = 8 * kGiB;
  Budget(4 * kGiB);
  EXPECT_TRUE(Called("fit 4 GiB"));
  EXPECT_EQ(resident, 4 * kGiB);
  calls.clear();
  Budget(0);
  EXPECT_TRUE(calls.empty()) << "0: the grant is unchanged";
  EXPECT_TRUE(side.Runnable()) << "a budget that answers nothing changes nothing else";
}

TEST_F(JobSideTest, APauseEvictsEverythingAndAnswersOnceItIsOnTheHost) {
  Join(kGiB);
  Go(0, 8 * kGiB);
  resident = 6 * kGiB;
  now = 1000;
  Stop(proto::kNever, proto::StopReason::kPause);
  EXPECT_TRUE(Called("end slice, evict all, wait"));
  const proto::Stopped s = Last<proto::Stopped>();
  EXPECT_EQ(s.now_ns, 1000 + kDrainNs + kWaitNs) << "answered once the evictions are complete";
  EXPECT_EQ(s.resident, 0u);
  EXPECT_EQ(s.working_set, 3 * kGiB);
}

TEST_F(JobSideTest, AnEvictOnlyStopReportsNoWorkingSet) {
  Join(kGiB);
  Stop(2 * kGiB, proto::StopReason::kEvictOnly);
  EXPECT_TRUE(Called("end slice, evict 2 GiB"));
  EXPECT_EQ(Last<proto::Stopped>().working_set, 0u);
}

TEST_F(JobSideTest, AStopReportsWhatTheLastGoLoadedOnce) {
  Join(kGiB);
  Go(0, 8 * kGiB, /*load=*/true);
  Stop(0);
  EXPECT_EQ(Last<proto::Stopped>().loaded, 3 * kGiB);
  EXPECT_EQ(Last<proto::Stopped>().load_ns, kLoadNs);
  Go(now, 8 * kGiB, /*load=*/false);
  Stop(0);
  EXPECT_EQ(Last<proto::Stopped>().loaded, 0u) << "reported by the Stop after its Go only";
  EXPECT_EQ(Last<proto::Stopped>().load_ns, 0u);
}

TEST_F(JobSideTest, TheSliceEndIsReportedOncePerTurn) {
  Join(kGiB);
  slice_end = 1000;
  Go(0, 8 * kGiB);
  now = 1000;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOver);
  EXPECT_FALSE(side.Pass(slice_end));
  {
    MutexLock lock(&side.mu());
    side.ReachedSliceEnd(1000);
    side.ReachedSliceEnd(1010);
  }
  ASSERT_EQ(Sent<proto::SliceEnd>().size(), 1u);
  EXPECT_EQ(Last<proto::SliceEnd>().now_ns, 1000u);
  Stop(0);
  slice_end = 2000;
  Go(1500, 8 * kGiB);
  now = 2000;
  MutexLock lock(&side.mu());
  side.ReachedSliceEnd(2000);
  EXPECT_EQ(Sent<proto::SliceEnd>().size(), 2u) << "a new turn's end is reported again";
}

TEST_F(JobSideTest, ASliceWithoutEndNeverEndsNorGoesIdle) {
  Join(kGiB, /*idle_yield_ns=*/100);
  Go(0, 8 * kGiB);
  now = 1'000'000;
  EXPECT_EQ(side.Look(proto::kNever).at, JobSide::At::kOpen);
  EXPECT_TRUE(side.Pass(proto::kNever));
}

TEST_F(JobSideTest, IdleOnlyAfterTheIdleYieldWithNothingInFlight) {
  StartIdleTurn();
  now = 1099;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen);
  now = 1100;
  JobSide::Position p = side.Look(slice_end);
  EXPECT_EQ(p.at, JobSide::At::kIdle) << "nothing launched since the Go";
  EXPECT_EQ(p.idle_since, 1100u) << "dated when it went idle";
  EXPECT_FALSE(side.Pass(slice_end)) << "an idle job's launch waits";

  side.Synchronized(side.passes(), slice_end);  // the application synchronises: activity
  now = 1150;
  ASSERT_TRUE(side.Pass(slice_end));
  now = 1160;
  side.Passed(slice_end);  // the launch returned: its work is queued
  const uint64_t before = side.passes();
  now = 5000;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen) << "its work may still run: not idle";
  side.Synchronized(before, slice_end);
  now = 5099;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen) << "the synchronisation counts as activity";
  now = 5100;
  p = side.Look(slice_end);
  EXPECT_EQ(p.at, JobSide::At::kIdle);
  EXPECT_EQ(p.idle_since, 5100u);
  EXPECT_EQ(side.IdleDue(), 5100u);

  // A new slice end: the count is for the old one until a timer's look
  // starts it again.
  now = 6000;
  EXPECT_EQ(side.Look(20'000).at, JobSide::At::kOpen);
  EXPECT_EQ(side.TimerLook(20'000).at, JobSide::At::kOpen);
  now = 6050;
  EXPECT_EQ(side.TimerLook(20'000).at, JobSide::At::kOpen);
  now = 6100;
  EXPECT_EQ(side.TimerLook(20'000).idle_since, 6100u) << "counted from when it first saw the end";
  now = 21'000;
  EXPECT_EQ(side.TimerLook(30'000).at, JobSide::At::kOpen);
  EXPECT_EQ(side.TimerLook(20'500).at, JobSide::At::kOver) << "a timer sees a slice end the job passed idle";
}

TEST_F(JobSideTest, NeverIdleWithoutAnIdleYield) {
  Join(kGiB, /*idle_yield_ns=*/0);
  slice_end = 10'000;
  Go(0, 8 * kGiB);
  now = 9000;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen);
}

// Each Go carries the idle yield of the turn it starts (a service's is
// shorter than the welcome's): the count runs to it from then on.
TEST_F(JobSideTest, AGoSetsTheTurnsIdleYield) {
  Join(kGiB, /*idle_yield_ns=*/100);
  slice_end = 10'000;
  EXPECT_FALSE(Go(1000, 8 * kGiB)) << "the welcome's yield: no change";
  now = 1050;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen);
  idle_yield = 20;
  EXPECT_TRUE(Go(2000, 8 * kGiB)) << "the caller re-arms the simulator's idle alarm";
  EXPECT_EQ(side.idle_yield_ns(), 20u);
  now = 2019;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen);
  now = 2020;
  EXPECT_EQ(side.Look(slice_end).idle_since, 2020u);
  idle_yield = 0;
  Go(3000, 8 * kGiB);
  now = 9000;
  EXPECT_EQ(side.Look(slice_end).at, JobSide::At::kOpen) << "0: never idle";
}

TEST_F(JobSideTest, AnIdleTurnIsGivenUpAndTheJobSaysWhenItHasWorkAgain) {
  ReportIdle();
  {
    MutexLock lock(&side.mu());
    EXPECT_TRUE(side.idle_asked());
  }
  EXPECT_FALSE(side.holds_turn());
  const proto::Idle idle = Last<proto::Idle>();
  EXPECT_TRUE(idle.idle);
  EXPECT_EQ(idle.at_ns, 1100u) << "dated when it went idle";

  Stop(0);  // the coordinator passed the turn on
  {
    MutexLock lock(&side.mu());
    EXPECT_TRUE(side.yielded());
    now = 3000;
    side.HasWork();
    EXPECT_FALSE(side.yielded());
    side.HasWork();
  }
  ASSERT_EQ(Sent<proto::Idle>().size(), 2u) << "said once";
  EXPECT_FALSE(Last<proto::Idle>().idle);
  EXPECT_EQ(Last<proto::Idle>().at_ns, 3000u);
  EXPECT_FALSE(side.Runnable()) << "it waits for its turn like any other";
}

TEST_F(JobSideTest, AnIdleReportIsNotSentWhenTheJobTurnedOutBusy) {
  StartIdleTurn();
  now = 1500;
  MutexLock order(&side.order_mu());
  ASSERT_TRUE(side.GiveTurnUp());
  EXPECT_FALSE(side.GiveTurnUp()) << "already given up";
  side.NoteActive(1450, slice_end);  // a call under way launched meanwhile
  {
    MutexLock lock(&side.mu());
    EXPECT_FALSE(side.AskIdle(true, slice_end, 1100));
    EXPECT_FALSE(side.idle_asked());
  }
  EXPECT_TRUE(side.holds_turn()) << "the gate opens again";
  ASSERT_TRUE(side.GiveTurnUp());
  now = 2000;
  MutexLock lock(&side.mu());
  EXPECT_FALSE(side.AskIdle(false, slice_end, 1550)) << "alone now: nobody to give the turn to";
  EXPECT_FALSE(side.AskIdle(true, proto::kNever, 1550)) << "nobody waits";
  EXPECT_TRUE(Sent<proto::Idle>().empty());
}

TEST_F(JobSideTest, AGoAnsweringAnIdleReportCarriesTheJobOnUntilItSaysItHasWork) {
  ReportIdle();
  Go(1500, 8 * kGiB);  // others of its group still run: carry on
  EXPECT_TRUE(side.holds_turn());
  EXPECT_FALSE(side.Runnable()) << "its next launch stops at the gate to say it has work";
  now = 5000;
  EXPECT_EQ(side.TimerLook(slice_end).at, JobSide::At::kOpen) << "the coordinator knows it is idle: no second report";
  {
    MutexLock lock(&side.mu());
    EXPECT_TRUE(side.known_idle());
    EXPECT_FALSE(side.yielded()) << "still in the rotation";
    side.HasWork();
    EXPECT_FALSE(side.known_idle());
    side.HasWork();
  }
  ASSERT_EQ(Sent<proto::Idle>().size(), 2u) << "said once";
  EXPECT_FALSE(Last<proto::Idle>().idle);
  EXPECT_EQ(Last<proto::Idle>().at_ns, 5000u);
  EXPECT_TRUE(side.Runnable()) << "busy in its turn, which it never left";
  Stop(0);  // a later Stop is an ordinary one
  MutexLock lock(&side.mu());
  EXPECT_FALSE(side.yielded());
}

TEST_F(JobSideTest, AStopWhileCarriedOnLeavesTheJobOutOfTheRotation) {
  ReportIdle();
  Go(1500, 8 * kGiB);
  Stop(0);  // the rest of its group went idle too: the turn passed on
  MutexLock lock(&side.mu());
  EXPECT_TRUE(side.yielded());
  now = 7000;
  side.HasWork();
  ASSERT_EQ(Sent<proto::Idle>().size(), 2u);
  EXPECT_FALSE(Last<proto::Idle>().idle) << "back in the rotation";
  EXPECT_FALSE(side.Runnable()) << "it waits for its turn like any other";
}

TEST_F(JobSideTest, AGoWhileYieldedPutsTheJobBackInTheRotation) {
  ReportIdle();
  Stop(0);
  slice_end = 20'000;
  Go(12'000, 8 * kGiB, /*load=*/true);
  EXPECT_EQ(now, 12'000 + kLoadNs);
  EXPECT_TRUE(side.Runnable());
  MutexLock lock(&side.mu());
  EXPECT_FALSE(side.yielded());
  side.HasWork();
  EXPECT_EQ(Sent<proto::Idle>().size(), 1u) << "its turn came: no need to say it has work";
}

TEST_F(JobSideTest, ALostConnectionEndsAnIdleReport) {
  ReportIdle();
  side.ConnectionLost();
  MutexLock lock(&side.mu());
  EXPECT_FALSE(side.idle_asked()) << "no answer will come";
  EXPECT_FALSE(side.yielded());
}

}  // namespace
}  // namespace msched

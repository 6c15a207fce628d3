// The job's side of the simulator's lockstep (hook/src/client/coord_lockstep.h),
// driven by a fake device environment and a gate page written by the test
// as the coordinator would.
#include "client/coord_lockstep.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

namespace msched::hook {
namespace {

class FakeEnv final : public DeviceEnv {
 public:
  explicit FakeEnv(bool lockstep) : lockstep_(lockstep) {}
  bool lockstep() const override { return lockstep_; }
  uint64_t Now() override { return 0; }
  void AdvanceTo(uint64_t) override {}
  void SetIdleAlarm(uint64_t, void (*)()) override {}
  void SetBlocked(bool, uint64_t) override {}
  void WaitForTurn() override { turns.fetch_add(1); }
  bool PeerAboutToWake(int32_t pid, uint64_t wakeups_sent) override {
    auto it = blocked_seen.find(pid);
    return it != blocked_seen.end() && wakeups_sent > it->second;
  }
  std::optional<std::vector<TouchedRange>> LastLaunchAccesses() override { return std::nullopt; }
  std::optional<uint64_t> Faults() override { return std::nullopt; }
  std::optional<uint64_t> ResidentBytes() override { return std::nullopt; }

  std::atomic<int> turns{0};
  std::map<int32_t, uint64_t> blocked_seen;  // blocked peers: pid -> orders seen when they blocked

 private:
  const bool lockstep_;
};

constexpr uint32_t kOwnSlot = 2;
constexpr uint64_t kJob = 9;

class LockstepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<CoordShm> created = CoordShm::Create();
    ASSERT_TRUE(created.ok()) << created.status().message();
    page_.emplace(std::move(*created));
    own().job.store(kJob);
    link_.page.store(&*page_);
    link_.slot_index.store(kOwnSlot);
    link_.job_id.store(kJob);
    link_.gate.store(&own());
  }
  ShmSlot& own() { return page_->slot(kOwnSlot); }

  std::optional<CoordShm> page_;
  LinkCounts link_;
};

TEST_F(LockstepTest, OnAGpuNothingHoldsAndNothingWaits) {
  FakeEnv gpu(/*lockstep=*/false);
  gpu.blocked_seen[4321] = 0;
  std::unique_ptr<Lockstep> l = Lockstep::For(gpu, link_);
  link_.messages_sent.store(3);  // unhandled
  own().orders_sent.store(2);    // on their way
  page_->slot(5).job.store(1);
  page_->slot(5).pid.store(4321);
  page_->slot(5).orders_sent.store(1);  // a woken peer
  EXPECT_FALSE(l->HoldsLaunches());
  EXPECT_FALSE(l->Unsettled());
  EXPECT_FALSE(l->OrderInFlight());
  EXPECT_FALSE(l->Unheard());
  l->WaitForTurn();
  EXPECT_EQ(gpu.turns.load(), 0);
}

TEST_F(LockstepTest, AnUnhandledMessageHoldsLaunchesUntilTheCoordinatorHandlesIt) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  EXPECT_FALSE(l->HoldsLaunches());
  link_.messages_sent.store(2);
  own().messages_handled.store(1);
  EXPECT_TRUE(l->HoldsLaunches());
  EXPECT_TRUE(l->Unsettled());
  own().messages_handled.store(2);
  EXPECT_FALSE(l->HoldsLaunches());
  EXPECT_FALSE(l->Unsettled());
  l->WaitForTurn();
  EXPECT_EQ(sim.turns.load(), 1);
}

TEST_F(LockstepTest, AnOrderOnItsWayHoldsLaunchesUntilItArrives) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  own().orders_sent.store(1);
  EXPECT_TRUE(l->OrderInFlight());
  EXPECT_TRUE(l->HoldsLaunches());
  link_.orders_received.store(1);
  EXPECT_FALSE(l->OrderInFlight());
  EXPECT_FALSE(l->HoldsLaunches());
}

TEST_F(LockstepTest, AWokenPeerKeepsTheJobUnsettledWithoutHoldingItsLaunches) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  sim.blocked_seen[1234] = 1;
  page_->slot(7).job.store(3);
  page_->slot(7).pid.store(1234);
  page_->slot(7).orders_sent.store(1);  // nothing new for it: stays blocked
  EXPECT_FALSE(l->Unsettled());
  page_->slot(7).orders_sent.store(2);  // woken: an order is on its way to it
  EXPECT_TRUE(l->Unsettled());
  EXPECT_TRUE(l->Unheard());
  EXPECT_FALSE(l->HoldsLaunches());
  page_->slot(7).job.store(0);  // the slot freed: no peer there
  EXPECT_FALSE(l->Unsettled());
}

TEST_F(LockstepTest, TheJobsOwnSlotIsNeverItsPeer) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  sim.blocked_seen[555] = 0;
  own().pid.store(555);
  own().orders_sent.store(1);
  link_.orders_received.store(1);
  EXPECT_FALSE(l->Unsettled());
}

TEST_F(LockstepTest, AGoodbyeIsUnheardOnlyWhileTheSlotIsStillTheJobs) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  link_.messages_sent.store(1);
  EXPECT_TRUE(l->Unheard());
  own().job.store(kJob + 1);  // handled, freed and taken by another job
  EXPECT_FALSE(l->Unheard());
}

TEST_F(LockstepTest, ProgressMovesWithEitherSidesCounts) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  uint64_t last = l->Progress();
  auto moved = [&] {
    const uint64_t now = l->Progress();
    const bool m = now != last;
    last = now;
    return m;
  };
  link_.messages_sent.fetch_add(1);
  EXPECT_TRUE(moved());
  own().messages_handled.fetch_add(1);
  EXPECT_TRUE(moved());
  own().orders_sent.fetch_add(1);
  EXPECT_TRUE(moved());
  link_.orders_received.fetch_add(1);
  EXPECT_TRUE(moved());
  EXPECT_FALSE(moved());
}

TEST_F(LockstepTest, AHoldEndsOnceSettledWaitingForTheTurnAtEachLook) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  link_.messages_sent.store(1);
  std::thread coordinator([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    own().messages_handled.store(1);
  });
  Mutex mu;
  CondVar cv;
  {
    MutexLock lock(&mu);
    l->HoldWhile(&Lockstep::HoldsLaunches, &mu, &cv);
  }
  coordinator.join();
  EXPECT_FALSE(l->HoldsLaunches());
  EXPECT_GE(sim.turns.load(), 1);
}

TEST_F(LockstepTest, AHoldWithoutProgressEndsAfterTheBound) {
  FakeEnv sim(/*lockstep=*/true);
  std::unique_ptr<Lockstep> l = Lockstep::For(sim, link_);
  link_.messages_sent.store(1);  // never handled: a coordinator that stopped answering
  Mutex mu;
  CondVar cv;
  const auto start = std::chrono::steady_clock::now();
  {
    MutexLock lock(&mu);
    l->HoldWhile(&Lockstep::HoldsLaunches, &mu, &cv);
  }
  const auto held = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(l->HoldsLaunches());
  EXPECT_GE(held, kHandledWait);
  EXPECT_LT(held, kHandledWait * 3);
}

}  // namespace
}  // namespace msched::hook

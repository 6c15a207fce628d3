// The idle timer of a real GPU (hook/src/client/idle_timer.h), on a fake
// clock: it gives the turn of a job idle for its idle yield up, dated when
// the job went idle, only while others wait and no call holds a pass; it
// reports a slice end an idle job passed; and it carries out the orders
// that come for a job that launches nothing.
#include "client/idle_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "fake_job.h"

namespace msched::hook {
namespace {

using testing_fakes::Eventually;

class Orders : public OrderHandler {
 public:
  void Execute(const proto::Message&) override { carried.fetch_add(1); }
  std::atomic<int> carried{0};
};

class IdleTimerTest : public ::testing::Test, public IdleYielder {
 protected:
  ~IdleTimerTest() override { StopTimer(); }

  // IdleYielder
  bool Coordinated() const override { return true; }
  void GiveIdleTurnUp(uint64_t since) override {
    given_since.store(since);
    // As the client does: the turn is given up (the timer then looks at a
    // job without its turn).
    MutexLock order(&parts_.job.side.order_mu());
    parts_.job.side.GiveTurnUp();
  }

  void StartTimer() { thread_ = std::thread(&IdleTimer::Run, &timer_); }
  void StopTimer() {
    if (!thread_.joinable()) return;
    timer_.Stop();
    {
      MutexLock lock(&parts_.job.side.mu());
      changed_.NotifyAll();
    }
    thread_.join();
  }
  // The job's reports to the coordinator so far, by type.
  size_t SentOf(proto::MsgType t) {
    MutexLock lock(&parts_.job.sent_mu);
    size_t n = 0;
    for (const proto::Message& m : parts_.job.sent) n += proto::TypeOf(m) == t;
    return n;
  }

  std::atomic<uint64_t> given_since{0};
  Orders handler_;
  testing_fakes::GateParts parts_{handler_};
  CondVar changed_;
  IdleTimer timer_{parts_.job.side, parts_.gate, parts_.orders, changed_, *this};
  std::thread thread_;
};

TEST_F(IdleTimerTest, AJobIdleForItsIdleYieldWhileOthersWaitGivesItsTurnUpAsOfThen) {
  parts_.job.HoldTurn(1000, 10'000, /*idle_yield_ns=*/100);
  parts_.page.Set(true, 10'000);  // others wait: the slice has an end
  parts_.job.now = 1050;
  StartTimer();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(given_since.load(), 0u) << "not idle for the idle yield yet";
  parts_.job.now = 1500;
  ASSERT_TRUE(Eventually([&] { return given_since.load() != 0; }));
  EXPECT_EQ(given_since.load(), 1100u) << "dated when the idle yield ran out";
}

TEST_F(IdleTimerTest, NoTurnIsGivenUpWhileACallHoldsAPassOrNobodyWaits) {
  parts_.job.HoldTurn(1000, proto::kNever, /*idle_yield_ns=*/100);
  parts_.page.Set(true);  // nobody waits: no slice end
  parts_.job.now = 5000;
  StartTimer();
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(given_since.load(), 0u) << "a turn without end is never given up";
  StopTimer();

  ASSERT_TRUE(parts_.gate.Enter());  // a launch is under way...
  parts_.page.Set(true, 10'000);
  parts_.job.now = 9000;
  IdleTimer held{parts_.job.side, parts_.gate, parts_.orders, changed_, *this};
  std::thread t(&IdleTimer::Run, &held);
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(given_since.load(), 0u) << "...so the job is not idle";
  held.Stop();
  {
    MutexLock lock(&parts_.job.side.mu());
    changed_.NotifyAll();
  }
  t.join();
  parts_.gate.Leave();
}

TEST_F(IdleTimerTest, ASliceEndAnIdleJobPassedIsReportedOnce) {
  parts_.job.HoldTurn(1000, 2000, /*idle_yield_ns=*/1'000'000);
  parts_.page.Set(true, 2000);
  parts_.job.now = 2500;
  StartTimer();
  ASSERT_TRUE(Eventually([&] { return SentOf(proto::MsgType::kSliceEnd) == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(SentOf(proto::MsgType::kSliceEnd), 1u);
  EXPECT_EQ(given_since.load(), 0u);
}

TEST_F(IdleTimerTest, OrdersForAJobWhoseGateIsClosedAreCarriedOutWithoutALaunch) {
  parts_.job.HoldTurn(1000, proto::kNever);
  parts_.page.Set(true);
  StartTimer();
  {
    MutexLock lock(&parts_.job.side.mu());
    parts_.orders.Push(proto::Budget{});
    changed_.NotifyAll();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(handler_.carried.load(), 0) << "an open gate: the job's next launch carries it out";
  parts_.page.Set(false);  // the coordinator closed the gate: a Stop is on its way
  ASSERT_TRUE(Eventually([&] { return handler_.carried.load() == 1; }));
  EXPECT_FALSE(parts_.orders.pending());
}

}  // namespace
}  // namespace msched::hook

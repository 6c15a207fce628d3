// The launch gate (hook/src/client/job_gate.h): a call passes only while
// the job holds its turn, no order waits, the gate page lets it run and its
// slice has not ended; a pass is held until the call returns, and closing
// waits for every pass.
#include "client/job_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "fake_job.h"

namespace msched::hook {
namespace {

class NoOrders : public OrderHandler {
 public:
  void Execute(const proto::Message&) override {}
};

class JobGateTest : public ::testing::Test {
 protected:
  NoOrders handler_;
  testing_fakes::GateParts parts_{handler_};
};

TEST_F(JobGateTest, TheGatePageIsReadAsTheCoordinatorWroteIt) {
  EXPECT_FALSE(parts_.gate.Read().open);
  parts_.page.Set(true, 5000);
  EXPECT_TRUE(parts_.gate.Read().open);
  EXPECT_EQ(parts_.gate.Read().end, 5000u);
  parts_.page.link.gate.store(nullptr);
  EXPECT_FALSE(parts_.gate.Read().open) << "no slot yet: closed";
  EXPECT_EQ(parts_.gate.Read().end, proto::kNever);
}

TEST_F(JobGateTest, ACallPassesOnlyWithTheTurnAnOpenGateAndNoOrderWaiting) {
  parts_.page.Set(true);
  EXPECT_FALSE(parts_.gate.Enter()) << "no turn yet";
  parts_.job.HoldTurn(0, proto::kNever);
  parts_.page.Set(false);
  EXPECT_FALSE(parts_.gate.Enter()) << "the coordinator closed the gate";
  parts_.page.Set(true);
  {
    MutexLock lock(&parts_.job.side.mu());
    parts_.orders.Push(proto::Budget{});
  }
  EXPECT_FALSE(parts_.gate.Enter()) << "an order waits to be carried out first";
  {
    MutexLock lock(&parts_.job.side.mu());
    parts_.orders.RunQueued();
  }
  EXPECT_TRUE(parts_.gate.Enter());
  EXPECT_EQ(parts_.gate.held(), 1u);
  parts_.gate.Leave();
  EXPECT_EQ(parts_.gate.held(), 0u);
  EXPECT_EQ(parts_.job.side.passes(), 1u) << "the call's return counts as its work queued";
  EXPECT_EQ(parts_.gate.held(), 0u) << "a refused call holds nothing";
}

TEST_F(JobGateTest, ASliceThatEndedStopsTheFastPath) {
  parts_.job.HoldTurn(0, 1000);
  parts_.page.Set(true, 1000);
  parts_.job.now = 999;
  EXPECT_TRUE(parts_.gate.Enter());
  parts_.gate.Leave();
  parts_.job.now = 1000;
  EXPECT_FALSE(parts_.gate.Enter()) << "the slow path reports the slice end";
}

TEST_F(JobGateTest, ClosingWaitsForEveryCallHoldingAPass) {
  parts_.job.HoldTurn(0, proto::kNever);
  parts_.page.Set(true);
  std::unique_ptr<GatePass> pass = std::make_unique<GatePass>(parts_.gate.Enter() ? &parts_.gate : nullptr);
  ASSERT_EQ(parts_.gate.held(), 1u);
  std::atomic<bool> drained{false};
  std::thread closer([&] {
    parts_.gate.WaitForPasses();
    drained.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(drained.load()) << "a call still holds its pass";
  pass.reset();  // the call returns
  closer.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(parts_.gate.held(), 0u);
}

}  // namespace
}  // namespace msched::hook

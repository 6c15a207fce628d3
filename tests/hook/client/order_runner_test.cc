// The order runner (hook/src/client/order_runner.h): orders carried out in
// the order sent, one at a time, with the queue's lock let go while each
// runs, whichever threads come to them.
#include "client/order_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "fake_job.h"

namespace msched::hook {
namespace {

using testing_fakes::FakeJob;

// Budgets numbered by `answers`, so that the order they ran in shows.
proto::Message Numbered(uint64_t n) { return proto::Budget{0, n}; }
uint64_t NumberOf(const proto::Message& m) { return std::get<proto::Budget>(m).answers; }

class Recorder : public OrderHandler {
 public:
  explicit Recorder(JobSide& side) : side_(side) {}
  void Execute(const proto::Message& m) override {
    EXPECT_EQ(running_.fetch_add(1), 0) << "two orders ran at once";
    {
      // The queue's lock is free while an order runs: an order may take
      // it (here it would deadlock otherwise).
      MutexLock lock(&side_.mu());
      ran.push_back(NumberOf(m));
    }
    if (during) during(m);
    running_.fetch_sub(1);
  }
  std::vector<uint64_t> ran;  // under side_.mu()
  std::function<void(const proto::Message&)> during;

 private:
  JobSide& side_;
  std::atomic<int> running_{0};
};

class OrderRunnerTest : public ::testing::Test {
 protected:
  void Push(uint64_t n) {
    MutexLock lock(&job_.side.mu());
    orders_.Push(Numbered(n));
  }
  void Run() {
    MutexLock lock(&job_.side.mu());
    orders_.RunQueued();
  }
  std::vector<uint64_t> Ran() {
    MutexLock lock(&job_.side.mu());
    return recorder_.ran;
  }

  FakeJob job_;
  Recorder recorder_{job_.side};
  OrderRunner orders_{job_.side, recorder_};
};

TEST_F(OrderRunnerTest, OrdersRunInTheOrderSentAndNothingIsPendingAfter) {
  EXPECT_FALSE(orders_.pending());
  Push(1);
  Push(2);
  Push(3);
  EXPECT_TRUE(orders_.pending()) << "the launch path's check sees them";
  Run();
  EXPECT_EQ(Ran(), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE(orders_.pending());
  MutexLock lock(&job_.side.mu());
  EXPECT_TRUE(orders_.empty());
}

TEST_F(OrderRunnerTest, AnOrderQueuedWhileAnotherRunsIsCarriedOutInTheSameRun) {
  recorder_.during = [&](const proto::Message& m) {
    if (NumberOf(m) == 1) Push(2);  // the reader thread queues it meanwhile
  };
  Push(1);
  Run();
  EXPECT_EQ(Ran(), (std::vector<uint64_t>{1, 2}));
}

TEST_F(OrderRunnerTest, ThreadsThatCarryOrdersOutTakeThemOneAtATimeInOrder) {
  constexpr uint64_t kOrders = 2000;
  std::atomic<bool> done{false};
  auto runner = [&] {
    while (!done.load()) Run();
  };
  std::thread a(runner), b(runner);
  for (uint64_t n = 1; n <= kOrders; ++n) Push(n);
  ASSERT_TRUE(testing_fakes::Eventually([&] { return Ran().size() == kOrders; }));
  done.store(true);
  a.join();
  b.join();
  const std::vector<uint64_t> ran = Ran();
  for (uint64_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], i + 1) << "out of order at " << i;
}

TEST_F(OrderRunnerTest, ClearDropsWhatWasNotCarriedOut) {
  Push(1);
  {
    MutexLock lock(&job_.side.mu());
    orders_.Clear();
  }
  EXPECT_FALSE(orders_.pending());
  Run();
  EXPECT_TRUE(Ran().empty());
}

}  // namespace
}  // namespace msched::hook

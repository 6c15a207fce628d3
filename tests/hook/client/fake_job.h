// A JobSide over a fake clock, device and link, and a gate page the test
// writes as the coordinator would: what the coordinator client's parts work
// over, without a driver, a socket or the client.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/coord_lockstep.h"
#include "client/job_gate.h"
#include "client/order_runner.h"
#include "coord/coord_shm.h"
#include "coord/job_side.h"
#include "msched/protocol.h"

namespace msched::hook::testing_fakes {

class FakeJob : public JobClock, public JobDevice, public CoordLink {
 public:
  // JobClock: moved only by the test.
  uint64_t Now() override { return now.load(); }
  void AdvanceTo(uint64_t t) override {
    uint64_t was = now.load();
    while (t > was && !now.compare_exchange_weak(was, t)) {
    }
  }
  // JobDevice: nothing to move.
  void Drain() override {}
  Ended EndSlice(uint64_t, bool) override { return {}; }
  uint64_t StartSlice(uint64_t, bool) override { return 0; }
  void FitBudget(uint64_t) override {}
  void WithdrawGrant() override {}
  proto::JobCounters Counters() override { return {}; }
  // CoordLink: what was sent, kept.
  void Send(const proto::Message& m) override {
    MutexLock lock(&sent_mu);
    sent.push_back(m);
  }
  uint64_t SliceEnd() override { return slice_end_in_force.load(); }

  // Welcomed with `idle_yield_ns`, and holding its turn from a Go at
  // `start` for a slice that ends at `slice_end`.
  void HoldTurn(uint64_t start, uint64_t slice_end, uint64_t idle_yield_ns = 0) {
    slice_end_in_force = slice_end;  // as the gate page says it
    proto::Welcome w;
    w.job = 1;
    w.idle_yield_ns = idle_yield_ns;
    {
      MutexLock lock(&side.mu());
      side.OnWelcome(w);
    }
    MutexLock order(&side.order_mu());
    side.OnGo(proto::Go{start, 1 << 30, slice_end, idle_yield_ns, false});
  }

  std::atomic<uint64_t> now{0};
  std::atomic<uint64_t> slice_end_in_force{proto::kNever};  // what SliceEnd answers
  Mutex sent_mu;
  std::vector<proto::Message> sent MSCHED_GUARDED_BY(sent_mu);
  JobSide side{*this, *this, *this};
};

// The coordinator's gate page, with the job's slot in LinkCounts.
class FakeGatePage {
 public:
  static constexpr uint32_t kSlot = 1;
  FakeGatePage() {
    Result<CoordShm> created = CoordShm::Create();
    EXPECT_TRUE(created.ok()) << created.status().message();
    page_.emplace(std::move(*created));
    slot().job.store(1);
    link.page.store(&*page_);
    link.slot_index.store(kSlot);
    link.job_id.store(1);
    link.gate.store(&slot());
  }
  ShmSlot& slot() { return page_->slot(kSlot); }
  // The coordinator lets the job run (or not) until `end`.
  void Set(bool open, uint64_t end = proto::kNever) {
    slot().slice_end_ns.store(end);
    slot().may_run.store(open ? 1 : 0);
  }

  LinkCounts link;

 private:
  std::optional<CoordShm> page_;
};

// What the gate and the idle timer work over: a job, its gate page, its
// orders (carried out by `handler`), and a GPU's lockstep, which never holds.
struct GateParts {
  explicit GateParts(OrderHandler& handler) : orders(job.side, handler) {}
  FakeJob job;
  FakeGatePage page;
  OrderRunner orders;
  std::unique_ptr<Lockstep> lockstep = Lockstep::None();
  JobGate gate{page.link, job.side, *lockstep, orders};
};

// True once `done()` holds, looking for up to five seconds.
inline bool Eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace msched::hook::testing_fakes

// Control-plane cost per switch, for 2, 8 and 32 jobs (the MSched paper
// reports its madvise-based equivalent under 1 ms for tens of tasks).
//
// Method: an in-process coordinator (the real CoordServer: socket, epoll,
// scheduler, gate page) and N client threads speaking the real protocol over
// UNIX sockets. Every job declares 60% of a 16 GiB GPU, so no two fit
// together and each switch hands the GPU from one job to the next.
// The jobs follow the protocol as the hook's coordinator client does: a job
// may run while its Go has come and its gate (coord_shm.h) is open, and its
// slice ends when its device clock passes the end published in its gate. The
// gate, not Go, is where a running job learns of its end: one that ran
// alone got Go without an end, and when others join, only its gate changes.
// A job's device clock is virtual: it jumps to each Go's start, and to the
// slice's end as soon as the gate shows one, so a slice's kernels, drain and
// swaps take no wall time. What is timed (wall clock) is from the outgoing
// job sending SliceEnd to the incoming job holding its Go with its gate
// open: two messages in, two out, the policy's decisions and the gate
// updates. Switches are counted once all N jobs are registered. Also
// counted: Go messages that find their gate still closed (the coordinator
// publishes gates first, so none should; the hook would wait 50 ms on one),
// and measured: the policy alone (Scheduler calls, no sockets).
// Everything runs under one deadline; a run that misses it fails, saying
// how far it got, rather than hang.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coord/coord_server.h"
#include "coord/coord_shm.h"
#include "coord/scheduler.h"
#include "coord/unix_socket.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kHbm = 16 * kGiB;
constexpr uint64_t kJobBytes = kHbm * 6 / 10;  // no two jobs fit together
constexpr uint64_t kSliceNs = 1000;            // device time, which is virtual
constexpr int kSwitches = 1000;                // measured per row
constexpr int kPolicySwitches = 20000;
constexpr auto kDeadline = std::chrono::seconds(30);  // for the whole run
constexpr int kIdleWaitMs = 10;                       // how often a job with nothing to do rechecks the deadline
constexpr int kGateRecheckMs = 1;                     // how often a job running without an end rechecks its gate

uint64_t WallNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// What the jobs of one row share.
struct Row {
  Row(int jobs, Clock::time_point deadline) : jobs(jobs), deadline(deadline) {}
  bool Over() const { return done.load() || Clock::now() >= deadline; }
  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (failure.empty()) failure = why;
    done.store(true);
  }

  const int jobs;
  const Clock::time_point deadline;
  std::atomic<int> welcomed{0};                // slices end only once every job is in
  std::atomic<uint64_t> slice_end_sent_ns{0};  // wall clock; 0: no switch under way
  std::atomic<int> late_gates{0};              // Go arrived before its gate opened: a coordinator bug
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<uint64_t> samples;  // wall ns per switch; guarded by mu
  std::string failure;            // guarded by mu
};

int MsLeft(const Row& row) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(row.deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(left, 0));
}

// The incoming job holds its Go; once its gate opens, the switch is over.
void OnGo(const msched::ShmSlot& gate, Row* row) {
  if (gate.may_run.load(std::memory_order_acquire) == 0) {
    row->late_gates.fetch_add(1);
    while (gate.may_run.load(std::memory_order_acquire) == 0 && !row->Over()) std::this_thread::yield();
  }
  const uint64_t now = WallNs();
  const uint64_t sent = row->slice_end_sent_ns.exchange(0);
  if (sent == 0) return;  // not a measured switch: the first Go, or one before every job was in
  std::lock_guard<std::mutex> lock(row->mu);
  row->samples.push_back(now - sent);
  if (row->samples.size() >= kSwitches) row->done.store(true);
}

// One job, until the row is done or its deadline passes.
void Job(const std::string& socket, Row* row) {
  using namespace msched;
  Result<int> fd = ConnectUnix(socket);
  if (!fd.ok()) return row->Fail(fd.status().ToString());
  proto::Hello h;
  h.declared_mem = h.allocated = kJobBytes;
  h.device_total = kHbm;
  h.name = "bench";
  int gate_fd = -1;
  Result<proto::Message> welcome =
      SendMessage(*fd, h).ok() ? ReceiveMessage(*fd, MsLeft(*row), &gate_fd) : Status::IoError("cannot send hello");
  const auto* w = welcome.ok() ? std::get_if<proto::Welcome>(&*welcome) : nullptr;
  Result<CoordShm> shm = w != nullptr ? CoordShm::OpenReadOnly(gate_fd) : Status::Corruption("no welcome");
  if (!shm.ok() || w->slot >= kShmSlots) {
    ::close(*fd);
    return row->Fail("job not welcomed: " + (welcome.ok() ? shm.status().ToString() : welcome.status().ToString()));
  }
  const ShmSlot& gate = shm->slot(w->slot);
  row->welcomed.fetch_add(1);
  uint64_t now = 0;       // the job's (virtual) device clock
  bool running = false;   // a Go came and no Stop since
  bool reported = false;  // this slice's end was sent
  while (!row->Over()) {
    if (running && !reported && row->welcomed.load() == row->jobs &&
        gate.may_run.load(std::memory_order_acquire) != 0) {
      const uint64_t end = gate.slice_end_ns.load(std::memory_order_relaxed);
      if (end != proto::kNever) {
        now = std::max(now, end);
        reported = true;
        row->slice_end_sent_ns.store(WallNs());
        if (!SendMessage(*fd, proto::SliceEnd{now}).ok()) row->Fail("cannot send a slice end");
      }
    }
    Result<proto::Message> m = ReceiveMessage(*fd, running && !reported ? kGateRecheckMs : kIdleWaitMs);
    if (!m.ok()) {
      if (m.status().code() == StatusCode::kUnavailable) continue;  // timed out: recheck
      if (!row->Over()) row->Fail("lost the coordinator: " + m.status().ToString());
      break;
    }
    if (auto* go = std::get_if<proto::Go>(&*m)) {
      now = std::max(now, go->start_ns);
      OnGo(gate, row);
      running = true;
      reported = false;
    } else if (auto* stop = std::get_if<proto::Stop>(&*m)) {
      running = false;
      proto::Stopped s;
      s.now_ns = now;
      s.working_set = kJobBytes;
      s.resident = kJobBytes - std::min(kJobBytes, stop->evict_bytes);
      if (!SendMessage(*fd, s).ok()) row->Fail("cannot send stopped");
    } else if (auto* refused = std::get_if<proto::Refused>(&*m)) {
      row->Fail("job refused: " + refused->reason);
    }
  }
  ::close(*fd);
}

double Percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(p * (v.size() - 1))]);
}

double Mean(const std::vector<uint64_t>& v) {
  double sum = 0;
  for (uint64_t x : v) sum += static_cast<double>(x);
  return v.empty() ? 0 : sum / v.size();
}

struct Measured {
  std::vector<uint64_t> samples;  // wall ns per switch
  int late_gates = 0;
};

// Real time per switch through the coordinator, with n jobs.
msched::Result<Measured> ThroughServer(int n, Clock::time_point deadline) {
  msched::ServerOptions o;
  o.socket_path = "/tmp/msched-cpbench-" + std::to_string(getpid()) + ".sock";
  o.policy.hbm_bytes = kHbm;
  o.policy.oversubscribe = 64;
  o.policy.fixed_slice_ns = kSliceNs;
  auto server = msched::CoordServer::Start(o);
  if (!server.ok()) return server.status();
  std::thread loop([&] { (*server)->Run(); });
  Row row(n, deadline);
  std::vector<std::thread> jobs;
  for (int i = 0; i < n; ++i) jobs.emplace_back(Job, o.socket_path, &row);
  for (std::thread& t : jobs) t.join();
  (*server)->Shutdown();
  loop.join();
  std::lock_guard<std::mutex> lock(row.mu);
  if (row.samples.size() < kSwitches) {
    const std::string why = !row.failure.empty()
                                ? row.failure
                                : "the deadline (" + std::to_string(kDeadline.count()) + " s for the whole run) passed";
    return msched::Status::Unavailable(
        why + ": " + std::to_string(row.samples.size()) + " of " + std::to_string(kSwitches) + " switches measured, " +
        std::to_string(row.welcomed.load()) + " of " + std::to_string(n) + " jobs registered, the coordinator made " +
        std::to_string((*server)->switches()) + " switches");
  }
  return Measured{std::move(row.samples), row.late_gates.load()};
}

// The policy alone: one switch is a slice end followed by the stop's answer.
double PolicyOnlyNs(int n) {
  msched::SchedulerOptions o;
  o.hbm_bytes = kHbm;
  o.oversubscribe = 64;
  o.fixed_slice_ns = kSliceNs;
  msched::Scheduler s(o);
  for (int i = 1; i <= n; ++i) {
    msched::Job j;
    j.id = static_cast<uint64_t>(i);
    j.declared = kJobBytes;
    s.Submit(j, 0, 0);
  }
  uint64_t now = 1;
  const auto t0 = Clock::now();
  for (int switches = 0; switches < kPolicySwitches; ++switches) {
    uint64_t active = 0;
    for (const auto& [id, j] : s.jobs()) {
      if (j.active) active = id;
    }
    s.SliceEnded(active, now += kSliceNs);
    msched::proto::Stopped st;
    st.now_ns = now;
    st.working_set = kJobBytes;
    s.Stopped(active, st);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kPolicySwitches;
}

}  // namespace

int main() {
  const Clock::time_point deadline = Clock::now() + kDeadline;
  std::printf(
      "control_plane_bench: the coordinator's cost per switch (method at the top of bench/control_plane_bench.cc)\n"
      "  timed:       wall clock (steady_clock), from the outgoing job sending SliceEnd to the incoming job\n"
      "               holding its Go with its gate open (SliceEnd in, Stop out, Stopped in, Go out, the\n"
      "               policy and the gate updates), through a real CoordServer over UNIX sockets\n"
      "  switches:    %d per row, counted once every job is registered; each job declares 60%% of 16 GiB,\n"
      "               so every switch hands the GPU from one job to the next\n"
      "  device time: virtual (%llu ns slices; clocks jump to each slice end), so drain and swaps cost nothing\n"
      "  policy only: Scheduler calls alone, no sockets or threads, %d switches, wall clock\n"
      "  deadline:    %lld s for the whole run\n\n",
      kSwitches, static_cast<unsigned long long>(kSliceNs), kPolicySwitches, static_cast<long long>(kDeadline.count()));
  std::printf("%6s %9s %10s %10s %10s %10s %11s %16s\n", "jobs", "switches", "mean us", "p50 us", "p99 us", "max us",
              "late gates", "policy only us");
  for (int n : {2, 8, 32}) {
    const msched::Result<Measured> m = ThroughServer(n, deadline);
    if (!m.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "control_plane_bench: FAILED at %d jobs: %s\n", n, m.status().message().c_str());
      return 1;
    }
    const std::vector<uint64_t>& v = m->samples;
    std::printf("%6d %9zu %10.1f %10.1f %10.1f %10.1f %11d %16.2f\n", n, v.size(), Mean(v) / 1e3,
                Percentile(v, 0.5) / 1e3, Percentile(v, 0.99) / 1e3, Percentile(v, 1.0) / 1e3, m->late_gates,
                PolicyOnlyNs(n) / 1e3);
  }
  std::printf(
      "\nlate gates: Go messages that reached their job before its gate opened (the coordinator\n"
      "publishes the gates before it sends anything, so 0; the hook would wait 50 ms on each)\n");
  return 0;
}

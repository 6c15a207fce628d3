// Control-plane cost per switch, for 2, 8 and 32 jobs (the MSched paper
// reports its madvise-based equivalent under 1 ms for tens of tasks).
//
// Method: an in-process coordinator (the real CoordServer: socket, epoll,
// scheduler, shared-memory updates) and N client threads speaking the real
// protocol over UNIX sockets. Every job declares 60% of a 16 GiB GPU, so no
// two fit together and each switch hands the GPU from one job to the next.
// A client that gets Go immediately reports its slice end; one that gets
// Stop immediately answers Stopped. The time from the outgoing job's slice
// end to the incoming job receiving Go is the control plane's share of a
// switch: two messages in, two out, the policy's decision and the slot
// updates; the jobs' own drain and swap time is excluded (it is zero here).
// Also measured: the policy alone (Scheduler calls, no sockets).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "coord/coord_server.h"
#include "coord/scheduler.h"
#include "coord/unix_socket.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kGiB = 1ull << 30;
constexpr int kSwitches = 400;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   Clock::now().time_since_epoch())
                                   .count());
}

struct Shared {
  std::mutex mu;
  uint64_t last_slice_end_ns = 0;  // when the outgoing job reported
  std::vector<uint64_t> samples;   // slice end -> next Go, ns
  std::atomic<bool> done{false};
};

void Client(const std::string& socket, Shared* shared) {
  msched::Result<int> fd = msched::ConnectUnix(socket);
  if (!fd.ok()) return;
  msched::proto::Hello h;
  h.declared_mem = h.allocated = 16 * kGiB * 6 / 10;
  h.device_total = 16 * kGiB;
  h.name = "bench";
  (void)msched::SendMessage(*fd, h);
  while (!shared->done.load()) {
    msched::Result<msched::proto::Message> m = msched::ReceiveMessage(*fd, 100);
    if (!m.ok()) {
      if (m.status().code() == msched::StatusCode::kUnavailable) continue;  // timed out: check done
      break;
    }
    if (auto* go = std::get_if<msched::proto::Go>(&*m)) {
      const uint64_t now = NowNs();
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        if (shared->last_slice_end_ns != 0) shared->samples.push_back(now - shared->last_slice_end_ns);
        shared->last_slice_end_ns = NowNs();
        if (shared->samples.size() >= kSwitches) shared->done.store(true);
      }
      if (go->slice_end_ns != msched::proto::kNever) (void)msched::SendMessage(*fd, msched::proto::SliceEnd{NowNs()});
    } else if (std::holds_alternative<msched::proto::Stop>(*m)) {
      msched::proto::Stopped s;
      s.now_ns = NowNs();
      s.working_set = h.declared_mem;
      (void)msched::SendMessage(*fd, s);
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

// Real time per switch through the coordinator, with n jobs.
std::vector<uint64_t> ThroughServer(int n) {
  msched::ServerOptions o;
  o.socket_path = "/tmp/msched-cpbench-" + std::to_string(getpid()) + ".sock";
  o.policy.hbm_bytes = 16 * kGiB;
  o.policy.oversubscribe = 64;
  o.policy.fixed_slice_ns = 1000;  // every report ends a slice
  auto server = msched::CoordServer::Start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "control_plane_bench: %s\n", server.status().ToString().c_str());
    return {};
  }
  std::thread loop([&] { (*server)->Run(); });
  Shared shared;
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) clients.emplace_back(Client, o.socket_path, &shared);
  for (std::thread& t : clients) t.join();
  (*server)->Shutdown();
  loop.join();
  return shared.samples;
}

// The policy alone: one switch is a slice end followed by the stop's answer.
double PolicyOnlyNs(int n) {
  msched::SchedulerOptions o;
  o.hbm_bytes = 16 * kGiB;
  o.oversubscribe = 64;
  o.fixed_slice_ns = 1000;
  msched::Scheduler s(o);
  for (int i = 1; i <= n; ++i) {
    msched::Job j;
    j.id = static_cast<uint64_t>(i);
    j.declared = 16 * kGiB * 6 / 10;
    s.Submit(j, 0, 0);
  }
  uint64_t now = 1;
  const auto t0 = Clock::now();
  int switches = 0;
  for (; switches < 20000; ++switches) {
    uint64_t active = 0;
    for (const auto& [id, j] : s.jobs()) {
      if (j.active) active = id;
    }
    s.SliceEnded(active, now += 1000);
    msched::proto::Stopped st;
    st.now_ns = now;
    st.working_set = 16 * kGiB * 6 / 10;
    s.Stopped(active, st);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / switches;
}

}  // namespace

int main() {
  std::printf("control-plane cost per switch (real time; %d switches per row; see the method at the top of\n"
              "bench/control_plane_bench.cc): slice end -> stop -> stopped -> go through mschedd's engine\n\n",
              kSwitches);
  std::printf("%6s %12s %12s %12s %16s\n", "jobs", "mean us", "p50 us", "p99 us", "policy only us");
  for (int n : {2, 8, 32}) {
    const std::vector<uint64_t> v = ThroughServer(n);
    std::printf("%6d %12.1f %12.1f %12.1f %16.2f\n", n, Mean(v) / 1e3, Percentile(v, 0.5) / 1e3,
                Percentile(v, 0.99) / 1e3, PolicyOnlyNs(n) / 1e3);
  }
  return 0;
}

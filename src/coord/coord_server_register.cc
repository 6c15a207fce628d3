// Registration: a job's hello becomes a Job for the scheduler and a slot
// in the gate page, within the limits a shared coordinator sets its guests.
#include "coord/coord_server.h"

namespace msched {

void CoordServer::HandleHello(Conn& c, const proto::Hello& hello) {
  const int fd = c.fd;
  auto refuse = [&](const std::string& reason) {
    Log("refused a job from " + Who(c.peer.uid, c.peer.pid) + ": " + reason);
    (void)SendMessage(fd, proto::Refused{reason});
    Close(fd, "refused");
  };
  if (!Privileged(c.peer.uid) && ConnectionsOf(c.peer.uid, true) >= options_.max_jobs_per_user) {
    return refuse("uid " + std::to_string(c.peer.uid) + " already has " + std::to_string(options_.max_jobs_per_user) +
                  " jobs here, the most one user may have");
  }
  uint32_t slot = kShmSlots;
  for (uint32_t i = 0; i < kShmSlots && slot == kShmSlots; ++i) {
    if (shm_.slot(i).job.load(std::memory_order_relaxed) == 0) slot = i;
  }
  if (slot == kShmSlots) return refuse("the coordinator serves " + std::to_string(kShmSlots) + " jobs at most");
  Job j;
  j.id = next_job_++;
  j.uid = c.peer.uid;
  j.pid = c.peer.pid;
  j.name = hello.name.empty() ? "pid" + std::to_string(c.peer.pid) : hello.name;
  j.job_class = hello.job_class;
  j.priority = hello.priority;
  if (!Privileged(c.peer.uid) && j.priority > options_.max_guest_priority) {
    Log("job " + std::to_string(j.id) + " of " + Who(c.peer.uid, c.peer.pid) + " asked for priority " +
        std::to_string(j.priority) + "; other users' jobs may have at most " +
        std::to_string(options_.max_guest_priority));
    j.priority = options_.max_guest_priority;
  }
  j.declared = hello.declared_mem;
  j.allocated = hello.allocated;
  c.job = j.id;
  fd_of_job_[j.id] = fd;
  slot_of_job_[j.id] = slot;
  shm_.slot(slot).may_run.store(0, std::memory_order_relaxed);
  shm_.slot(slot).messages_handled.store(0, std::memory_order_relaxed);
  shm_.slot(slot).orders_sent.store(0, std::memory_order_relaxed);
  shm_.slot(slot).pid.store(c.peer.pid, std::memory_order_relaxed);
  shm_.slot(slot).job.store(j.id, std::memory_order_release);
  const uint64_t id = j.id;
  const std::string name = j.name;
  // A guest's report of the GPU's size is not a fact about the GPU: one
  // claiming 4 KiB would have every later job refused.
  const uint64_t device_total = Privileged(c.peer.uid) ? hello.device_total : 0;
  const Commands commands = scheduler_.Submit(std::move(j), device_total, hello.now_ns);
  const Job* added = scheduler_.Find(id);
  proto::Welcome w;
  w.job = id;
  w.slot = slot;
  w.admitted = added != nullptr && added->state == JobState::kRunning;
  w.idle_yield_ns = options_.policy.idle_yield_ns;
  Log("job " + std::to_string(id) + " (" + name + ", " + Who(c.peer.uid, c.peer.pid) +
      ") registered: " + FormatBytes(added ? added->Footprint() : 0) + (w.admitted ? ", admitted" : ", queued"));
  // The gates before the welcome: once the new job blocks, waiting for its
  // turn, the running ones already see the slice end its arrival brought.
  SyncSlots();
  if (!SendMessage(fd, w, shm_.reader_fd()).ok()) return Close(fd, "cannot write to it");
  Apply(commands);
}

size_t CoordServer::ConnectionsOf(uint32_t uid, bool jobs_only) const {
  size_t n = 0;
  for (const auto& [fd, c] : conns_) n += c->peer.uid == uid && (!jobs_only || c->job != 0);
  return n;
}

}  // namespace msched

#include "shared_device.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace msim {

inline constexpr uint64_t kMagic = 0x6d73696d44657631ull;  // "msimDev1"
inline constexpr uint32_t kLayoutVersion = 12;             // 12: retained units

struct DeviceHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t initialized;
  pthread_mutex_t mu;
  DeviceProfile profile;
  uint64_t capacity;
  uint64_t used;  // device allocations + resident and retained units + evictions in flight
  uint64_t compute_free;
  uint64_t h2d_free;
  uint64_t d2h_free;
  uint64_t device_now;
  uint32_t chunk_capacity;
  uint32_t chunk_high_water;
  uint32_t free_head;
  uint32_t lru_head;
  uint32_t lru_tail;
  uint32_t retained_head;  // emptied first
  uint32_t retained_tail;
  uint32_t rel_head;
  uint32_t rel_count;
  uint32_t lock_count;
  uint32_t barrier_arrived;
  // Lockstep hand-offs (WaitForTurn): a process bumps turn_seq, a futex
  // word, whenever it publishes a change that could end a peer's wait, and
  // wakes the waiters (counted in turn_waiters) if there are any. A waiter
  // killed while counted leaves the count high for good: the others then
  // make a futex call with each change, which wakes no one and costs a
  // system call.
  uint32_t turn_seq;
  uint32_t turn_waiters;
  uint64_t pending_bytes;
  ReleaseEntry releases[kMaxReleases];
  ProcSlot procs[kMaxProcs];
};

namespace {

uint64_t MaxChunks() {
  if (const char* v = std::getenv("MSIM_MAX_CHUNKS")) {
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    if (n >= 16 && n <= (1ull << 24)) return n;
  }
  return 1ull << 19;  // 1 TiB of managed memory across all processes
}

size_t SegmentBytes(uint64_t chunks) { return sizeof(DeviceHeader) + chunks * sizeof(ChunkRec); }

void InitHeader(DeviceHeader* h, const DeviceProfile& profile, uint64_t hbm_override, uint64_t chunks) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  h->profile = profile;
  h->capacity = hbm_override ? hbm_override : profile.hbm_bytes;
  h->profile.hbm_bytes = h->capacity;
  h->chunk_capacity = static_cast<uint32_t>(chunks);
  h->free_head = kNone;
  h->lru_head = h->lru_tail = kNone;
  h->retained_head = h->retained_tail = kNone;
  h->layout_version = kLayoutVersion;
  h->magic = kMagic;
  __atomic_store_n(&h->initialized, 1u, __ATOMIC_RELEASE);
}

// One of the doubly linked lists of chunk records (the LRU list, the
// retained list): its links in each record, its ends in the header, and the
// flag its members carry.
struct ChunkList {
  uint32_t ChunkRec::*prev;
  uint32_t ChunkRec::*next;
  uint32_t& head;
  uint32_t& tail;
  uint32_t flag;
};

void Unlink(ChunkRec* chunks, const ChunkList& l, uint32_t idx) {
  ChunkRec& c = chunks[idx];
  if (!(c.flags & l.flag)) return;
  if (c.*l.prev != kNone)
    chunks[c.*l.prev].*l.next = c.*l.next;
  else
    l.head = c.*l.next;
  if (c.*l.next != kNone)
    chunks[c.*l.next].*l.prev = c.*l.prev;
  else
    l.tail = c.*l.prev;
  c.*l.prev = c.*l.next = kNone;
  c.flags &= ~l.flag;
}

void Append(ChunkRec* chunks, const ChunkList& l, uint32_t idx) {
  ChunkRec& c = chunks[idx];
  c.*l.prev = l.tail;
  c.*l.next = kNone;
  if (l.tail != kNone)
    chunks[l.tail].*l.next = idx;
  else
    l.head = idx;
  l.tail = idx;
  c.flags |= l.flag;
}

}  // namespace

namespace {

// Field `n` (3 or later) of /proc/<pid>/stat; "" when unreadable.
std::string StatField(pid_t pid, int n) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "";
  // The command name (field 2) may contain spaces; fields resume after ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= n && rest >> field; ++i) {
    if (i == n) return field;
  }
  return "";
}

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The futex is shared between processes (no FUTEX_PRIVATE_FLAG): the word
// lives in the device's shared mapping.
void FutexWait(uint32_t* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

}  // namespace

uint64_t ProcessStartTicks(pid_t pid) { return std::strtoull(StatField(pid, 22).c_str(), nullptr, 10); }

bool ProcessStopped(pid_t pid) {
  const std::string state = StatField(pid, 3);
  return state == "T" || state == "t";
}

SharedDevice* SharedDevice::Attach(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                                   uint64_t rank, std::string* error) {
  SharedDevice* d = Map(name, profile, hbm_override, error);
  if (d == nullptr) return nullptr;
  DeviceLock lock(d);
  d->ReclaimDeadProcesses();
  for (int i = 0; i < kMaxProcs; ++i) {
    ProcSlot& p = d->h_->procs[i];
    if (!p.in_use) {
      // Peers read slots without the lock: the slot is filled in before it is
      // marked in use, so none sees a claimed slot with a half-written pid or clock.
      p = ProcSlot{getpid(), 0, rank, ProcessStartTicks(getpid()), 0, d->h_->device_now, 0, 0, 0, 0};
      __atomic_store_n(&p.in_use, 1u, __ATOMIC_RELEASE);
      d->slot_ = i;
      break;
    }
  }
  if (d->slot_ < 0) {
    *error = "shared device has no free process slot (" + std::to_string(kMaxProcs) + " processes attached)";
    return nullptr;  // the mapping stays; this process runs without a device
  }
  return d;
}

SharedDevice* SharedDevice::Observe(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                                    std::string* error) {
  if (name.empty()) {
    *error = "a private device cannot be observed";
    return nullptr;
  }
  return Map(name, profile, hbm_override, error);
}

uint64_t SharedDevice::LatestTime() {
  uint64_t t = h_->device_now;
  for (const ProcSlot& p : h_->procs) {
    if (__atomic_load_n(&p.in_use, __ATOMIC_ACQUIRE)) t = std::max(t, __atomic_load_n(&p.host_time, __ATOMIC_RELAXED));
  }
  return t;
}

SharedDevice* SharedDevice::Map(const std::string& name, const DeviceProfile& profile, uint64_t hbm_override,
                                std::string* error) {
  const uint64_t chunks = MaxChunks();
  void* mem = MAP_FAILED;
  if (name.empty()) {
    mem =
        mmap(nullptr, SegmentBytes(chunks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      *error = std::string("cannot map the private device: ") + std::strerror(errno);
      return nullptr;
    }
    InitHeader(static_cast<DeviceHeader*>(mem), profile, hbm_override, chunks);
  } else {
    const std::string shm = "/msim-" + name;
    bool created = true;
    int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
      created = false;
      fd = shm_open(shm.c_str(), O_RDWR, 0600);
    }
    if (fd < 0) {
      *error = "cannot open shared device " + shm + ": " + std::strerror(errno);
      return nullptr;
    }
    if (created && ftruncate(fd, static_cast<off_t>(SegmentBytes(chunks))) != 0) {
      *error = "cannot size shared device " + shm + ": " + std::strerror(errno);
      close(fd);
      shm_unlink(shm.c_str());
      return nullptr;
    }
    // A creator sizes the segment before initialising it; wait for both.
    struct stat st {};
    DeviceHeader* h = nullptr;
    for (int tries = 0; tries < 2000; ++tries) {
      if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(DeviceHeader)) {
        if (mem == MAP_FAILED) {
          mem = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        }
        h = static_cast<DeviceHeader*>(mem);
        if (mem != MAP_FAILED && (created || __atomic_load_n(&h->initialized, __ATOMIC_ACQUIRE))) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    close(fd);
    if (mem == MAP_FAILED) {
      *error = "cannot map shared device " + shm + ": " + std::strerror(errno);
      return nullptr;
    }
    if (created) {
      InitHeader(h, profile, hbm_override, chunks);
    } else if (!__atomic_load_n(&h->initialized, __ATOMIC_ACQUIRE) || h->magic != kMagic ||
               h->layout_version != kLayoutVersion) {
      *error =
          "shared device " + shm + " was made by an incompatible simulator or never initialised; remove /dev" + shm;
      return nullptr;
    }
  }
  auto* d = new SharedDevice();
  d->h_ = static_cast<DeviceHeader*>(mem);
  d->chunks_ = reinterpret_cast<ChunkRec*>(static_cast<char*>(mem) + sizeof(DeviceHeader));
  return d;
}

void SharedDevice::Lock() {
  int rc = pthread_mutex_lock(&h_->mu);
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(&h_->mu);
    Repair();
    ReclaimDeadProcesses();
  }
  // Reclaim now and then, so memory of a killed process does not wait for an
  // allocation failure to be found.
  if ((++h_->lock_count & 1023) == 0) ReclaimDeadProcesses();
}

void SharedDevice::Unlock() { pthread_mutex_unlock(&h_->mu); }

const DeviceProfile& SharedDevice::profile() const { return h_->profile; }
uint64_t SharedDevice::capacity() const { return h_->capacity; }
uint64_t SharedDevice::used() const { return h_->used; }
uint64_t& SharedDevice::compute_free() { return h_->compute_free; }
uint64_t& SharedDevice::h2d_free() { return h_->h2d_free; }
uint64_t& SharedDevice::d2h_free() { return h_->d2h_free; }
uint64_t& SharedDevice::device_now() { return h_->device_now; }
ProcSlot& SharedDevice::proc(int i) { return h_->procs[i]; }
ChunkRec& SharedDevice::chunk(uint32_t idx) { return chunks_[idx]; }
uint32_t SharedDevice::LruHead() const { return h_->lru_head; }
uint64_t SharedDevice::pending_release_bytes() const { return h_->pending_bytes; }

bool SharedDevice::ReserveDevice(uint64_t bytes) {
  if (h_->capacity - h_->used < bytes) return false;
  h_->used += bytes;
  if (slot_ >= 0) h_->procs[slot_].device_bytes += bytes;
  return true;
}

void SharedDevice::ReleaseDevice(uint64_t bytes) {
  h_->used -= std::min(bytes, h_->used);
  if (slot_ >= 0) {
    uint64_t& held = h_->procs[slot_].device_bytes;
    held -= std::min(bytes, held);
  }
}

uint32_t SharedDevice::AllocChunk(uint64_t va, uint32_t valid_mask) {
  uint32_t idx = h_->free_head;
  if (idx != kNone) {
    h_->free_head = chunks_[idx].next_free;
  } else if (h_->chunk_high_water < h_->chunk_capacity) {
    idx = h_->chunk_high_water++;
  } else {
    return kNone;
  }
  chunks_[idx] = ChunkRec{va, 0, 0, 0, slot_, valid_mask, 0, 0, 0, 0, kNone, kNone, kNone, 0, 0, 0, kNone, kNone};
  return idx;
}

void SharedDevice::FreeChunk(uint32_t idx) {
  ChunkRec& c = chunks_[idx];
  if (c.owner < 0) return;
  if (c.resident_mask) DropResident(idx, c.resident_mask, 0);
  // Freeing the block frees the chunk it kept. (cuMemFree waits for the
  // range's copies, so a copy out still under way is over by then.)
  if (c.retained_mask) {
    const uint64_t bytes = std::popcount(c.retained_mask) * kUnit;
    Unretain(idx, c.retained_mask);
    h_->used -= std::min(bytes, h_->used);
  }
  c.owner = -1;
  c.next_free = h_->free_head;
  h_->free_head = idx;
}

void SharedDevice::LruUnlink(uint32_t idx) {
  Unlink(chunks_, {&ChunkRec::lru_prev, &ChunkRec::lru_next, h_->lru_head, h_->lru_tail, kInLru}, idx);
}

void SharedDevice::LruAppend(uint32_t idx) {
  Append(chunks_, {&ChunkRec::lru_prev, &ChunkRec::lru_next, h_->lru_head, h_->lru_tail, kInLru}, idx);
}

void SharedDevice::RetainedUnlink(uint32_t idx) {
  Unlink(chunks_,
         {&ChunkRec::retained_prev, &ChunkRec::retained_next, h_->retained_head, h_->retained_tail, kInRetained}, idx);
}

void SharedDevice::RetainedAppend(uint32_t idx) {
  Append(chunks_,
         {&ChunkRec::retained_prev, &ChunkRec::retained_next, h_->retained_head, h_->retained_tail, kInRetained}, idx);
}

void SharedDevice::AddResident(uint32_t idx, uint32_t units, uint64_t migrated_at, uint64_t ready_at) {
  ChunkRec& c = chunks_[idx];
  const uint32_t added = units & c.valid_mask & ~c.resident_mask;
  if (added == 0) return;
  // The block's own retained units hold their HBM already.
  const uint32_t reused = added & c.retained_mask;
  if (reused) Unretain(idx, reused);
  c.resident_mask |= added;
  h_->used += std::popcount(added & ~reused) * kUnit;
  c.migrated_at = migrated_at;
  c.ready_at = std::max(c.ready_at, ready_at);
  // The stock driver moves a block to the LRU tail whenever memory is
  // allocated for it: order is by migration time, not by access.
  LruUnlink(idx);
  LruAppend(idx);
}

uint32_t SharedDevice::ClearResident(uint32_t idx, uint32_t units) {
  ChunkRec& c = chunks_[idx];
  const uint32_t cleared = units & c.resident_mask;
  c.resident_mask &= ~cleared;
  if (cleared != 0 && c.resident_mask == 0) LruUnlink(idx);
  return cleared;
}

void SharedDevice::DropResident(uint32_t idx, uint32_t units, uint64_t release_at) {
  const uint32_t dropped = ClearResident(idx, units);
  if (dropped == 0) return;
  const uint64_t bytes = std::popcount(dropped) * kUnit;
  if (release_at == 0) {
    h_->used -= std::min(bytes, h_->used);
    return;
  }
  // Copies on the D2H engine finish in order, so the queue stays sorted;
  // when full, the new release joins the last entry (a slightly late free).
  if (h_->rel_count == kMaxReleases) {
    ReleaseEntry& last = h_->releases[(h_->rel_head + h_->rel_count - 1) % kMaxReleases];
    last.at = std::max(last.at, release_at);
    last.bytes += bytes;
  } else {
    h_->releases[(h_->rel_head + h_->rel_count) % kMaxReleases] = {release_at, bytes};
    ++h_->rel_count;
  }
  h_->pending_bytes += bytes;
}

void SharedDevice::RetainResident(uint32_t idx, uint32_t units, uint64_t emptied_at) {
  const uint32_t emptied = ClearResident(idx, units);
  if (emptied == 0) return;
  ChunkRec& c = chunks_[idx];
  if (c.retained_mask == 0) RetainedAppend(idx);
  c.retained_mask |= emptied;
  c.emptied_at = std::max(c.emptied_at, emptied_at);
}

void SharedDevice::Unretain(uint32_t idx, uint32_t units) {
  ChunkRec& c = chunks_[idx];
  c.retained_mask &= ~units;
  if (c.retained_mask == 0) {
    RetainedUnlink(idx);
    c.emptied_at = 0;
  }
}

uint64_t SharedDevice::ReclaimRetained(uint64_t bytes, uint64_t t, uint32_t exclude) {
  for (uint32_t idx = h_->retained_head; idx != kNone && Free() + h_->pending_bytes < bytes;) {
    ChunkRec& c = chunks_[idx];
    const uint32_t next = c.retained_next;
    if (idx != exclude) {
      t = std::max(t, c.emptied_at);
      const uint64_t freed = std::popcount(c.retained_mask) * kUnit;
      Unretain(idx, c.retained_mask);
      h_->used -= std::min(freed, h_->used);
    }
    idx = next;
  }
  return t;
}

uint64_t SharedDevice::ApplyReleases(uint64_t t) {
  while (h_->rel_count && h_->releases[h_->rel_head].at <= t) PopRelease();
  return h_->pending_bytes;
}

uint64_t SharedDevice::PopRelease() {
  if (h_->rel_count == 0) return 0;
  const ReleaseEntry e = h_->releases[h_->rel_head];
  h_->rel_head = (h_->rel_head + 1) % kMaxReleases;
  --h_->rel_count;
  h_->pending_bytes -= std::min(e.bytes, h_->pending_bytes);
  h_->used -= std::min(e.bytes, h_->used);
  return e.at;
}

void SharedDevice::ReleaseSlot(int slot) {
  if (slot < 0 || slot >= kMaxProcs || !h_->procs[slot].in_use) return;
  for (uint32_t i = 0; i < h_->chunk_high_water; ++i) {
    if (chunks_[i].owner == slot) FreeChunk(i);
  }
  ProcSlot& p = h_->procs[slot];
  h_->used -= std::min(p.device_bytes, h_->used);
  h_->device_now = std::max(h_->device_now, p.host_time);
  __atomic_store_n(&p.in_use, 0u, __ATOMIC_RELEASE);  // first: lockless readers skip it from here
  p = ProcSlot{};
  NotifyTurn();
}

bool SharedDevice::Gone(const ProcSlot& p) {
  return (kill(p.pid, 0) != 0 && errno == ESRCH) || ProcessStartTicks(p.pid) != p.start_ticks;
}

int SharedDevice::ReclaimDeadProcesses() {
  int reclaimed = 0;
  for (int i = 0; i < kMaxProcs; ++i) {
    ProcSlot& p = h_->procs[i];
    if (!p.in_use || i == slot_) continue;
    if (Gone(p)) {
      ReleaseSlot(i);
      ++reclaimed;
    }
  }
  return reclaimed;
}

void SharedDevice::Repair() {
  // Recompute what can be derived from the chunk records and slots: the
  // free list, the LRU list (by migration time), the retained list (by the
  // end of their copies out) and the HBM in use. Pending releases are
  // applied at once.
  std::vector<uint32_t> resident, retained;
  uint64_t used = 0;
  h_->free_head = kNone;
  for (uint32_t i = h_->chunk_high_water; i-- > 0;) {
    ChunkRec& c = chunks_[i];
    if (c.owner < 0) {
      c.next_free = h_->free_head;
      h_->free_head = i;
    }
  }
  for (uint32_t i = 0; i < h_->chunk_high_water; ++i) {
    ChunkRec& c = chunks_[i];
    c.flags &= ~(kInLru | kInRetained);
    c.lru_prev = c.lru_next = kNone;
    c.retained_prev = c.retained_next = kNone;
    c.resident_mask &= c.valid_mask;
    c.retained_mask &= c.valid_mask & ~c.resident_mask;
    c.host_mask &= c.valid_mask;
    c.host_pages_mask |= c.host_mask;
    c.known_mask |= c.resident_mask | c.host_mask;
    if (c.owner >= 0 && c.resident_mask) {
      resident.push_back(i);
      used += std::popcount(c.resident_mask) * kUnit;
    }
    if (c.owner >= 0 && c.retained_mask) {
      retained.push_back(i);
      used += std::popcount(c.retained_mask) * kUnit;
    }
  }
  std::sort(resident.begin(), resident.end(),
            [&](uint32_t a, uint32_t b) { return chunks_[a].migrated_at < chunks_[b].migrated_at; });
  h_->lru_head = h_->lru_tail = kNone;
  for (uint32_t i : resident) LruAppend(i);
  std::stable_sort(retained.begin(), retained.end(),
                   [&](uint32_t a, uint32_t b) { return chunks_[a].emptied_at < chunks_[b].emptied_at; });
  h_->retained_head = h_->retained_tail = kNone;
  for (uint32_t i : retained) RetainedAppend(i);
  for (int i = 0; i < kMaxProcs; ++i) {
    if (h_->procs[i].in_use) used += h_->procs[i].device_bytes;
  }
  h_->used = used;
  h_->rel_count = h_->rel_head = 0;
  h_->pending_bytes = 0;
}

}  // namespace msim

namespace msim {

void SharedDevice::NotifyTurn() {
  // Sequentially consistent, as is the waiter's count-then-read in
  // WaitForTurn: either this sees the waiter counted and wakes it, or the
  // waiter reads the new sequence number and, with it, the change.
  __atomic_add_fetch(&h_->turn_seq, 1u, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&h_->turn_waiters, __ATOMIC_SEQ_CST) != 0) FutexWakeAll(&h_->turn_seq);
}

void SharedDevice::PublishHostTime(uint64_t t) {
  if (slot_ < 0) return;
  if (__atomic_exchange_n(&h_->procs[slot_].host_time, t, __ATOMIC_RELEASE) != t) NotifyTurn();
}

void SharedDevice::EnterCall(uint64_t t) {
  if (slot_ < 0) return;
  ProcSlot& me = h_->procs[slot_];
  __atomic_add_fetch(&me.in_call, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&me.last_active_ns, MonotonicNs(), __ATOMIC_RELAXED);
  PublishHostTime(t);  // moved only if a host phase moved the clock since the last call
}

void SharedDevice::LeaveCall(uint64_t t) {
  if (slot_ < 0) return;
  ProcSlot& me = h_->procs[slot_];
  __atomic_store_n(&me.host_time, t, __ATOMIC_RELEASE);
  __atomic_store_n(&me.last_active_ns, MonotonicNs(), __ATOMIC_RELAXED);
  __atomic_sub_fetch(&me.in_call, 1, __ATOMIC_RELAXED);
  NotifyTurn();
}

void SharedDevice::SetBlocked(bool blocked, uint64_t wakeups_seen) {
  if (slot_ < 0) return;
  // The count first: a peer that sees the flag sees the count it goes with.
  __atomic_store_n(&h_->procs[slot_].wakeups_seen, wakeups_seen, __ATOMIC_RELEASE);
  __atomic_store_n(&h_->procs[slot_].blocked, blocked ? 1u : 0u, __ATOMIC_RELEASE);
  NotifyTurn();
}

bool SharedDevice::PeerBlocked(int32_t pid, uint64_t* wakeups_seen) const {
  for (int i = 0; i < kMaxProcs; ++i) {
    const ProcSlot& q = h_->procs[i];
    if (!__atomic_load_n(&q.in_use, __ATOMIC_ACQUIRE) || __atomic_load_n(&q.pid, __ATOMIC_RELAXED) != pid) continue;
    if (!__atomic_load_n(&q.blocked, __ATOMIC_ACQUIRE)) return false;
    *wakeups_seen = __atomic_load_n(&q.wakeups_seen, __ATOMIC_ACQUIRE);
    return true;
  }
  return false;
}

void SharedDevice::WaitForTurn(uint64_t t) {
  if (slot_ < 0) return;
  const uint64_t start = MonotonicNs();
  ProcSlot& me = h_->procs[slot_];
  // For each peer that has held us back: its activity stamp when first seen
  // and the moment that stamp last changed. Only a peer whose stamp stands
  // still is given up on; one that is making calls, or waiting its own turn,
  // is waited for however long it takes in real time.
  static_assert(kMaxProcs <= 64, "one bit of `watched` per slot");
  uint64_t watched = 0;
  std::array<uint64_t, kMaxProcs> stamp;
  std::array<uint64_t, kMaxProcs> still_since;
  bool counted = false;  // in turn_waiters
  for (;;) {
    const uint32_t seq = __atomic_load_n(&h_->turn_seq, __ATOMIC_SEQ_CST);
    const uint64_t now = MonotonicNs();
    bool behind = false;
    for (int i = 0; i < kMaxProcs && !behind; ++i) {
      const ProcSlot& q = h_->procs[i];
      if (i == slot_ || !__atomic_load_n(&q.in_use, __ATOMIC_ACQUIRE)) continue;
      if (__atomic_load_n(&q.blocked, __ATOMIC_ACQUIRE)) continue;
      const uint64_t q_time = __atomic_load_n(&q.host_time, __ATOMIC_ACQUIRE);
      if (stuck_[i].pid.load(std::memory_order_relaxed) == q.pid &&
          stuck_[i].host_time.load(std::memory_order_relaxed) == q_time) {
        continue;
      }
      const uint64_t active = __atomic_load_n(&q.last_active_ns, __ATOMIC_RELAXED);
      const bool idle = IdleAt(now, active, __atomic_load_n(&q.in_call, __ATOMIC_RELAXED));
      const bool first = q_time < t || (q_time == t && (q.rank < me.rank || (q.rank == me.rank && i < slot_)));
      behind = !idle && first;
      if (!behind) continue;
      if (!(watched >> i & 1) || stamp[i] != active) {
        watched |= uint64_t{1} << i;
        stamp[i] = active;
        still_since[i] = now;
      }
      // One that holds us back for long may have died or been stopped (a
      // debugger, SIGSTOP) inside a call: no one to wait for. A dead one's
      // slot is reclaimed later, under the lock.
      if (now - start > kIdleMs * 1000000 && (Gone(q) || ProcessStopped(q.pid))) {
        behind = false;
        stuck_[i].pid.store(q.pid, std::memory_order_relaxed);
        stuck_[i].host_time.store(q_time, std::memory_order_relaxed);
      } else if (now - still_since[i] > kMaxStillMs * 1000000) {
        behind = false;  // inside one call for that long: blocked on something outside the device
      }
    }
    if (!behind) break;
    // Waiting is activity: peers behind us in turn see a stamp that moves and
    // keep waiting for us rather than taking us for stuck.
    __atomic_store_n(&me.last_active_ns, now, __ATOMIC_RELAXED);
    if (!counted) {
      // Counted before the state is read again, so a change made from here
      // on either shows in that reading or wakes the futex.
      __atomic_add_fetch(&h_->turn_waiters, 1u, __ATOMIC_SEQ_CST);
      counted = true;
      continue;
    }
    AwaitChange(seq, now);
  }
  if (counted) __atomic_sub_fetch(&h_->turn_waiters, 1u, __ATOMIC_SEQ_CST);
}

void SharedDevice::AwaitChange(uint32_t seq, uint64_t now) {
  // Yields first, for kTurnYieldNs: on an idle host the peer's change
  // usually comes within microseconds, sooner than a futex wake-up, and a
  // yield gives it the core. On a host with more runnable threads than
  // cores, one yield can hand the core to another program for a whole slice
  // (milliseconds, at each of thousands of hand-offs: a four-process run
  // under CPU load took minutes), so a yield that long stops the yielding
  // for kBusyHostNs. Then it sleeps on the futex until a peer publishes a
  // change, or for kTurnRecheckNs: idleness and death are judged by the
  // clock, and no peer announces them.
  uint64_t at = now;
  while (at - now < kTurnYieldNs && at >= busy_host_until_.load(std::memory_order_relaxed)) {
    std::this_thread::yield();
    const uint64_t after = MonotonicNs();
    if (after - at > kSlowYieldNs) busy_host_until_.store(after + kBusyHostNs, std::memory_order_relaxed);
    at = after;
    if (__atomic_load_n(&h_->turn_seq, __ATOMIC_ACQUIRE) != seq) return;
  }
  FutexWait(&h_->turn_seq, seq, kTurnRecheckNs);
}

}  // namespace msim

namespace msim {

void SharedDevice::ArriveAndWait(uint32_t n, uint64_t timeout_ms) {
  if (n <= 1) return;
  const uint32_t me = __atomic_fetch_add(&h_->barrier_arrived, 1u, __ATOMIC_ACQ_REL);
  const uint32_t target = (me / n + 1) * n;
  const uint64_t start = MonotonicNs();
  // Waiting here counts as activity: a member still waiting when the others
  // leave must not look idle to them, or they would run ahead of it.
  auto touch = [this] {
    if (slot_ >= 0) __atomic_store_n(&h_->procs[slot_].last_active_ns, MonotonicNs(), __ATOMIC_RELAXED);
  };
  while (__atomic_load_n(&h_->barrier_arrived, __ATOMIC_ACQUIRE) < target) {
    touch();
    if (MonotonicNs() - start > timeout_ms * 1000000) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  touch();
}

}  // namespace msim

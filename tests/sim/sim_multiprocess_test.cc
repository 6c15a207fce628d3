// Several processes on one shared simulated device: they contend for HBM,
// evict each other's managed memory, see the chunks a peer's managed memory
// left on the device when moved to the host as used yet allocate them, a
// process killed with SIGKILL (even inside a driver call) gives its memory
// back without wedging the others, and one that exits holding VMM memory or
// such chunks gives them back.
// Each scenario runs in child processes, which attach to a device named for
// the test; this process never initialises the driver.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "shared_device.h"
#include "sim_test_util.h"

namespace msim_test {
namespace {

// A child process that attaches to the shared device and runs `fn`, which
// returns its exit code. Pipes let the parent and child step together.
class Child {
 public:
  Child(const std::string& device, std::function<int(Child&)> fn) {
    if (pipe(to_child_) != 0 || pipe(to_parent_) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      setenv("MSIM_DEVICE", device.c_str(), 1);
      _exit(fn(*this));
    }
  }
  ~Child() {
    if (!waited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    for (int fd : {to_child_[0], to_child_[1], to_parent_[0], to_parent_[1]}) close(fd);
  }
  // Child side.
  void Tell(char c) { (void)!write(to_parent_[1], &c, 1); }
  char Hear() {
    char c = 0;
    (void)!read(to_child_[0], &c, 1);
    return c;
  }
  // Parent side.
  void Say(char c) { (void)!write(to_child_[1], &c, 1); }
  char Listen() {
    char c = 0;
    (void)!read(to_parent_[0], &c, 1);
    return c;
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void Kill() { kill(pid_, SIGKILL); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool waited_ = false;
  int to_child_[2];
  int to_parent_[2];
};

bool Attach() {
  CUdevice dev;
  CUcontext ctx;
  return cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
         cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS;
}

std::string DeviceName() {
  return "t" + std::to_string(getpid()) + "_" + testing::UnitTest::GetInstance()->current_test_info()->name();
}

class SimMultiProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* gpu : {"", ".gpu0", ".gpu1"}) shm_unlink(("/msim-" + device_ + gpu).c_str());
  }
  std::string device_ = DeviceName();
};

TEST(SimLockstepTest, APeerThatStampedItsActivityAfterTheClockWasReadIsNotIdle) {
  constexpr uint64_t kSecond = 1'000'000'000;
  const uint64_t now = 100 * kSecond;
  EXPECT_FALSE(msim::SharedDevice::IdleAt(now, now + 1000, 0)) << "stamped just after `now` was read";
  EXPECT_FALSE(msim::SharedDevice::IdleAt(now, now - kSecond / 2, 0));
  EXPECT_TRUE(msim::SharedDevice::IdleAt(now, now - 2 * kSecond, 0));
  EXPECT_FALSE(msim::SharedDevice::IdleAt(now, now - 2 * kSecond, 1)) << "inside a call";
}

TEST_F(SimMultiProcessTest, ABlockedProcessTellsItsPeersHowManyWakeUpsItHadSeen) {
  Child a(device_, [](Child& self) {
    if (!Attach() || msimSetBlocked(1, 7) != CUDA_SUCCESS) return 1;
    self.Tell('b');
    self.Hear();
    if (msimSetBlocked(0, 0) != CUDA_SUCCESS) return 2;
    self.Tell('u');
    self.Hear();
    return 0;
  });
  ASSERT_EQ(a.Listen(), 'b');
  const pid_t a_pid = a.pid();
  Child b(device_, [a_pid](Child& self) {
    if (!Attach()) return 1;
    int blocked = 0;
    uint64_t seen = 0;
    if (msimPeerBlocked(a_pid, &blocked, &seen) != CUDA_SUCCESS || blocked != 1 || seen != 7) return 2;
    // The test's own process shares no device: never blocked.
    if (msimPeerBlocked(getppid(), &blocked, &seen) != CUDA_SUCCESS || blocked != 0) return 3;
    if (msimPeerBlocked(a_pid, nullptr, &seen) != CUDA_ERROR_INVALID_VALUE) return 4;
    self.Tell('1');
    self.Hear();  // a has unblocked
    if (msimPeerBlocked(a_pid, &blocked, &seen) != CUDA_SUCCESS || blocked != 0) return 5;
    return 0;
  });
  ASSERT_EQ(b.Listen(), '1');
  a.Say('x');
  ASSERT_EQ(a.Listen(), 'u');
  b.Say('x');
  EXPECT_EQ(b.Wait(), 0);
  a.Say('x');
  EXPECT_EQ(a.Wait(), 0);
}

TEST_F(SimMultiProcessTest, DeviceAllocationsContendForOneHbm) {
  Child a(device_, [](Child& self) {
    CUdeviceptr p;
    if (!Attach() || cuMemAlloc(&p, 48 * kMiB) != CUDA_SUCCESS) return 1;
    self.Tell('a');
    self.Hear();  // hold the memory until told
    return cuMemFree(p) == CUDA_SUCCESS ? 0 : 2;
  });
  ASSERT_EQ(a.Listen(), 'a');
  Child b(device_, [](Child& self) {
    CUdeviceptr p;
    if (!Attach()) return 1;
    if (cuMemAlloc(&p, 48 * kMiB) != CUDA_ERROR_OUT_OF_MEMORY) return 2;  // a holds 48 of 64 MiB
    size_t free = 0, total = 0;
    cuMemGetInfo(&free, &total);
    if (free != 16 * kMiB) return 3;
    self.Tell('b');
    self.Hear();  // a has freed its memory
    return cuMemAlloc(&p, 48 * kMiB) == CUDA_SUCCESS ? 0 : 4;
  });
  ASSERT_EQ(b.Listen(), 'b');
  a.Say('x');
  EXPECT_EQ(a.Wait(), 0);
  b.Say('x');
  EXPECT_EQ(b.Wait(), 0);
}

TEST_F(SimMultiProcessTest, ProcessesEvictEachOthersManagedMemoryAndKeepTheirData) {
  auto worker = [](Child& self) {
    CUmodule m;
    CUfunction touch;
    CUdeviceptr p;
    const uint64_t bytes = 40 * kMiB;
    if (!Attach() || cuModuleLoadData(&m, kTestModule) || cuModuleGetFunction(&touch, m, "touch") ||
        cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL)) {
      return 1;
    }
    std::vector<uint32_t> data(bytes / 4);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 2654435761u + getpid());
    if (cuMemcpyHtoD(p, data.data(), bytes)) return 2;
    uint64_t n = bytes;
    void* params[] = {&p, &n};
    for (int round = 0; round < 4; ++round) {
      self.Tell('r');
      self.Hear();  // take turns: each round faults in what the other evicted
      if (cuLaunchKernel(touch, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr) || cuCtxSynchronize()) return 3;
    }
    std::vector<uint32_t> back(bytes / 4);
    if (cuMemcpyDtoH(back.data(), p, bytes) || back != data) return 4;
    return Stats()["evictions"].get<uint64_t>() > 0 ? 0 : 5;
  };
  Child a(device_, worker), b(device_, worker);
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(a.Listen(), 'r');
    a.Say('g');
    ASSERT_EQ(b.Listen(), 'r');
    b.Say('g');
  }
  EXPECT_EQ(a.Wait(), 0);
  EXPECT_EQ(b.Wait(), 0);
}

// The driver keeps the chunks that moving managed memory to the host
// empties allocated to their owner (measured on an H200, 2026-11-28): every
// process's cuMemGetInfo counts them as used, but another process's
// cuMemAlloc gets them, with no eviction and no copy. The owner's cuMemFree
// gives back what is left of them.
constexpr uint64_t kRetainedBytes = 48 * kMiB;

bool PrefetchedOut(CUdeviceptr* m) {
  CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0}, host{CU_MEM_LOCATION_TYPE_HOST, 0};
  std::vector<uint8_t> data(kRetainedBytes, 0x5A);
  return cuMemAllocManaged(m, kRetainedBytes, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS &&
         cuMemcpyHtoD(*m, data.data(), kRetainedBytes) == CUDA_SUCCESS &&
         cuMemPrefetchAsync(*m, kRetainedBytes, dev, 0, nullptr) == CUDA_SUCCESS &&
         cuMemPrefetchAsync(*m, kRetainedBytes, host, 0, nullptr) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS;
}

uint64_t FreeBytes() {
  size_t free = 0, total = 0;
  return cuMemGetInfo(&free, &total) == CUDA_SUCCESS ? free : UINT64_MAX;
}

TEST_F(SimMultiProcessTest, ChunksAPeerEmptiedByPrefetchingToTheHostAreReportedUsedYetAllocatable) {
  Child owner(device_, [](Child& self) {
    CUdeviceptr m;
    if (!Attach() || !PrefetchedOut(&m)) return 1;
    if (FreeBytes() != kDeviceBytes - kRetainedBytes) return 2;
    self.Tell('o');
    self.Hear();  // the other process holds 48 MiB, 32 of them reclaimed from m
    if (FreeBytes() != 0) return 3;
    return cuMemFree(m) == CUDA_SUCCESS && FreeBytes() == 16 * kMiB ? 0 : 4;
  });
  ASSERT_EQ(owner.Listen(), 'o');
  Child other(device_, [](Child& self) {
    CUdeviceptr d;
    if (!Attach()) return 1;
    // The owner's emptied chunks count as used; the allocation reclaims 32
    // MiB of them, evicting nothing, and the other 16 are still the owner's.
    if (FreeBytes() != kDeviceBytes - kRetainedBytes) return 2;
    if (cuMemAlloc(&d, 48 * kMiB) != CUDA_SUCCESS) return 3;
    const nlohmann::json s = Stats();
    if (s["evictions"] != 0 || s["bytes"]["d2h"]["eviction"] != 0) return 4;
    if (FreeBytes() != 0) return 5;
    self.Tell('a');
    self.Hear();  // the owner has freed m
    return FreeBytes() == 16 * kMiB && cuMemFree(d) == CUDA_SUCCESS ? 0 : 6;
  });
  ASSERT_EQ(other.Listen(), 'a');
  owner.Say('x');
  EXPECT_EQ(owner.Wait(), 0);
  other.Say('x');
  EXPECT_EQ(other.Wait(), 0);
}

TEST_F(SimMultiProcessTest, AProcessThatExitsGivesBackTheChunksItsPrefetchToTheHostEmptied) {
  Child owner(device_, [](Child& self) {
    CUdeviceptr m;
    if (!Attach() || !PrefetchedOut(&m)) return 1;
    self.Tell('o');
    self.Hear();
    std::exit(0);  // a normal exit, m not freed
  });
  ASSERT_EQ(owner.Listen(), 'o');
  Child observer(device_, [](Child& self) {
    if (!Attach() || FreeBytes() != kDeviceBytes - kRetainedBytes) return 1;
    self.Tell('b');
    self.Hear();  // the owner has exited
    return FreeBytes() == kDeviceBytes ? 0 : 2;
  });
  ASSERT_EQ(observer.Listen(), 'b');
  owner.Say('x');
  EXPECT_EQ(owner.Wait(), 0);
  observer.Say('x');
  EXPECT_EQ(observer.Wait(), 0);
}

TEST_F(SimMultiProcessTest, KilledProcessReleasesItsMemory) {
  Child victim(device_, [](Child& self) {
    CUdeviceptr d, m;
    if (!Attach() || cuMemAlloc(&d, 32 * kMiB) || cuMemAllocManaged(&m, 16 * kMiB, CU_MEM_ATTACH_GLOBAL)) return 1;
    CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    if (cuMemPrefetchAsync(m, 16 * kMiB, dev, 0, nullptr) || cuCtxSynchronize()) return 2;
    self.Tell('v');
    self.Hear();  // never answered: killed here
    return 0;
  });
  ASSERT_EQ(victim.Listen(), 'v');
  victim.Kill();
  EXPECT_EQ(victim.Wait(), 128 + SIGKILL);
  Child survivor(device_, [](Child&) {
    CUdeviceptr d;
    if (!Attach()) return 1;
    return cuMemAlloc(&d, 60 * kMiB) == CUDA_SUCCESS ? 0 : 2;  // only possible once the victim's 48 MiB is back
  });
  EXPECT_EQ(survivor.Wait(), 0);
}

TEST_F(SimMultiProcessTest, AProcessThatExitsWithLiveVmmMemoryGivesItBack) {
  Child holder(device_, [](Child& self) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    if (!Attach() || cuMemCreate(&h, 48 * kMiB, &prop, 0) || cuMemAddressReserve(&va, 48 * kMiB, 0, 0, 0) ||
        cuMemMap(va, 48 * kMiB, 0, h, 0)) {
      return 1;
    }
    self.Tell('h');
    self.Hear();
    std::exit(0);  // a normal exit, its handle held and mapped
  });
  ASSERT_EQ(holder.Listen(), 'h');
  // Attached before the holder exits, so what it sees after is the exit's
  // doing, not the reclaiming of a dead process's slot on attach.
  Child observer(device_, [](Child& self) {
    size_t free = 0, total = 0;
    if (!Attach() || cuMemGetInfo(&free, &total) || free != 16 * kMiB) return 1;
    self.Tell('o');
    self.Hear();  // the holder has exited
    return cuMemGetInfo(&free, &total) == CUDA_SUCCESS && free == total ? 0 : 2;
  });
  ASSERT_EQ(observer.Listen(), 'o');
  holder.Say('x');
  EXPECT_EQ(holder.Wait(), 0);
  observer.Say('x');
  EXPECT_EQ(observer.Wait(), 0);
}

TEST_F(SimMultiProcessTest, KillInsideDriverCallsDoesNotWedgeTheDevice) {
  // The victim spends nearly all its time inside driver calls, so SIGKILL
  // often lands while it holds the device lock; the robust mutex must hand
  // the lock over with the state repaired.
  for (int attempt = 0; attempt < 5; ++attempt) {
    Child victim(device_, [](Child& self) {
      CUdeviceptr m;
      if (!Attach() || cuMemAllocManaged(&m, 64 * kMiB, CU_MEM_ATTACH_GLOBAL)) return 1;
      CUmemLocation dev{CU_MEM_LOCATION_TYPE_DEVICE, 0}, host{CU_MEM_LOCATION_TYPE_HOST, 0};
      self.Tell('v');
      for (;;) {
        cuMemPrefetchAsync(m, 64 * kMiB, dev, 0, nullptr);
        cuMemPrefetchAsync(m, 64 * kMiB, host, 0, nullptr);
      }
    });
    ASSERT_EQ(victim.Listen(), 'v');
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 7 * attempt));
    victim.Kill();
    victim.Wait();
    Child survivor(device_, [](Child&) {
      alarm(20);  // a wedged lock would hang here
      CUdeviceptr d;
      if (!Attach()) return 1;
      if (cuMemAlloc(&d, 60 * kMiB) != CUDA_SUCCESS) return 2;
      size_t free = 0, total = 0;
      cuMemGetInfo(&free, &total);
      return free == 4 * kMiB ? 0 : 3;
    });
    EXPECT_EQ(survivor.Wait(), 0) << "attempt " << attempt;
  }
}

TEST_F(SimMultiProcessTest, AProcessStoppedInsideADriverCallHoldsTheOthersBackOnlyOnce) {
  // The victim is nearly always inside a cheap driver call (one that takes
  // no device lock), so SIGSTOP most likely freezes it there with its clock
  // behind the survivor's. Once the survivor's clock passes it, the survivor
  // waits kIdleMs once to judge it stopped, and from then on passes it over,
  // rather than waiting again on every call.
  Child victim(device_, [](Child& self) {
    if (!Attach()) return 1;
    self.Tell('v');
    CUdevice d;
    for (;;) cuCtxGetDevice(&d);
  });
  ASSERT_EQ(victim.Listen(), 'v');
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(victim.pid(), SIGSTOP);
  Child survivor(device_, [](Child&) {
    alarm(20);
    if (!Attach()) return 1;
    CUdevice d;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
    int long_calls = 0;  // ones that waited for the victim
    while (std::chrono::steady_clock::now() < end) {
      const auto start = std::chrono::steady_clock::now();
      if (cuCtxGetDevice(&d) != CUDA_SUCCESS) return 2;
      if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(500)) ++long_calls;
    }
    return long_calls <= 1 ? 0 : 3;
  });
  EXPECT_EQ(survivor.Wait(), 0);
  victim.Kill();
  victim.Wait();
}

TEST_F(SimMultiProcessTest, APeerThatIsSlowButStillMakingCallsIsWaitedForHoweverLong) {
  // The slow one makes a cheap call every 50 ms of real time for 7 s: its
  // clock stays microseconds behind the fast one's, which has jumped 1 ms
  // ahead. The fast one's next call must wait for all of them, well past
  // the 5 s after which a peer stuck inside one call is given up on
  // (kMaxStillMs), and after which any wait used to end. Giving up on a
  // peer by the clock let a loaded host reorder calls.
  const auto kSlowFor = std::chrono::milliseconds(7000);
  Child slow(device_, [&](Child& self) {
    alarm(30);
    if (!Attach()) return 1;
    self.Tell('s');
    CUdevice d;
    const auto end = std::chrono::steady_clock::now() + kSlowFor;
    while (std::chrono::steady_clock::now() < end) {
      if (cuCtxGetDevice(&d) != CUDA_SUCCESS) return 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  });
  ASSERT_EQ(slow.Listen(), 's');
  Child fast(device_, [&](Child& self) {
    alarm(30);
    if (!Attach()) return 1;
    uint64_t now = 0;
    if (msimGetTime(&now) != CUDA_SUCCESS || msimAdvanceTo(now + 1000000) != CUDA_SUCCESS) return 2;
    const auto start = std::chrono::steady_clock::now();
    CUdevice d;
    if (cuCtxGetDevice(&d) != CUDA_SUCCESS) return 3;
    const auto waited = std::chrono::steady_clock::now() - start;
    self.Tell(waited > (msim::SharedDevice::kMaxStillMs + 1000) * std::chrono::milliseconds(1) ? 'w' : 'p');
    return 0;
  });
  EXPECT_EQ(fast.Listen(), 'w') << "passed the slow peer while it was still making calls";
  EXPECT_EQ(fast.Wait(), 0);
  EXPECT_EQ(slow.Wait(), 0);
}

// A node of two GPUs (MSIM_GPUS=2): each is a device of its own, chosen by
// CUDA_VISIBLE_DEVICES as on a real node, with its own HBM and bus id.
TEST_F(SimMultiProcessTest, GpusOfOneNodeAreSeparateDevicesChosenByCudaVisibleDevices) {
  // Each child tells 'y' or 'n' (its allocation fitted or not), or the
  // digit of the check that failed.
  auto on_gpu = [](const char* visible, int gpus_seen, char bus_digit) {
    return [=](Child& self) {
      setenv("MSIM_GPUS", "2", 1);
      setenv("CUDA_VISIBLE_DEVICES", visible, 1);
      int count = 0;
      char bus[32] = {};
      CUdeviceptr p;
      char told = '1';
      if (Attach() && cuDeviceGetCount(&count) == CUDA_SUCCESS && count == gpus_seen) {
        told = '2';
        if (cuDeviceGetPCIBusId(bus, sizeof bus, 0) == CUDA_SUCCESS &&
            std::string(bus) == std::string("0000:0") + bus_digit + ":00.0") {
          const CUresult r = cuMemAlloc(&p, 48 * kMiB);
          told = r == CUDA_SUCCESS ? 'y' : r == CUDA_ERROR_OUT_OF_MEMORY ? 'n' : '3';
        }
      }
      self.Tell(told);
      self.Hear();
      return 0;
    };
  };
  Child a(device_, on_gpu("0", 1, '1'));
  ASSERT_EQ(a.Listen(), 'y');
  Child b(device_, on_gpu("1", 1, '2'));
  EXPECT_EQ(b.Listen(), 'y') << "GPU 1's memory is its own";
  Child c(device_, on_gpu(" 1 ,0", 2, '2'));
  EXPECT_EQ(c.Listen(), 'n') << "GPU 1 holds b's 48 of 64 MiB";
  for (Child* child : {&a, &b, &c}) {
    child->Say('x');
    EXPECT_EQ(child->Wait(), 0);
  }
}

TEST_F(SimMultiProcessTest, AProcessSeesTheNodesGpusButWorksOnTheFirstVisible) {
  Child both(device_, [](Child&) {
    setenv("MSIM_GPUS", "2", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    int count = 0;
    CUdevice dev;
    CUcontext ctx;
    if (!Attach() || cuDeviceGetCount(&count) || count != 2) return 1;
    if (cuDeviceGet(&dev, 1) != CUDA_SUCCESS) return 2;
    if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_ERROR_NOT_SUPPORTED) return 3;  // one GPU per process
    return cuDeviceGet(&dev, 2) == CUDA_ERROR_INVALID_DEVICE ? 0 : 4;
  });
  EXPECT_EQ(both.Wait(), 0);
  // As the real driver: the list stops at the first entry it cannot use,
  // and a list that leaves no GPU leaves the process without a device.
  for (const char* visible : {"", "2", "x,0", "-1", "+1"}) {
    Child none(device_, [visible](Child&) {
      setenv("MSIM_GPUS", "2", 1);
      setenv("CUDA_VISIBLE_DEVICES", visible, 1);
      return cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1;
    });
    EXPECT_EQ(none.Wait(), 0) << "CUDA_VISIBLE_DEVICES='" << visible << "'";
  }
  Child cut(device_, [](Child&) {
    setenv("MSIM_GPUS", "2", 1);
    setenv("CUDA_VISIBLE_DEVICES", "1,1,0", 1);
    int count = 0;
    return cuInit(0) == CUDA_SUCCESS && cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 1 ? 0 : 1;
  });
  EXPECT_EQ(cut.Wait(), 0);
}

}  // namespace
}  // namespace msim_test

int main(int argc, char** argv) {
  msim_test::ConfigureSimulator();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

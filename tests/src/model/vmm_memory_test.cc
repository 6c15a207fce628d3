#include "model/vmm_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "model/job_memory.h"

namespace msched {
namespace {

const std::vector<uint8_t> kRecipe = {1, 2, 3};

// A VMM driver in miniature, for VmmMemory and for the program: physical
// handles with bytes and references (freed once neither a reference nor a
// mapping is left, and their values reused, as the driver may), mappings
// with their access, a capacity, and a failure injected at the Nth call of
// a given name.
class FakeVmmDriver : public VmmOps {
 public:
  struct Physical {
    std::vector<uint8_t> bytes;
    int refs = 1;
  };
  struct Mapping {
    uint64_t real = 0, offset = 0, size = 0;
    std::vector<VmmAccess> access;
  };

  // VmmOps.
  Result<uint64_t> Create(uint64_t size, const std::vector<uint8_t>& recipe) override {
    if (recipe != kRecipe) return Status::InvalidArgument("not made as before");
    if (Fails("create")) return Status::Unavailable("injected");
    if (used() + size > capacity) return Status::ResourceExhausted("out of memory");
    return NewHandle(size);
  }
  Status Release(uint64_t real) override {
    if (Fails("release")) return Status::Unavailable("injected");
    auto it = physical.find(real);
    if (it == physical.end() || it->second.refs == 0) return Status::InvalidArgument("bad handle");
    --it->second.refs;
    FreeIfUnused(real);
    return Status::Ok();
  }
  Status Map(uint64_t va, uint64_t size, uint64_t offset, uint64_t real) override {
    if (Fails("map")) return Status::Unavailable("injected");
    auto it = physical.find(real);
    if (it == physical.end() || it->second.refs == 0 || mappings.count(va)) return Status::InvalidArgument("bad map");
    mappings[va] = {real, offset, size, {}};
    return Status::Ok();
  }
  Status Unmap(uint64_t va, uint64_t size) override {
    if (Fails("unmap")) return Status::Unavailable("injected");
    auto it = mappings.find(va);
    if (it == mappings.end() || it->second.size != size) return Status::InvalidArgument("bad unmap");
    const uint64_t real = it->second.real;
    mappings.erase(it);
    FreeIfUnused(real);
    return Status::Ok();
  }
  Status SetAccess(uint64_t va, uint64_t, const std::vector<VmmAccess>& access) override {
    if (Fails("access")) return Status::Unavailable("injected");
    auto it = mappings.find(va);
    if (it == mappings.end()) return Status::InvalidArgument("not mapped");
    it->second.access = access;
    return Status::Ok();
  }
  Result<void*> CopyOut(uint64_t real, uint64_t size) override {
    if (Fails("copy out")) return Status::Unavailable("injected");
    auto* host = new uint8_t[size];
    std::memcpy(host, physical.at(real).bytes.data(), size);
    ++host_buffers;
    return static_cast<void*>(host);
  }
  Status CopyIn(const void* host, uint64_t real, uint64_t size) override {
    if (Fails("copy in")) return Status::Unavailable("injected");
    std::memcpy(physical.at(real).bytes.data(), host, size);
    return Status::Ok();
  }
  void FreeHost(void* host, uint64_t) override {
    delete[] static_cast<uint8_t*>(host);
    --host_buffers;
  }

  // The program's side.
  uint64_t NewHandle(uint64_t size) {
    uint64_t real = next_real;
    if (!freed.empty()) {
      real = freed.back();
      freed.pop_back();
    } else {
      ++next_real;
    }
    physical[real] = {std::vector<uint8_t>(size), 1};
    return real;
  }
  // The byte at `va` as a kernel would see it; -1: an illegal address.
  int Read(uint64_t va) const {
    auto it = mappings.upper_bound(va);
    if (it == mappings.begin()) return -1;
    --it;
    const Mapping& m = it->second;
    if (va >= it->first + m.size || m.access.empty()) return -1;
    return physical.at(m.real).bytes[m.offset + (va - it->first)];
  }
  void Write(uint64_t va, uint8_t value) {
    auto it = std::prev(mappings.upper_bound(va));
    physical.at(it->second.real).bytes[it->second.offset + (va - it->first)] = value;
  }
  uint64_t used() const {
    uint64_t bytes = 0;
    for (const auto& [real, p] : physical) bytes += p.bytes.size();
    return bytes;
  }

  std::map<uint64_t, Physical> physical;
  std::map<uint64_t, Mapping> mappings;
  uint64_t capacity = UINT64_MAX;
  int host_buffers = 0;
  std::string fail_call;  // fails the fail_at'th call of this name
  int fail_at = 0;

 private:
  bool Fails(const std::string& call) { return call == fail_call && --fail_at == 0; }
  void FreeIfUnused(uint64_t real) {
    if (physical.at(real).refs > 0) return;
    for (const auto& [va, m] : mappings) {
      if (m.real == real) return;
    }
    physical.erase(real);
    freed.push_back(real);
  }
  uint64_t next_real = 100;
  std::vector<uint64_t> freed;
};

const std::vector<VmmAccess> kReadWrite = {{1, 0, 3}};

// A program that creates a handle of `size`, maps it at `va`, grants access,
// and fills it with `fill`; its id.
uint64_t CreateAndMap(FakeVmmDriver& driver, VmmMemory& vmm, uint64_t va, uint64_t size, uint8_t fill) {
  const uint64_t id = vmm.Created(driver.NewHandle(size), size, kRecipe);
  EXPECT_TRUE(driver.Map(va, size, 0, vmm.RealOf(id)).ok());
  vmm.Mapped(va, size, 0, id);
  EXPECT_TRUE(driver.SetAccess(va, size, kReadWrite).ok());
  vmm.AccessSet(va, size, kReadWrite);
  for (uint64_t i = 0; i < size; ++i) driver.Write(va + i, static_cast<uint8_t>(fill + i));
  return id;
}

TEST(VmmMemoryTest, MovingOutGivesTheMemoryBackAndMovingBackRestoresBytesMappingsAndAccess) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  CreateAndMap(driver, vmm, 0x10000, 64, 7);
  CreateAndMap(driver, vmm, 0x20000, 32, 50);
  EXPECT_EQ(vmm.device_bytes(), 96u);

  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  EXPECT_EQ(driver.used(), 0u) << "released for real";
  EXPECT_TRUE(driver.mappings.empty());
  EXPECT_EQ(driver.Read(0x10000), -1) << "nothing mapped while out";
  EXPECT_EQ(vmm.device_bytes(), 0u);
  EXPECT_EQ(vmm.moved_bytes(), 96u);

  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_EQ(driver.used(), 96u);
  EXPECT_EQ(driver.Read(0x10000), 7);
  EXPECT_EQ(driver.Read(0x10000 + 63), 7 + 63);
  EXPECT_EQ(driver.Read(0x20000 + 5), 55);
  EXPECT_EQ(driver.mappings.at(0x20000).access, kReadWrite);
  EXPECT_EQ(vmm.moved_bytes(), 0u);
  EXPECT_EQ(driver.host_buffers, 0) << "host copies given back";
}

TEST(VmmMemoryTest, TheProgramKeepsItsHandleAfterAMoveAndAReusedValueGetsAnIdOfItsOwn) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t id = CreateAndMap(driver, vmm, 0x10000, 16, 1);
  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  // While it is out, another handle is made: the driver reuses the freed value.
  const uint64_t real = driver.NewHandle(8);
  EXPECT_EQ(real, id);
  const uint64_t other = vmm.Created(real, 8, kRecipe);
  EXPECT_NE(other, id);
  EXPECT_GE(other, VmmMemory::kVirtualIds);
  EXPECT_EQ(vmm.RealOf(other), real);

  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_NE(vmm.RealOf(id), id) << "a new handle underneath";
  EXPECT_EQ(vmm.IdOf(vmm.RealOf(id)), id);
  EXPECT_EQ(driver.mappings.at(0x10000).real, vmm.RealOf(id));
  // Its release reaches the new handle.
  const std::optional<uint64_t> release = vmm.Releasing(id);
  ASSERT_TRUE(release.has_value());
  EXPECT_EQ(*release, vmm.RealOf(id));
  EXPECT_EQ(vmm.Releasing(12345), std::nullopt) << "unknown handles pass through";
  EXPECT_EQ(vmm.RealOf(12345), 12345u);
}

// A handle the program made and filled, then unmapped (as an allocator
// keeps a piece for later), moves out with its bytes like any other; mapped
// again by the program after it came back, through the value the program
// holds, it shows the bytes it had, at the new address.
TEST(VmmMemoryTest, AHandleMappedAfterItsBackingWasReleasedShowsItsBytes) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t id = CreateAndMap(driver, vmm, 0x10000, 16, 40);
  ASSERT_TRUE(driver.Unmap(0x10000, 16).ok());
  vmm.Unmapped(0x10000, 16);
  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  EXPECT_EQ(driver.used(), 0u) << "its backing released, though nothing mapped it";
  ASSERT_TRUE(vmm.MoveBack(driver).ok());

  const uint64_t real = vmm.RealOf(id);
  EXPECT_NE(real, 0u);
  ASSERT_TRUE(driver.Map(0x30000, 16, 0, real).ok()) << "the program's value reaches the handle made anew";
  vmm.Mapped(0x30000, 16, 0, id);
  ASSERT_TRUE(driver.SetAccess(0x30000, 16, kReadWrite).ok());
  vmm.AccessSet(0x30000, 16, kReadWrite);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(driver.Read(0x30000 + i), 40 + static_cast<int>(i)) << i;
  EXPECT_EQ(vmm.device_bytes(), 16u);

  // And it moves again, mapped where the program put it.
  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_EQ(driver.Read(0x30000 + 3), 43);
  EXPECT_EQ(driver.host_buffers, 0);
}

TEST(VmmMemoryTest, AHandleReleasedWhileMappedLivesByItsMappingsAfterItComesBack) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t id = CreateAndMap(driver, vmm, 0x10000, 16, 3);
  const std::optional<uint64_t> release = vmm.Releasing(id);
  ASSERT_TRUE(release.has_value());
  ASSERT_TRUE(driver.Release(*release).ok());
  EXPECT_EQ(vmm.device_bytes(), 16u) << "mapped: the driver keeps it";

  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  EXPECT_EQ(driver.used(), 0u);
  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_EQ(driver.Read(0x10000 + 2), 5);
  EXPECT_EQ(driver.physical.at(driver.mappings.at(0x10000).real).refs, 0) << "no reference: lives by its mapping";
  // The program unmaps it: freed, and forgotten.
  ASSERT_TRUE(driver.Unmap(0x10000, 16).ok());
  vmm.Unmapped(0x10000, 16);
  EXPECT_EQ(driver.used(), 0u);
  EXPECT_EQ(vmm.device_bytes(), 0u);
}

TEST(VmmMemoryTest, RetainCountsAReferenceAndTheDriversSecondOneIsDropped) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t id = CreateAndMap(driver, vmm, 0x10000, 16, 3);
  const VmmMemory::Retain retain = vmm.Retained(vmm.RealOf(id));
  EXPECT_EQ(retain.id, id);
  EXPECT_TRUE(retain.drop_driver_reference) << "msched holds one for the program already";
  EXPECT_EQ(vmm.Releasing(id), std::optional<uint64_t>(0)) << "one reference left: nothing released";
  EXPECT_EQ(vmm.Releasing(id), std::optional<uint64_t>(vmm.RealOf(id)));
  const VmmMemory::Retain again = vmm.Retained(vmm.RealOf(id));
  EXPECT_FALSE(again.drop_driver_reference) << "the program had none left: the driver's is msched's now";
  EXPECT_EQ(vmm.Retained(999).id, 999u) << "unknown: the driver's value";
}

TEST(VmmMemoryTest, SharedHandlesNeverMove) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t exported = CreateAndMap(driver, vmm, 0x10000, 16, 3);
  vmm.Exported(exported);
  const uint64_t imported = vmm.Imported(driver.NewHandle(8), 8);
  ASSERT_TRUE(driver.Map(0x30000, 8, 0, imported).ok());
  vmm.Mapped(0x30000, 8, 0, imported);
  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  EXPECT_EQ(driver.used(), 24u);
  EXPECT_EQ(vmm.shared_bytes(), 24u) << "both ways";
  EXPECT_EQ(vmm.device_bytes(), 16u) << "the imported memory is its exporter's";
  EXPECT_EQ(vmm.moved_bytes(), 0u);
}

TEST(VmmMemoryTest, AFailedCopyOrUnmapLeavesThatHandleMappedAsBeforeAndTheOthersStillMove) {
  for (const std::string call : {"copy out", "unmap"}) {
    SCOPED_TRACE(call);
    FakeVmmDriver driver;
    VmmMemory vmm;
    const uint64_t first = vmm.Created(driver.NewHandle(32), 32, kRecipe);
    // Two mappings of halves, so that an unmap can fail after one went.
    for (uint64_t half : {0, 1}) {
      ASSERT_TRUE(driver.Map(0x10000 + half * 16, 16, half * 16, vmm.RealOf(first)).ok());
      vmm.Mapped(0x10000 + half * 16, 16, half * 16, first);
      ASSERT_TRUE(driver.SetAccess(0x10000 + half * 16, 16, kReadWrite).ok());
      vmm.AccessSet(0x10000 + half * 16, 16, kReadWrite);
    }
    driver.Write(0x10000 + 20, 9);
    CreateAndMap(driver, vmm, 0x20000, 16, 1);
    driver.fail_call = call;
    driver.fail_at = call == "unmap" ? 2 : 1;
    EXPECT_FALSE(vmm.MoveOut(driver).ok());
    EXPECT_EQ(driver.Read(0x10000 + 20), 9) << "mapped, with its access, as before";
    EXPECT_EQ(driver.Read(0x10000), 0);
    EXPECT_EQ(driver.Read(0x20000), -1) << "the other moved";
    EXPECT_EQ(vmm.moved_bytes(), 16u);
    EXPECT_EQ(driver.host_buffers, 1);
    driver.fail_call.clear();
    ASSERT_TRUE(vmm.MoveBack(driver).ok());
    EXPECT_EQ(driver.host_buffers, 0) << "the moved one's host copy given back";
  }
}

TEST(VmmMemoryTest, OutOfMemoryOnTheWayBackLeavesItOutWithNothingMappedUntilALaterTry) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  CreateAndMap(driver, vmm, 0x10000, 16, 4);
  CreateAndMap(driver, vmm, 0x20000, 16, 8);
  ASSERT_TRUE(vmm.MoveOut(driver).ok());
  driver.capacity = 16;  // another process took the rest
  const Status s = vmm.MoveBack(driver);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(vmm.moved_bytes(), 16u);
  EXPECT_EQ(driver.mappings.size(), 1u) << "one back, the other not mapped at all";
  driver.capacity = UINT64_MAX;
  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_EQ(driver.Read(0x10000 + 1), 5);
  EXPECT_EQ(driver.Read(0x20000 + 1), 9);
}

TEST(VmmMemoryTest, AFailureOnTheWayBackAfterTheHandleWasMadeFreesItAndUnmapsWhatWasMapped) {
  for (const std::string call : {"copy in", "map", "access"}) {
    SCOPED_TRACE(call);
    FakeVmmDriver driver;
    VmmMemory vmm;
    CreateAndMap(driver, vmm, 0x10000, 16, 4);
    ASSERT_TRUE(vmm.MoveOut(driver).ok());
    driver.fail_call = call;
    driver.fail_at = 1;
    EXPECT_FALSE(vmm.MoveBack(driver).ok());
    EXPECT_EQ(driver.used(), 0u);
    EXPECT_TRUE(driver.mappings.empty()) << "never a mapping without its data";
    ASSERT_TRUE(vmm.MoveBack(driver).ok());
    EXPECT_EQ(driver.Read(0x10000 + 3), 7);
  }
}

TEST(VmmMemoryTest, AFailedReleaseKeepsTheBytesAndTheHandleComesBackByMappingAlone) {
  FakeVmmDriver driver;
  VmmMemory vmm;
  const uint64_t id = CreateAndMap(driver, vmm, 0x10000, 16, 4);
  driver.fail_call = "release";
  driver.fail_at = 1;
  EXPECT_FALSE(vmm.MoveOut(driver).ok());
  EXPECT_TRUE(driver.mappings.empty());
  ASSERT_TRUE(vmm.MoveBack(driver).ok());
  EXPECT_EQ(vmm.RealOf(id), id) << "the same handle, mapped again";
  EXPECT_EQ(driver.Read(0x10000 + 3), 7);
  EXPECT_EQ(driver.host_buffers, 0);
}

TEST(VmmMemoryTest, TheJobCountsItsVmmMemoryOnTheDeviceAsPinned) {
  FakeVmmDriver driver;
  JobMemory job(EvictionPolicy::kOpt);
  job.SetConfigured(100);
  const uint64_t id = job.ChangeVmm()->Created(driver.NewHandle(30), 30, kRecipe);
  EXPECT_EQ(job.budget().pinned, 30u);
  EXPECT_EQ(job.manager().budget(), 70u);
  ASSERT_TRUE(driver.Map(0x10000, 30, 0, id).ok());
  job.ChangeVmm()->Mapped(0x10000, 30, 0, id);
  job.AddShared(5);  // imported memory beside it
  EXPECT_EQ(job.budget().pinned, 35u);
  ASSERT_TRUE(job.ChangeVmm()->MoveOut(driver).ok());
  EXPECT_EQ(job.budget().pinned, 5u) << "moved out: no longer on the device";
  ASSERT_TRUE(job.ChangeVmm()->MoveBack(driver).ok());
  EXPECT_EQ(job.budget().pinned, 35u);
}

}  // namespace
}  // namespace msched

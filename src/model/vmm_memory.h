// VmmMemory: the job's memory that it maps itself through the driver's VMM
// API (cuMemCreate, cuMemMap: vLLM's and SGLang's allocators, NCCL,
// PyTorch's expandable segments). Such memory cannot page: a kernel that
// touches an unmapped address fails. So it stays resident for the whole of
// a turn, and msched moves it only between turns, whole:
//  - out (a pause, or a switch that needs its room): each physical handle's
//    bytes are copied to host memory, its mappings unmapped and the handle
//    released, which gives the memory back to the driver for real (another
//    process's cuMemGetInfo sees it free; unified memory's evicted chunks
//    stay allocated to the process until the driver needs them);
//  - back (before the job's next launch): the handle is created again with
//    the same properties, the bytes copied in, and it is mapped at the same
//    addresses with the same access as before. Only then does the program
//    see it: never a mapping without its data.
//
// The program keeps the handle values it was given. A handle created again
// is a new one to the driver, so the program's handles are ids that this
// class translates (RealOf, IdOf). An id is the first real value the
// driver gave, unless that value is still the id of a handle that moved (the
// driver reuses values once freed): then it is one of msched's own
// (kVirtualIds), which only the hooks' translations understand.
//
// References: the program's (create 1, each retain 1, each release -1) are
// counted here; msched holds one driver reference for all of them while
// there are any, and releases it when the last goes. The driver frees the
// memory once no reference and no mapping is left, and so does this record.
//
// Handles shared with another process (exported, or imported from one) are
// never moved: the peer maps them too.
//
// Externally synchronized (the hook's Runtime lock). Used by JobMemory and
// through it the hook.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "model/address_range.h"
#include "msched/status.h"

namespace msched {

// One grant of access to a mapped range, as cuMemSetAccess gave it (a
// CUmemAccessDesc: location type and id, and protection flags), opaque here.
struct VmmAccess {
  int32_t location_type = 0;
  int32_t location_id = 0;
  uint32_t flags = 0;
  bool operator==(const VmmAccess&) const = default;
};

// The driver's VMM calls that moving memory needs. Handles here are the
// driver's (real) values. The hook implements it on the driver; tests with
// a fake that can fail any call.
class VmmOps {
 public:
  virtual ~VmmOps() = default;
  // Physical memory of `size` bytes made by `recipe` (what the hook needs to
  // make it again: its allocation properties); its real handle.
  virtual Result<uint64_t> Create(uint64_t size, const std::vector<uint8_t>& recipe) = 0;
  virtual Status Release(uint64_t real) = 0;
  virtual Status Map(uint64_t va, uint64_t size, uint64_t offset, uint64_t real) = 0;
  virtual Status Unmap(uint64_t va, uint64_t size) = 0;
  virtual Status SetAccess(uint64_t va, uint64_t size, const std::vector<VmmAccess>& access) = 0;
  // Copies the whole of handle `real` (`size` bytes; it may be mapped
  // nowhere) to new host memory, returned; and back from it. FreeHost gives
  // that memory back.
  virtual Result<void*> CopyOut(uint64_t real, uint64_t size) = 0;
  virtual Status CopyIn(const void* host, uint64_t real, uint64_t size) = 0;
  virtual void FreeHost(void* host, uint64_t size) = 0;
};

class VmmMemory {
 public:
  // msched's own ids start here (an id the driver never gives in practice:
  // driver handles are small numbers or user-space addresses).
  static constexpr uint64_t kVirtualIds = uint64_t{1} << 63;

  VmmMemory() = default;
  VmmMemory(const VmmMemory&) = delete;
  VmmMemory& operator=(const VmmMemory&) = delete;

  // ---- What the program did (each after the driver call succeeded) ----
  // cuMemCreate gave `real`, of `size` bytes, made by `recipe` (VmmOps::
  // Create): the id to give the program.
  uint64_t Created(uint64_t real, uint64_t size, std::vector<uint8_t> recipe);
  // A handle another process gave (cuMemImportFromShareableHandle), of
  // `size` bytes as far as known (0: as far as it is mapped): the id to give
  // the program. Never moved.
  uint64_t Imported(uint64_t real, uint64_t size);
  // cuMemRetainAllocationHandle gave `real`, with a driver reference: the
  // program's id for it, with one more reference here, and whether the
  // driver's reference is one too many (msched holds one already). A handle
  // msched does not know keeps its value and the driver's reference.
  struct Retain {
    uint64_t id = 0;
    bool drop_driver_reference = false;
  };
  Retain Retained(uint64_t real);
  // The program releases `id`. nullopt: msched does not know `id` (the
  // caller passes it to the driver as is); otherwise the real handle whose
  // driver reference goes now (the program's last), or 0 for none (other
  // references remain, or the memory is out and was released then).
  std::optional<uint64_t> Releasing(uint64_t id);
  // cuMemExportToShareableHandle: a peer may map it from now on.
  void Exported(uint64_t id);
  // cuMemMap(va, size, offset, real-of-id) succeeded.
  void Mapped(uint64_t va, uint64_t size, uint64_t offset, uint64_t id);
  // cuMemUnmap(va, size) succeeded: forgets the mappings in it.
  void Unmapped(uint64_t va, uint64_t size);
  // cuMemSetAccess(va, size, access) succeeded.
  void AccessSet(uint64_t va, uint64_t size, const std::vector<VmmAccess>& access);

  // The driver's handle for the program's `id`; `id` itself when msched
  // does not know it (a handle from before msched, or not a handle at all:
  // the driver then says so).
  uint64_t RealOf(uint64_t id) const;
  // The program's id for a real handle; `real` itself when unknown.
  uint64_t IdOf(uint64_t real) const;

  // ---- Moves ----
  // Moves every handle that can move to host memory and gives its device
  // memory back (the file comment says how). A handle whose move fails
  // stays where it is, mapped as before; the first error is returned and the
  // others still move.
  Status MoveOut(VmmOps& ops);
  // Brings every moved handle back, mapped as it was. A handle that cannot
  // come back (out of memory: another process took it) stays out, with
  // nothing of it mapped; the first error is returned, and a later call
  // tries again.
  Status MoveBack(VmmOps& ops);

  // Bytes of physical memory the job holds on the device now (what the
  // budget counts as pinned; imported memory is its exporter's), bytes moved
  // out, and bytes of handles that never move (shared with another process,
  // either way).
  uint64_t device_bytes() const;
  uint64_t moved_bytes() const;
  uint64_t shared_bytes() const;

 private:
  // States: on the device and mapped (`host` null, `real` set); moved out
  // (`host` holds the bytes, nothing mapped, `real` 0 once the driver freed
  // it, else a handle whose release failed: it comes back by mapping).
  struct Handle {
    uint64_t size = 0;
    uint64_t real = 0;      // the driver's handle
    uint32_t refs = 0;      // the program's references
    bool shared = false;    // exported or imported: never moved
    bool imported = false;  // another process's memory: not the job's to count
    void* host = nullptr;   // the bytes, while moved out (VmmOps's memory)
    std::vector<uint8_t> recipe;
  };
  struct Mapping {
    uint64_t size = 0;
    uint64_t offset = 0;
    uint64_t id = 0;
    // The access calls over it, in order, each clipped to it.
    std::vector<std::pair<ByteRange, std::vector<VmmAccess>>> access;
  };

  uint64_t Add(uint64_t real, uint64_t size, bool imported, std::vector<uint8_t> recipe);
  // Forgets `id` once the driver freed it: no reference and no mapping left
  // (host memory of a handle forgotten while out is given back at the next
  // move, through its VmmOps).
  void ForgetIfFreed(uint64_t id);
  void FreeOrphans(VmmOps& ops);
  bool Mapped(uint64_t id) const;
  Status MoveOut(uint64_t id, Handle& h, VmmOps& ops);
  Status MoveBack(uint64_t id, Handle& h, VmmOps& ops);
  // Maps and grants access to every mapping of `id` on `real`; on failure
  // unmaps what it mapped.
  Status MapAll(uint64_t id, uint64_t real, VmmOps& ops);

  std::map<uint64_t, Handle> handles_;               // by id
  std::map<uint64_t, Mapping> mappings_;             // by address
  std::vector<std::pair<void*, uint64_t>> orphans_;  // host copies of handles forgotten while out
  uint64_t next_virtual_ = kVirtualIds;
};

}  // namespace msched

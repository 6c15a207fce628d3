#include "model/vmm_memory.h"

#include <algorithm>
#include <utility>

namespace msched {

uint64_t VmmMemory::Add(uint64_t real, uint64_t size, bool imported, std::vector<uint8_t> recipe) {
  // The driver reuses a freed handle's value: if the program still knows a
  // moved handle by it, the new one gets an id of msched's own.
  const uint64_t id = handles_.count(real) ? next_virtual_++ : real;
  handles_[id] = Handle{size, real, 1, imported, imported, nullptr, std::move(recipe)};
  return id;
}

uint64_t VmmMemory::Created(uint64_t real, uint64_t size, std::vector<uint8_t> recipe) {
  return Add(real, size, /*imported=*/false, std::move(recipe));
}

uint64_t VmmMemory::Imported(uint64_t real, uint64_t size) { return Add(real, size, /*imported=*/true, {}); }

VmmMemory::Retain VmmMemory::Retained(uint64_t real) {
  const uint64_t id = IdOf(real);
  auto it = handles_.find(id);
  if (it == handles_.end() || it->second.real != real) return {real, false};
  return {id, it->second.refs++ > 0};
}

std::optional<uint64_t> VmmMemory::Releasing(uint64_t id) {
  auto it = handles_.find(id);
  if (it == handles_.end() || it->second.refs == 0) return std::nullopt;
  Handle& h = it->second;
  if (--h.refs > 0) return 0;
  const uint64_t real = h.host == nullptr ? h.real : 0;  // moved out: released then
  ForgetIfFreed(id);
  return real;
}

void VmmMemory::Exported(uint64_t id) {
  if (auto it = handles_.find(id); it != handles_.end()) it->second.shared = true;
}

void VmmMemory::Mapped(uint64_t va, uint64_t size, uint64_t offset, uint64_t id) {
  auto it = handles_.find(id);
  if (it == handles_.end()) return;  // not msched's to move (known to the driver only)
  // An imported handle's size is known only as far as it is mapped.
  if (it->second.imported) it->second.size = std::max(it->second.size, offset + size);
  mappings_[va] = Mapping{size, offset, id, {}};
}

void VmmMemory::Unmapped(uint64_t va, uint64_t size) {
  const uint64_t end = va + size;
  std::vector<uint64_t> ids;
  for (auto it = mappings_.lower_bound(va); it != mappings_.end() && it->first < end;) {
    ids.push_back(it->second.id);
    it = mappings_.erase(it);
  }
  for (uint64_t id : ids) ForgetIfFreed(id);
}

void VmmMemory::AccessSet(uint64_t va, uint64_t size, const std::vector<VmmAccess>& access) {
  const ByteRange range{va, va + size};
  // The mapping that may begin below `va`, then those that begin inside.
  auto it = mappings_.upper_bound(va);
  if (it != mappings_.begin()) --it;
  for (; it != mappings_.end() && it->first < range.end; ++it) {
    const ByteRange mapped{it->first, it->first + it->second.size};
    const ByteRange part{std::max(mapped.begin, range.begin), std::min(mapped.end, range.end)};
    if (part.begin < part.end) it->second.access.emplace_back(part, access);
  }
}

uint64_t VmmMemory::RealOf(uint64_t id) const {
  auto it = handles_.find(id);
  return it != handles_.end() && it->second.real != 0 ? it->second.real : id;
}

uint64_t VmmMemory::IdOf(uint64_t real) const {
  for (const auto& [id, h] : handles_) {
    if (h.real == real) return id;
  }
  return real;
}

uint64_t VmmMemory::device_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, h] : handles_) bytes += h.real != 0 && !h.imported ? h.size : 0;
  return bytes;
}

uint64_t VmmMemory::moved_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, h] : handles_) bytes += h.host != nullptr ? h.size : 0;
  return bytes;
}

uint64_t VmmMemory::shared_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, h] : handles_) bytes += h.shared ? h.size : 0;
  return bytes;
}

bool VmmMemory::Mapped(uint64_t id) const {
  return std::any_of(mappings_.begin(), mappings_.end(), [id](const auto& m) { return m.second.id == id; });
}

void VmmMemory::ForgetIfFreed(uint64_t id) {
  auto it = handles_.find(id);
  if (it == handles_.end() || it->second.refs > 0 || Mapped(id)) return;
  if (it->second.host != nullptr) orphans_.emplace_back(it->second.host, it->second.size);
  handles_.erase(it);
}

void VmmMemory::FreeOrphans(VmmOps& ops) {
  for (const auto& [host, size] : orphans_) ops.FreeHost(host, size);
  orphans_.clear();
}

Status VmmMemory::MoveOut(VmmOps& ops) {
  FreeOrphans(ops);
  Status first;
  for (auto& [id, h] : handles_) {
    if (h.shared || h.host != nullptr) continue;
    if (Status s = MoveOut(id, h, ops); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status VmmMemory::MoveOut(uint64_t id, Handle& h, VmmOps& ops) {
  Result<void*> host = ops.CopyOut(h.real, h.size);
  if (!host.ok()) return host.status();
  // Unmapped one by one; a refusal maps back what went, as it was.
  std::vector<uint64_t> unmapped;
  for (const auto& [va, m] : mappings_) {
    if (m.id != id) continue;
    if (Status s = ops.Unmap(va, m.size); !s.ok()) {
      for (uint64_t back : unmapped) {
        const Mapping& u = mappings_.at(back);
        (void)ops.Map(back, u.size, u.offset, h.real);
        for (const auto& [part, access] : u.access) (void)ops.SetAccess(part.begin, part.size(), access);
      }
      ops.FreeHost(*host, h.size);
      return s;
    }
    unmapped.push_back(va);
  }
  h.host = *host;  // from here on the bytes are safe on the host
  // Unmapped, the memory lives by msched's reference alone, or by none when
  // the program released its handle (the last unmap freed it).
  if (h.refs == 0) {
    h.real = 0;
    return Status::Ok();
  }
  Status released = ops.Release(h.real);
  if (released.ok()) h.real = 0;  // else it stays the driver's, unmapped: it comes back by mapping
  return released;
}

Status VmmMemory::MoveBack(VmmOps& ops) {
  FreeOrphans(ops);
  Status first;
  for (auto& [id, h] : handles_) {
    if (h.host == nullptr) continue;
    if (Status s = MoveBack(id, h, ops); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status VmmMemory::MoveBack(uint64_t id, Handle& h, VmmOps& ops) {
  uint64_t real = h.real;
  const bool created = real == 0;
  if (created) {
    Result<uint64_t> made = ops.Create(h.size, h.recipe);
    if (!made.ok()) return made.status();
    real = *made;
    if (Status s = ops.CopyIn(h.host, real, h.size); !s.ok()) {
      (void)ops.Release(real);
      return s;
    }
  }
  if (Status s = MapAll(id, real, ops); !s.ok()) {
    if (created) (void)ops.Release(real);  // unmapped again by MapAll: freed
    return s;
  }
  // Mapped, it lives by its mappings alone when the program has released
  // every reference, as it did before it moved. A release that fails keeps
  // it only until the job ends.
  if (created && h.refs == 0) (void)ops.Release(real);
  ops.FreeHost(h.host, h.size);
  h.host = nullptr;
  h.real = real;
  return Status::Ok();
}

Status VmmMemory::MapAll(uint64_t id, uint64_t real, VmmOps& ops) {
  std::vector<uint64_t> mapped;
  Status s;
  for (const auto& [va, m] : mappings_) {
    if (m.id != id) continue;
    s = ops.Map(va, m.size, m.offset, real);
    if (!s.ok()) break;
    mapped.push_back(va);
    for (const auto& [part, access] : m.access) {
      s = ops.SetAccess(part.begin, part.size(), access);
      if (!s.ok()) break;
    }
    if (!s.ok()) break;
  }
  if (!s.ok()) {
    for (uint64_t va : mapped) (void)ops.Unmap(va, mappings_.at(va).size);
  }
  return s;
}

}  // namespace msched

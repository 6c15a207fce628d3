#include "coord/coord_shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

namespace msched {
namespace {

Status Errno(const std::string& what) { return Status::IoError(what + ": " + std::strerror(errno)); }

}  // namespace

Result<CoordShm> CoordShm::Create() {
  const int fd = ::memfd_create("msched-gates", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Errno("cannot create the coordinator's shared memory (memfd_create)");
  // Jobs get a descriptor opened read-only: mmap refuses PROT_WRITE on it
  // (and mprotect cannot add it), whatever a job does.
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  int reader = -1;
  Status failed = Status::Ok();
  if (::ftruncate(fd, sizeof(ShmLayout)) != 0) {
    failed = Errno("cannot size the coordinator's shared memory");
  } else if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    failed = Errno("cannot seal the coordinator's shared memory");
  } else if ((reader = ::open(self.c_str(), O_RDONLY | O_CLOEXEC)) < 0) {
    failed = Errno("cannot reopen the coordinator's shared memory read-only");
  }
  void* p = failed.ok() ? ::mmap(nullptr, sizeof(ShmLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (failed.ok() && p == MAP_FAILED) failed = Errno("cannot map the coordinator's shared memory");
  ::close(fd);
  if (!failed.ok()) {
    if (reader >= 0) ::close(reader);
    return failed;
  }
  auto* layout = new (p) ShmLayout{};  // zeroed by ftruncate; constructs the atomics
  layout->magic = kShmMagic;
  layout->version = kShmVersion;
  layout->slot_size = sizeof(ShmSlot);
  layout->slots = kShmSlots;
  layout->coordinator_pid = static_cast<uint64_t>(::getpid());
  return CoordShm(layout, reader);
}

Result<CoordShm> CoordShm::OpenReadOnly(int fd) {
  if (fd < 0) return Status::Corruption("the coordinator sent no shared memory with its welcome");
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) < sizeof(ShmLayout)) {
    ::close(fd);
    return Status::Corruption("the coordinator's shared memory is not what this msched expects: another version?");
  }
  void* p = ::mmap(nullptr, sizeof(ShmLayout), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Errno("cannot map the coordinator's shared memory");
  auto* layout = static_cast<ShmLayout*>(p);
  if (layout->magic != kShmMagic || layout->version != kShmVersion || layout->slot_size != sizeof(ShmSlot) ||
      layout->slots != kShmSlots) {
    ::munmap(p, sizeof(ShmLayout));
    return Status::Corruption("the coordinator's shared memory has another layout: mixed msched versions?");
  }
  return CoordShm(layout, -1);
}

CoordShm::~CoordShm() {
  if (layout_ != nullptr) ::munmap(layout_, sizeof(ShmLayout));
  if (reader_fd_ >= 0) ::close(reader_fd_);
}

}  // namespace msched

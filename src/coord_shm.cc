#include "coord_shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace msched {

Result<CoordShm> CoordShm::Create(const std::string& name) {
  ::shm_unlink(name.c_str());  // a stale mapping from a coordinator that died
  const mode_t old = ::umask(0);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ::umask(old);
  if (fd < 0) return Status::IoError("cannot create shared memory " + name + ": " + std::strerror(errno));
  if (::ftruncate(fd, sizeof(ShmLayout)) != 0) {
    const Status s = Status::IoError("cannot size shared memory " + name + ": " + std::strerror(errno));
    ::close(fd);
    ::shm_unlink(name.c_str());
    return s;
  }
  void* p = ::mmap(nullptr, sizeof(ShmLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return Status::IoError("cannot map shared memory " + name + ": " + std::strerror(errno));
  }
  auto* layout = new (p) ShmLayout{};  // zeroed by ftruncate; constructs the atomics
  layout->magic = kShmMagic;
  layout->version = kShmVersion;
  layout->slot_size = sizeof(ShmSlot);
  layout->slots = kShmSlots;
  layout->coordinator_pid = static_cast<uint64_t>(::getpid());
  return CoordShm(layout, name, /*owner=*/true);
}

Result<CoordShm> CoordShm::OpenReadOnly(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Status::Unavailable("cannot open the coordinator's shared memory " + name + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(ShmLayout)) {
    ::close(fd);
    return Status::Corruption("the coordinator's shared memory " + name + " is too small: another msched version?");
  }
  void* p = ::mmap(nullptr, sizeof(ShmLayout), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return Status::IoError("cannot map " + name + ": " + std::strerror(errno));
  auto* layout = static_cast<ShmLayout*>(p);
  if (layout->magic != kShmMagic || layout->version != kShmVersion || layout->slot_size != sizeof(ShmSlot) ||
      layout->slots != kShmSlots) {
    ::munmap(p, sizeof(ShmLayout));
    return Status::Corruption("the coordinator's shared memory " + name + " has another layout: mixed msched versions?");
  }
  return CoordShm(layout, name, /*owner=*/false);
}

CoordShm::~CoordShm() {
  if (layout_ == nullptr) return;
  ::munmap(layout_, sizeof(ShmLayout));
  if (owner_) ::shm_unlink(name_.c_str());
}

std::string ShmNameFor(const std::string& socket_path) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: a short, stable name per socket
  for (unsigned char c : socket_path) h = (h ^ c) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof name, "/msched-%u-%016llx", static_cast<unsigned>(::geteuid()),
                static_cast<unsigned long long>(h));
  return name;
}

}  // namespace msched

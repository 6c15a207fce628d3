// The coordinator's hot state in shared memory: one slot per job, written
// only by mschedd, mapped read-only by each job so that its launch path can
// check whether it may run without a system call. The memory is an
// anonymous memfd with no name anywhere, so no other user can pre-create,
// find or read it; a job receives a read-only descriptor of it with its
// Welcome (SCM_RIGHTS), from which no writable mapping can be made. It
// carries a magic, a layout version and its size; a client refuses a
// mapping it does not understand.
// A slot's fields are independent atomics: a reader may see a gate opened
// a moment before the matching slice end; the protocol's Go message, not the
// slot, is what starts a job, so that is harmless.
// Thread-safe (atomics). Used by mschedd and the hook's coordinator client.
#pragma once

#include <cstdint>

#include "msched/gate_layout.h"
#include "msched/status.h"

namespace msched {

class CoordShm {
 public:
  // mschedd: a fresh mapping, and a read-only descriptor to hand to jobs.
  static Result<CoordShm> Create();
  // A job: the coordinator's mapping from the descriptor it was sent
  // (which this closes), read-only.
  static Result<CoordShm> OpenReadOnly(int fd);
  CoordShm(CoordShm&& o) noexcept : layout_(o.layout_), reader_fd_(o.reader_fd_) {
    o.layout_ = nullptr;
    o.reader_fd_ = -1;
  }
  CoordShm& operator=(CoordShm&&) = delete;
  CoordShm(const CoordShm&) = delete;
  ~CoordShm();

  ShmSlot& slot(uint32_t i) { return layout_->slot[i]; }
  const ShmSlot& slot(uint32_t i) const { return layout_->slot[i]; }
  // The coordinator's read-only descriptor for jobs (-1 in a job).
  int reader_fd() const { return reader_fd_; }

 private:
  CoordShm(ShmLayout* layout, int reader_fd) : layout_(layout), reader_fd_(reader_fd) {}
  ShmLayout* layout_;
  int reader_fd_;
};

}  // namespace msched

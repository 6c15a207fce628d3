// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the capability attributes clang's thread-safety analysis needs (libstdc++'s
// std::mutex carries none), so members can be MSCHED_GUARDED_BY a Mutex.
// Thread-safe. Any layer may include it.
// Example:
//   MutexLock lock(&mu_);
//   while (!ready_) cv_.WaitFor(&mu_, std::chrono::milliseconds(50));
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace msched {

class MSCHED_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() MSCHED_ACQUIRE() { mu_.lock(); }
  void Unlock() MSCHED_RELEASE() { mu_.unlock(); }
  // For the analysis only: where it cannot see that the caller holds this.
  void AssertHeld() const MSCHED_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `*mu` from construction to destruction; Unlock() and Lock() let a
// scope drop it for a while (it must hold it again when the scope ends).
class MSCHED_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) MSCHED_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() MSCHED_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() MSCHED_RELEASE() { mu_->Unlock(); }
  void Lock() MSCHED_ACQUIRE() { mu_->Lock(); }

 private:
  Mutex* const mu_;
};

// A condition variable waited on with a Mutex held.
class CondVar {
 public:
  // Releases `*mu` while waiting, at most `timeout`; holds it again on
  // return. False when the wait timed out (true may be spurious: recheck).
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) MSCHED_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();  // still held: the caller's scope releases it
    return woken;
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace msched

// Lock contracts the compiler checks: macros for clang's thread-safety
// analysis (-Wthread-safety; see the MSCHED_THREAD_SAFETY build option).
// Under clang they expand to its capability attributes, elsewhere to
// nothing. Mark the data a lock protects with MSCHED_GUARDED_BY(mu_) and
// the functions that must be called with it held with MSCHED_REQUIRES(mu_).
// Example:
//   Mutex mu_;
//   int count_ MSCHED_GUARDED_BY(mu_);
//   void BumpLocked() MSCHED_REQUIRES(mu_) { ++count_; }
// Has no state. Any layer may include it.
#pragma once

#if defined(__clang__)
#define MSCHED_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define MSCHED_THREAD_ATTRIBUTE(x)
#endif

// A type that is a lock (a "capability" to clang), e.g. msched::Mutex.
#define MSCHED_CAPABILITY(name) MSCHED_THREAD_ATTRIBUTE(capability(name))
// An RAII type that holds a capability for its lifetime, e.g. MutexLock.
#define MSCHED_SCOPED_CAPABILITY MSCHED_THREAD_ATTRIBUTE(scoped_lockable)

// A member read or written only with the lock held.
#define MSCHED_GUARDED_BY(mu) MSCHED_THREAD_ATTRIBUTE(guarded_by(mu))
// A pointer whose pointee is read or written only with the lock held.
#define MSCHED_PT_GUARDED_BY(mu) MSCHED_THREAD_ATTRIBUTE(pt_guarded_by(mu))
// Lock order, for clang's beta analysis: this lock is taken after (before) those.
#define MSCHED_ACQUIRED_AFTER(...) MSCHED_THREAD_ATTRIBUTE(acquired_after(__VA_ARGS__))
#define MSCHED_ACQUIRED_BEFORE(...) MSCHED_THREAD_ATTRIBUTE(acquired_before(__VA_ARGS__))

// The caller holds the lock(s), and still holds them on return.
#define MSCHED_REQUIRES(...) MSCHED_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
// The caller must not hold the lock(s): the function takes them itself.
#define MSCHED_EXCLUDES(...) MSCHED_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
// The function takes (releases) the lock(s) and returns with them held (not held).
#define MSCHED_ACQUIRE(...) MSCHED_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define MSCHED_RELEASE(...) MSCHED_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
// Tells the analysis the lock is held here (checked at run time, if at all).
#define MSCHED_ASSERT_CAPABILITY(x) MSCHED_THREAD_ATTRIBUTE(assert_capability(x))
// The function returns (a reference to) this lock: callers locking the
// result lock `x`.
#define MSCHED_RETURN_CAPABILITY(x) MSCHED_THREAD_ATTRIBUTE(lock_returned(x))

// Turns the analysis off for one function. Say beside it why it cannot follow.
#define MSCHED_NO_THREAD_SAFETY_ANALYSIS MSCHED_THREAD_ATTRIBUTE(no_thread_safety_analysis)

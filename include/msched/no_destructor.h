// NoDestructor<T>: a T constructed in place on first use and never
// destroyed, for the process-wide singletons of libmsched and the simulated
// driver: the host program's exit runs static destructors while its other
// threads, and its own atexit handlers, may still call into them (a hook
// wrapper during exit, the coordinator client's reader thread). Declared as
// a function-local static, it is initialised once, thread-safely, and its
// storage outlives every caller. Header-only, so that sim/ can use it too.
#pragma once

#include <new>
#include <utility>

namespace msched {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;
  ~NoDestructor() = default;  // deliberately leaves the T alive

  T* get() { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* get() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  T& operator*() { return *get(); }
  const T& operator*() const { return *get(); }
  T* operator->() { return get(); }
  const T* operator->() const { return get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace msched

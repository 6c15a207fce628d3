// The guard every hooked entry point runs through: count the call, find the
// real function, and decide whether msched acts (not when re-entered from
// the driver or msched itself, not in pass-through). msched's own work runs
// inside Safely: an exception there logs once and switches the process to
// pass-through; the host's call still goes to the driver.
// Used by hook/ only.
#pragma once

#include "entry_table.h"
#include "log.h"
#include "runtime.h"

namespace msched::hook {

template <typename Fn>
struct HookCall {
  Runtime* rt = nullptr;  // nullptr if the runtime could not be built
  Fn real = nullptr;      // nullptr if the driver lacks the entry point
  bool act = false;       // msched should do its work around the call
};

inline Runtime* RuntimeOrNull() noexcept {
  try {
    return &Runtime::Get();
  } catch (...) {
    return nullptr;
  }
}

template <typename Fn>
HookCall<Fn> Enter(Entry e) noexcept {
  HookCall<Fn> c;
  c.rt = RuntimeOrNull();
  if (c.rt) c.rt->counters().calls[static_cast<size_t>(e)]->Add();
  c.real = Real<Fn>(e);
  c.act = c.rt != nullptr && c.real != nullptr && !HookScope::Active() && !c.rt->passthrough();
  return c;
}

// The answer when the real driver has no function for `e`.
CUresult NoRealFunction(Entry e) noexcept;

template <typename F>
bool Safely(Runtime& rt, const char* where, F&& f) noexcept {
  try {
    f();
    return true;
  } catch (const std::exception& ex) {
    rt.Fail(where, ex.what());
  } catch (...) {
    rt.Fail(where, "unknown exception");
  }
  return false;
}

}  // namespace msched::hook

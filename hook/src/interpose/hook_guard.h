// The guard every hooked entry point runs through: count the call, find the
// real function, and decide whether msched acts (not when re-entered from
// the driver or msched itself, not in pass-through). msched's own work runs
// inside Safely: an exception there logs once and switches the process to
// pass-through; the host's call still goes to the driver.
// Used by hook/ only.
#pragma once

#include "interpose/entry_table.h"
#include "job/runtime.h"
#include "observe/log.h"

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

// The shape of a hook that only learns from a call: the real call
// (`call(real)`), then, when msched acts on it and the driver succeeded,
// `learn(runtime)` inside Safely, named by the entry point.
template <typename Fn, typename Call, typename Learn>
CUresult CallThenLearn(Entry e, Call&& call, Learn&& learn) {
  auto c = Enter<Fn>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = call(c.real);
  if (c.act && r == CUDA_SUCCESS) Safely(*c.rt, Info(e).symbol, [&] { learn(*c.rt); });
  return r;
}

}  // namespace msched::hook

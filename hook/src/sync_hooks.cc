// Synchronisation and stream capture. A successful synchronisation tells the
// memory manager which launches have completed (so their chunks can be
// evicted without waiting for them). Capture begin/end track whether any
// stream is capturing: while one is, msched injects no prefetch or event,
// which would invalidate the capture.
#include "hook_guard.h"
#include "hooks.h"

namespace msched::hook {

namespace {

// `stream` null: the whole context is known to be idle.
void AfterSync(Runtime& rt, CUstream stream, bool whole_context) {
  MutexLock lock(&rt.mu());
  auto& used = rt.streams_since_sync;
  const bool everything = whole_context || used.empty() || (used.size() == 1 && *used.begin() == stream);
  if (!everything) return;
  rt.memory().MarkCompleted(rt.seq());
  used.clear();
}

}  // namespace

CUresult Hook_cuCtxSynchronize(Entry e) {
  auto c = Enter<PFN_cuCtxSynchronize_v2000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real();
  if (c.act && r == CUDA_SUCCESS) Safely(*c.rt, "cuCtxSynchronize", [&] { AfterSync(*c.rt, nullptr, true); });
  return r;
}

CUresult Hook_cuCtxSynchronize(Entry e, CUcontext ctx) {
  auto c = Enter<PFN_cuCtxSynchronize_v13000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(ctx);
  if (c.act && r == CUDA_SUCCESS) Safely(*c.rt, "cuCtxSynchronize", [&] { AfterSync(*c.rt, nullptr, true); });
  return r;
}

CUresult Hook_cuStreamSynchronize(Entry e, CUstream stream) {
  auto c = Enter<PFN_cuStreamSynchronize_v2000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(stream);
  if (c.act && r == CUDA_SUCCESS) {
    Safely(*c.rt, "cuStreamSynchronize", [&] {
      const CUstream effective = stream == nullptr && Info(e).flavour != 0 ? CU_STREAM_PER_THREAD : stream;
      AfterSync(*c.rt, effective, false);
    });
  }
  return r;
}

CUresult Hook_cuEventSynchronize(Entry e, CUevent event) {
  auto c = Enter<PFN_cuEventSynchronize_v2000>(e);
  if (!c.real) return NoRealFunction(e);
  return c.real(event);
}

CUresult Hook_cuStreamBeginCapture(Entry e, CUstream stream, CUstreamCaptureMode mode) {
  auto c = Enter<PFN_cuStreamBeginCapture_v10010>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(stream, mode);
  if (c.rt && r == CUDA_SUCCESS) {
    Safely(*c.rt, "cuStreamBeginCapture", [&] {
      MutexLock lock(&c.rt->mu());
      c.rt->capturing_streams.insert(stream);
      c.rt->capturing.store(static_cast<int>(c.rt->capturing_streams.size()));
    });
  }
  return r;
}

CUresult Hook_cuStreamEndCapture(Entry e, CUstream stream, CUgraph* graph) {
  auto c = Enter<PFN_cuStreamEndCapture_v10000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(stream, graph);
  // The capture is over whatever the result (an invalidated capture ends
  // with an error), except when the stream was not capturing at all.
  if (c.rt && r != CUDA_ERROR_ILLEGAL_STATE) {
    Safely(*c.rt, "cuStreamEndCapture", [&] {
      MutexLock lock(&c.rt->mu());
      c.rt->capturing_streams.erase(stream);
      c.rt->capturing.store(static_cast<int>(c.rt->capturing_streams.size()));
    });
  }
  return r;
}

}  // namespace msched::hook

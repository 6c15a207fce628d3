// Synchronisation and stream capture. A successful synchronisation tells the
// memory manager which launches have completed (so their chunks can be
// evicted without waiting for them), and the coordinator client that the
// job's launches so far are done (a job idles only once it waited for its
// work: see CoordClient's idle yield). Capture begin/end track whether any
// stream is capturing: while one is, msched injects no prefetch or event,
// which would invalidate the capture.
#include <utility>

#include "client/coord_client.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "job/residency.h"

namespace msched::hook {

namespace {

void AfterSync(Runtime& rt, CUstream stream, bool whole_context) {
  MutexLock lock(&rt.mu());
  if (!rt.SynchronizedAll(stream, whole_context)) return;
  rt.job().Synchronized(rt.seq());
  NoteOverBudget(rt);
}

// What a coordinated job had launched when a synchronisation began: once it
// succeeds, all of that is complete.
struct SyncWitness {
  CoordClient* client = CoordClient::Active();
  uint64_t passes = client != nullptr ? client->passes() : 0;
  void Done() const {
    if (client != nullptr) client->Synchronized(passes);
  }
};

// A synchronisation (`call(real)`) of `stream`, or of the whole context:
// once it succeeded, the memory manager and the coordinator client learn
// what completed.
template <typename Fn, typename Call>
CUresult SyncHook(Entry e, CUstream stream, bool whole_context, Call&& call) {
  const SyncWitness witness;
  return CallThenLearn<Fn>(e, std::forward<Call>(call), [&](Runtime& rt) {
    AfterSync(rt, whole_context ? nullptr : EffectiveStream(e, stream), whole_context);
    witness.Done();
  });
}

}  // namespace

CUresult Hook_cuCtxSynchronize(Entry e) {
  return SyncHook<PFN_cuCtxSynchronize_v2000>(e, nullptr, true, [](auto real) { return real(); });
}

CUresult Hook_cuCtxSynchronize(Entry e, CUcontext ctx) {
  return SyncHook<PFN_cuCtxSynchronize_v13000>(e, nullptr, true, [&](auto real) { return real(ctx); });
}

// A stream's synchronisation counts as the job's: the common case is one
// stream (a framework's current stream), and a job whose other streams are
// still busy when it yields drains them at its Stop.
CUresult Hook_cuStreamSynchronize(Entry e, CUstream stream) {
  return SyncHook<PFN_cuStreamSynchronize_v2000>(e, stream, false, [&](auto real) { return real(stream); });
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
      c.rt->CaptureBegan(stream);
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
      c.rt->CaptureEnded(stream);
    });
  }
  return r;
}

}  // namespace msched::hook

// Driver API: streams, events, synchronisation, stream capture and graphs.
// Synchronising moves the process's virtual clock to the completion time of
// the work it waits for; the sticky error of an illegal access surfaces here.
#include "api.h"

using msim::Call;
using msim::Event;
using msim::Graph;
using msim::NeedCtx;
using msim::Process;
using msim::Stream;

namespace {

Event* FindEvent(Process& p, CUevent e) {
  auto* ev = reinterpret_cast<Event*>(e);
  return p.events.count(ev) ? ev : nullptr;
}

CUresult WithStream(CUstream stream, bool ptsz, const std::function<CUresult(Process&, Stream*)>& fn,
                    const char* entry = __builtin_FUNCTION()) {
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        CUresult err = CUDA_SUCCESS;
        Stream* s = p.ResolveStream(stream, ptsz, &err);
        return s ? fn(p, s) : err;
      },
      entry);
}

CUresult Synchronize(CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [](Process& p, Stream* s) {
        if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        p.AdvanceTo(s == &p.legacy ? p.OpStart(s) : s->ready);
        return p.sticky_error;
      },
      entry);
}

CUresult Query(CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [](Process& p, Stream* s) {
        if (p.sticky_error) return p.sticky_error;
        return s->ready <= p.now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
      },
      entry);
}

CUresult WaitEvent(CUstream stream, CUevent event, unsigned int flags, bool ptsz,
                   const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [&](Process& p, Stream* s) {
        Event* ev = FindEvent(p, event);
        if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
        if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
        if (ev->recorded) s->ready = std::max(s->ready, ev->time);
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult Record(CUevent event, CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [&](Process& p, Stream* s) {
        Event* ev = FindEvent(p, event);
        if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
        if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        ev->time = p.OpStart(s);
        ev->recorded = true;
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult BeginCapture(CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [](Process& p, Stream* s) {
        if (s == &p.legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
        s->capture = std::make_shared<Graph>();
        ++p.capturing;
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult EndCapture(CUstream stream, CUgraph* graph, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(
      stream, ptsz,
      [&](Process& p, Stream* s) {
        if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
        auto* g = new Graph(*s->capture);
        p.graphs.insert(g);
        s->capture.reset();
        --p.capturing;
        *graph = reinterpret_cast<CUgraph>(g);
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult IsCapturing(CUstream stream, CUstreamCaptureStatus* status, bool ptsz,
                     const char* entry = __builtin_FUNCTION()) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(
      stream, ptsz,
      [&](Process&, Stream* s) {
        *status = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult GraphLaunch(CUgraphExec exec, CUstream stream, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  return WithStream(
      stream, ptsz,
      [&](Process& p, Stream* s) {
        auto* g = reinterpret_cast<Graph*>(exec);
        if (!p.graphs.count(g) || !g->executable) return CUDA_ERROR_INVALID_HANDLE;
        for (msim::GraphNode& n : g->nodes) {
          if (!n.enabled) continue;  // as an empty node: its dependents still wait for what it waited for
          std::vector<void*> params;
          for (auto& bytes : n.params) params.push_back(bytes.data());
          if (CUresult r = msim::RunKernel(p, s, n.kernel, params.data(), n.dims)) return r;
        }
        return CUDA_SUCCESS;
      },
      entry);
}

CUresult HostFunc(CUstream stream, CUhostFn fn, void* data, bool ptsz, const char* entry = __builtin_FUNCTION()) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(
      stream, ptsz,
      [&](Process& p, Stream* s) {
        if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        p.OpEnd(s, p.OpStart(s));
        fn(data);  // all earlier work on the stream has already run
        return CUDA_SUCCESS;
      },
      entry);
}

}  // namespace

MSIM_EXPORT CUresult cuStreamCreate(CUstream* ph, unsigned int flags) {
  if (ph == nullptr || (flags & ~CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    auto* s = new Stream();
    s->flags = flags;
    s->ready = p.now();
    p.streams.insert(s);
    *ph = reinterpret_cast<CUstream>(s);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  const CUresult r = cuStreamCreate(ph, flags);
  if (r == CUDA_SUCCESS) reinterpret_cast<Stream*>(*ph)->priority = priority;
  return r;
}

MSIM_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* s = reinterpret_cast<Stream*>(stream);
    if (!p.streams.erase(s)) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capture) --p.capturing;
    // Work queued on it still counts toward context synchronisation.
    p.legacy.ready = std::max(p.legacy.ready, s->flags & CU_STREAM_NON_BLOCKING ? p.legacy.ready : s->ready);
    delete s;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuStreamGetFlags(CUstream stream, unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(stream, false, [&](Process&, Stream* s) {
    *flags = s->flags;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuStreamGetPriority(CUstream stream, int* priority) {
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(stream, false, [&](Process&, Stream* s) {
    *priority = s->priority;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuStreamSynchronize(CUstream s) { return Synchronize(s, false); }
MSIM_DECLARE(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz);
CUresult cuStreamSynchronize_ptsz(CUstream s) { return Synchronize(s, true); }
MSIM_EXPORT CUresult cuStreamQuery(CUstream s) { return Query(s, false); }
MSIM_DECLARE(cuStreamQuery_ptsz, PFN_cuStreamQuery_v7000_ptsz);
CUresult cuStreamQuery_ptsz(CUstream s) { return Query(s, true); }
MSIM_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f) { return WaitEvent(s, e, f, false); }
MSIM_DECLARE(cuStreamWaitEvent_ptsz, PFN_cuStreamWaitEvent_v7000_ptsz);
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int f) { return WaitEvent(s, e, f, true); }

MSIM_EXPORT CUresult cuCtxSynchronize() {
  return Call(NeedCtx::kYes, [](Process& p) {
    p.AdvanceTo(p.AllStreamsReady());
    return p.sticky_error;
  });
}
MSIM_DECLARE(cuCtxSynchronize_v2, PFN_cuCtxSynchronize_v13000);
CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* c = reinterpret_cast<msim::Context*>(ctx ? ctx : msim::CurrentContext());
    if (c == nullptr || (c != &p.primary && !p.contexts.count(c))) return CUDA_ERROR_INVALID_CONTEXT;
    p.AdvanceTo(p.AllStreamsReady());
    return p.sticky_error;
  });
}

// ---- Events ---------------------------------------------------------------

MSIM_EXPORT CUresult cuEventCreate(CUevent* ph, unsigned int flags) {
  if (ph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kYes, [&](Process& p) {
    auto* ev = new Event();
    ev->flags = flags;
    p.events.insert(ev);
    *ph = reinterpret_cast<CUevent>(ev);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    Event* ev = FindEvent(p, event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    p.events.erase(ev);
    delete ev;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { return Record(e, s, false); }
MSIM_DECLARE(cuEventRecord_ptsz, PFN_cuEventRecord_v7000_ptsz);
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return Record(e, s, true); }
MSIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int) { return Record(e, s, false); }
MSIM_DECLARE(cuEventRecordWithFlags_ptsz, PFN_cuEventRecordWithFlags_v11010_ptsz);
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int) { return Record(e, s, true); }

MSIM_EXPORT CUresult cuEventSynchronize(CUevent event) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    Event* ev = FindEvent(p, event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (ev->recorded) p.AdvanceTo(ev->time);
    return p.sticky_error;
  });
}

MSIM_EXPORT CUresult cuEventQuery(CUevent event) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    Event* ev = FindEvent(p, event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    return !ev->recorded || ev->time <= p.now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  });
}

MSIM_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    Event* a = FindEvent(p, start);
    Event* b = FindEvent(p, end);
    if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if (a->time > p.now() || b->time > p.now()) return CUDA_ERROR_NOT_READY;
    *ms = static_cast<float>((static_cast<double>(b->time) - static_cast<double>(a->time)) / 1e6);
    return CUDA_SUCCESS;
  });
}
MSIM_DECLARE(cuEventElapsedTime, PFN_cuEventElapsedTime_v2000);
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime_v2(ms, start, end); }

// ---- Capture and graphs ---------------------------------------------------

MSIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode) { return BeginCapture(s, false); }
MSIM_DECLARE(cuStreamBeginCapture_v2_ptsz, PFN_cuStreamBeginCapture_v10010_ptsz);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode) { return BeginCapture(s, true); }
MSIM_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* g) { return EndCapture(s, g, false); }
MSIM_DECLARE(cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz);
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) { return EndCapture(s, g, true); }
MSIM_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* st) { return IsCapturing(s, st, false); }
MSIM_DECLARE(cuStreamIsCapturing_ptsz, PFN_cuStreamIsCapturing_v10000_ptsz);
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* st) { return IsCapturing(s, st, true); }

namespace {

// Device launch and upload on instantiation (`params` flags) are not
// modelled: refused, never ignored.
CUresult Instantiate(CUgraphExec* exec, CUgraph graph, const CUDA_GRAPH_INSTANTIATE_PARAMS* params = nullptr,
                     const char* entry = __builtin_FUNCTION()) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr && params->flags != 0) return CUDA_ERROR_NOT_SUPPORTED;
  return Call(
      NeedCtx::kYes,
      [&](Process& p) {
        auto* g = reinterpret_cast<Graph*>(graph);
        if (!p.graphs.count(g) || g->executable) return CUDA_ERROR_INVALID_HANDLE;
        auto* e = new Graph(*g);
        e->executable = true;
        p.graphs.insert(e);
        *exec = reinterpret_cast<CUgraphExec>(e);
        return CUDA_SUCCESS;
      },
      entry);
}

// Where the node behind handle `node` lives: a (non-executable) graph and
// its index there; graph null when no live graph holds it.
struct NodeRef {
  Graph* graph = nullptr;
  size_t index = 0;
  msim::GraphNode* operator->() const { return &graph->nodes[index]; }
  explicit operator bool() const { return graph != nullptr; }
};

NodeRef FindNode(Process& p, CUgraphNode node) {
  for (Graph* g : p.graphs) {
    if (g->executable) continue;
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      if (reinterpret_cast<CUgraphNode>(&g->nodes[i]) == node) return {g, i};
    }
  }
  return {};
}

// Executable graph `exec`'s copy of the source graph's node `node`.
msim::GraphNode* FindExecNode(Process& p, CUgraphExec exec, CUgraphNode node) {
  auto* e = reinterpret_cast<Graph*>(exec);
  const NodeRef source = FindNode(p, node);
  if (!p.graphs.count(e) || !e->executable || !source) return nullptr;
  for (msim::GraphNode& n : e->nodes) {
    if (n.id == source->id) return &n;
  }
  return nullptr;
}

// Copies `count` handles out as the driver does: the first *capacity of
// them, the rest of the array nulled, *capacity set to how many there are.
template <typename T>
void HandOut(const std::vector<T>& handles, T* out, size_t* capacity) {
  if (out != nullptr) {
    for (size_t i = 0; i < *capacity; ++i) out[i] = i < handles.size() ? handles[i] : nullptr;
  }
  *capacity = handles.size();
}

}  // namespace

MSIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  return Instantiate(exec, graph);
}
MSIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return Instantiate(exec, graph, params);
}
MSIM_DECLARE(cuGraphInstantiateWithParams_ptsz, PFN_cuGraphInstantiateWithParams_v12000_ptsz);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return Instantiate(exec, graph, params);
}

MSIM_EXPORT CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    auto* g = reinterpret_cast<Graph*>(graph);
    if (!p.graphs.count(g) || g->executable) return CUDA_ERROR_INVALID_HANDLE;
    std::vector<CUgraphNode> handles;
    for (msim::GraphNode& n : g->nodes) handles.push_back(reinterpret_cast<CUgraphNode>(&n));
    HandOut(handles, nodes, count);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    if (!FindNode(p, node)) return CUDA_ERROR_INVALID_VALUE;
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode* deps, CUgraphEdgeData* edges,
                                                   size_t* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    const NodeRef n = FindNode(p, node);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUgraphNode> handles;
    for (size_t d : n->deps) handles.push_back(reinterpret_cast<CUgraphNode>(&n.graph->nodes[d]));
    if (edges != nullptr && deps != nullptr) {
      for (size_t i = 0; i < *count; ++i) edges[i] = CUgraphEdgeData{};  // default edges: full dependencies
    }
    HandOut(handles, deps, count);
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    const NodeRef n = FindNode(p, node);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    n->param_ptrs.clear();
    for (auto& bytes : n->params) n->param_ptrs.push_back(bytes.data());
    *out = CUDA_KERNEL_NODE_PARAMS{};
    out->func = reinterpret_cast<CUfunction>(const_cast<msim::KernelDecl*>(n->kernel));
    out->gridDimX = n->dims.grid[0], out->gridDimY = n->dims.grid[1], out->gridDimZ = n->dims.grid[2];
    out->blockDimX = n->dims.block[0], out->blockDimY = n->dims.block[1], out->blockDimZ = n->dims.block[2];
    out->kernelParams = n->param_ptrs.data();
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node, unsigned int on) {
  return Call(NeedCtx::kNo, [&](Process& p) {
    msim::GraphNode* n = FindExecNode(p, exec, node);
    if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
    n->enabled = on != 0;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphNodeGetEnabled(CUgraphExec exec, CUgraphNode node, unsigned int* on) {
  if (on == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Call(NeedCtx::kNo, [&](Process& p) {
    msim::GraphNode* n = FindExecNode(p, exec, node);
    if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *on = n->enabled ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

MSIM_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return GraphLaunch(e, s, false); }
MSIM_DECLARE(cuGraphLaunch_ptsz, PFN_cuGraphLaunch_v10000_ptsz);
CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { return GraphLaunch(e, s, true); }

namespace {
CUresult DestroyGraph(Graph* g, bool executable, const char* entry = __builtin_FUNCTION()) {
  return Call(
      NeedCtx::kNo,
      [&](Process& p) {
        if (!p.graphs.count(g) || g->executable != executable) return CUDA_ERROR_INVALID_HANDLE;
        p.graphs.erase(g);
        delete g;
        return CUDA_SUCCESS;
      },
      entry);
}

}  // namespace

MSIM_EXPORT CUresult cuGraphDestroy(CUgraph graph) { return DestroyGraph(reinterpret_cast<Graph*>(graph), false); }
MSIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) { return DestroyGraph(reinterpret_cast<Graph*>(exec), true); }

MSIM_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) { return HostFunc(s, fn, data, false); }
MSIM_DECLARE(cuLaunchHostFunc_ptsz, PFN_cuLaunchHostFunc_v10000_ptsz);
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void* data) { return HostFunc(s, fn, data, true); }

// CUDA graphs: cuGraphInstantiateWithFlags/WithParams, cuGraphLaunch,
// cuGraphExecDestroy and cuGraphDestroy. A replayed graph's kernels never
// pass through the launch hooks, so msched predicts them once, when the
// graph is instantiated: it walks the source graph's nodes
// (cuGraphGetNodes, cuGraphNodeGetDependencies), and evaluates each kernel
// node's template on the arguments captured in it
// (cuGraphKernelNodeGetParams), as if the kernel were launched. Each launch
// of the executable graph then follows the plan of model/graph_plan.h: its
// data made resident before it, or, when the data exceeds the budget, the
// graph launched once per segment with only that segment's nodes enabled
// (cuGraphNodeSetEnabled), each segment's data made resident before it.
// Invariants:
//   - A node's enabled state is the user's again when a launch returns: the
//     user's state is read (cuGraphNodeGetEnabled) before each split
//     launch, and a node the user disabled stays disabled in every segment.
//   - Split launches of one executable graph are serialised (its record's
//     lock), so two threads never toggle its nodes at once.
//   - Node handles belong to the source graph, which the program may destroy
//     right after instantiation (PyTorch does): its destruction is deferred
//     until the last executable graph planned from it is destroyed.
//   - Parameters changed after instantiation (cuGraphExecKernelNodeSetParams,
//     cuGraphExecUpdate, device-side updates) run as the user set them, since
//     every segment is a launch of the user's own executable graph; only the
//     prediction is stale, and stale data faults in.
// Nothing is planned or injected while a stream captures, for graphs made
// for device launch, or in profile mode.
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "client/coord_client.h"
#include "interpose/driver_functions.h"
#include "interpose/graph_registry.h"
#include "interpose/hook_guard.h"
#include "interpose/hooks.h"
#include "interpose/launch_prediction.h"
#include "job/residency.h"
#include "model/graph_plan.h"
#include "model/predictor.h"
#include "observe/log.h"

namespace msched::hook {
namespace {

// Predicts kernel node `node` into `spec`, as its launch would be predicted;
// false when it cannot be (its data then faults in).
bool PredictKernelNode(Runtime& rt, CUgraphNode node, GraphNodeSpec* spec) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (RealDriver().cuGraphKernelNodeGetParams == nullptr ||
      RealDriver().cuGraphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) {
    return false;
  }
  const CUfunction f = p.func != nullptr ? p.func : reinterpret_cast<CUfunction>(p.kern);
  if (f == nullptr) return false;
  const KernelInfo* k = KernelOf(rt, f);
  Prediction pred;
  LaunchPrediction lp(
      {rt.mode(), rt.unknown(), k->tmpl, LaunchArguments(*k, p.kernelParams, p.extra),
       Dims(p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes)},
      &pred);
  if (lp.left_to_faults()) return false;  // a segment's launch loads ahead or not at all
  {
    MutexLock lock(&rt.mu());
    lp.Judge(rt.allocs());
    if (!lp.covers_working_set()) return false;
    rt.CompletePrediction(lp);
  }
  spec->regions = pred.regions();
  return true;
}

// Walks `graph` and predicts its kernel nodes; null when the driver cannot
// describe it (then its launches go unpredicted, like those of a graph msched never saw).
std::shared_ptr<GraphRecord> Walk(Runtime& rt, CUgraph graph) {
  const DriverFunctions& d = RealDriver();
  if (d.cuGraphGetNodes == nullptr || d.cuGraphNodeGetType == nullptr || d.cuGraphNodeGetDependencies == nullptr) {
    return nullptr;
  }
  auto record = std::make_shared<GraphRecord>();
  record->source = graph;
  size_t count = 0;
  if (d.cuGraphGetNodes(graph, nullptr, &count) != CUDA_SUCCESS) return nullptr;
  record->nodes.resize(count);
  if (count > 0 && d.cuGraphGetNodes(graph, record->nodes.data(), &count) != CUDA_SUCCESS) return nullptr;
  record->nodes.resize(count);
  std::unordered_map<CUgraphNode, size_t> index;
  for (size_t i = 0; i < count; ++i) index[record->nodes[i]] = i;
  record->specs.resize(count);
  uint64_t predicted = 0, unpredicted = 0;
  for (size_t i = 0; i < count; ++i) {
    GraphNodeSpec& spec = record->specs[i];
    CUgraphNodeType type;
    if (d.cuGraphNodeGetType(record->nodes[i], &type) != CUDA_SUCCESS) return nullptr;
    spec.can_disable = type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMSET ||
                       type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_EMPTY;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      (PredictKernelNode(rt, record->nodes[i], &spec) ? predicted : unpredicted) += 1;
    }
    size_t ndeps = 0;
    if (d.cuGraphNodeGetDependencies(record->nodes[i], nullptr, nullptr, &ndeps) != CUDA_SUCCESS) return nullptr;
    std::vector<CUgraphNode> deps(ndeps);
    if (ndeps > 0 && d.cuGraphNodeGetDependencies(record->nodes[i], deps.data(), nullptr, &ndeps) != CUDA_SUCCESS) {
      return nullptr;
    }
    for (CUgraphNode dep : deps) {
      auto it = index.find(dep);
      if (it == index.end()) return nullptr;
      spec.deps.push_back(it->second);
    }
  }
  HookCounters& c = rt.counters();
  c.graphs_planned->Add();
  c.graph_nodes_predicted->Add(predicted);
  c.graph_nodes_unpredicted->Add(unpredicted);
  if (unpredicted > 0) {
    MutexLock lock(&rt.mu());
    ForgoReadMostly(rt);
  }
  return record;
}

// After a successful instantiation of `graph` as `exec`: plans it.
void Plan(Runtime& rt, CUgraphExec exec, CUgraph graph) {
  if (!rt.predicting() || rt.mode() == Mode::kProfile || rt.AnyCapturing()) {
    return;
  }
  if (std::shared_ptr<GraphRecord> record = Walk(rt, graph)) {
    GraphRegistry::Get().Add(exec, std::move(record));
  } else {
    LogOnce("graph-walk", spdlog::level::info,
            "a CUDA graph could not be walked; its kernels are not predicted and their data faults in");
  }
}

// The memory the job's launches may fill: what segments are sized by.
uint64_t ManagedBudget(Runtime& rt) {
  MutexLock lock(&rt.mu());
  rt.LearnDeviceMemory();
  return rt.job().budget().Managed();
}

void MakeResident(Runtime& rt, const std::vector<PredictedRegion>& regions, CUstream stream) {
  Safely(rt, "cuGraphLaunch", [&] {
    MutexLock lock(&rt.mu());
    PrepareResidency(rt, regions, stream);
  });
}

// Sets node `i` of `g` enabled or not in `exec` unless it already is.
CUresult SetEnabled(CUgraphExec exec, GraphRecord& g, std::vector<unsigned>& now, size_t i, unsigned on) {
  if (now[i] == on) return CUDA_SUCCESS;
  const CUresult r = RealDriver().cuGraphNodeSetEnabled(exec, g.nodes[i], on);
  if (r == CUDA_SUCCESS) now[i] = on;
  return r;
}

// One launch of a split graph: each segment launched with only its nodes
// enabled (those the user left enabled), after its data is made resident;
// the user's enabled states are back when it returns. Returns the first
// failure; a segment that fails to launch ends the launch there.
template <typename Real>
CUresult LaunchSplit(Runtime& rt, CUgraphExec exec, GraphRecord& g, CUstream stream, Real&& real)
    MSCHED_REQUIRES(g.mu) {
  const DriverFunctions& d = RealDriver();
  const size_t n = g.nodes.size();
  std::vector<unsigned> user(n, 1);
  for (size_t i = 0; i < n; ++i) {
    if (d.cuGraphNodeGetEnabled(exec, g.nodes[i], &user[i]) != CUDA_SUCCESS) {
      // The source graph's nodes are no longer the exec's (a node was
      // destroyed): launch it whole, with what fits made resident.
      LogOnce("graph-nodes", spdlog::level::info,
              "a CUDA graph's nodes changed after instantiation; it is launched whole");
      const GatePass pass = PassGate(rt);
      MakeResident(rt, g.plan.segments.front().regions, stream);
      return real();
    }
  }
  std::vector<unsigned> now = user;
  CUresult result = CUDA_SUCCESS;
  std::vector<uint8_t> member(n);
  GatePass pass;
  for (const GraphSegment& segment : g.plan.segments) {
    std::fill(member.begin(), member.end(), 0);
    for (size_t i : segment.nodes) member[i] = 1;
    for (size_t i = 0; i < n && result == CUDA_SUCCESS; ++i) result = SetEnabled(exec, g, now, i, user[i] & member[i]);
    if (result != CUDA_SUCCESS) break;
    pass.Release();  // the previous segment is queued; a stop may fall between segments
    pass = PassGate(rt);
    MakeResident(rt, segment.regions, stream);
    rt.counters().graph_segments->Add();
    result = real();
    if (result != CUDA_SUCCESS) break;
  }
  for (size_t i = 0; i < n; ++i) {
    const CUresult r = SetEnabled(exec, g, now, i, user[i]);
    if (r != CUDA_SUCCESS && result == CUDA_SUCCESS) result = r;
  }
  if (result != CUDA_SUCCESS) {
    LogOnce("graph-split", spdlog::level::warn, CheckDriverCall(result, "a split CUDA graph launch").ToString());
  }
  return result;
}

template <typename Real>
CUresult Instantiated(HookCall<Real>& c, CUresult r, CUgraphExec* exec, CUgraph graph) {
  if (r == CUDA_SUCCESS && c.act && exec != nullptr) {
    HookScope scope;
    Safely(*c.rt, "cuGraphInstantiate", [&] { Plan(*c.rt, *exec, graph); });
  }
  return r;
}

}  // namespace

CUresult Hook_cuGraphInstantiateWithFlags(Entry e, CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  auto c = Enter<PFN_cuGraphInstantiateWithFlags_v11040>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(exec, graph, flags);
  // A graph made for device launch is launched by kernels, not through cuGraphLaunch.
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) return r;
  return Instantiated(c, r, exec, graph);
}

CUresult Hook_cuGraphInstantiateWithParams(Entry e, CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  auto c = Enter<PFN_cuGraphInstantiateWithParams_v12000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(exec, graph, params);
  if (params != nullptr && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)) return r;
  return Instantiated(c, r, exec, graph);
}

CUresult Hook_cuGraphLaunch(Entry e, CUgraphExec exec, CUstream stream) {
  auto c = Enter<PFN_cuGraphLaunch_v10000>(e);
  if (!c.real) return NoRealFunction(e);
  if (!c.act) return c.real(exec, stream);
  HookScope scope;
  Runtime& rt = *c.rt;
  rt.counters().launches_graph->Add();
  stream = EffectiveStream(e, stream);
  auto real = [&] { return c.real(exec, stream); };
  std::shared_ptr<GraphRecord> g;
  if (!rt.AnyCapturing()) g = GraphRegistry::Get().Find(exec);
  if (g == nullptr) {
    const GatePass pass = PassGate(rt);
    return real();
  }
  GraphRecord& rec = *g;
  MutexLock lock(&rec.mu);
  // Planned again whenever the budget changed (a new grant): segments are
  // sized by it. The nodes' specs never change after the walk.
  uint64_t budget = 0;
  GraphPlan plan;
  if (Safely(rt, "cuGraphLaunch", [&] { budget = ManagedBudget(rt); }) && budget != rec.planned_for &&
      Safely(rt, "cuGraphLaunch", [&] { plan = PlanGraph(rec.specs, budget); })) {
    rec.plan = std::move(plan);
    rec.planned_for = budget;
  }
  if (rec.plan.segments.empty()) {  // planning failed (logged): as if unknown
    const GatePass pass = PassGate(rt);
    return real();
  }
  if (rec.plan.split && RealDriver().cuGraphNodeSetEnabled != nullptr &&
      RealDriver().cuGraphNodeGetEnabled != nullptr) {
    rt.counters().graph_launches_split->Add();
    return LaunchSplit(rt, exec, rec, stream, real);
  }
  const GatePass pass = PassGate(rt);
  MakeResident(rt, rec.plan.segments.front().regions, stream);
  return real();
}

CUresult Hook_cuGraphExecDestroy(Entry e, CUgraphExec exec) {
  auto c = Enter<PFN_cuGraphExecDestroy_v10000>(e);
  if (!c.real) return NoRealFunction(e);
  const CUresult r = c.real(exec);
  if (r != CUDA_SUCCESS || c.rt == nullptr) return r;
  const CUgraph source = GraphRegistry::Get().Remove(exec);
  if (source != nullptr && RealDriver().cuGraphDestroy != nullptr) (void)RealDriver().cuGraphDestroy(source);
  return r;
}

CUresult Hook_cuGraphDestroy(Entry e, CUgraph graph) {
  auto c = Enter<PFN_cuGraphDestroy_v10000>(e);
  if (!c.real) return NoRealFunction(e);
  if (c.rt != nullptr && GraphRegistry::Get().DeferDestroy(graph)) return CUDA_SUCCESS;
  return c.real(graph);
}

}  // namespace msched::hook

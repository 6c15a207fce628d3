// The executable graphs msched planned (graph_hooks.cc): each one's record
// of its source graph's nodes, their predictions and its current plan, and
// the source graphs they keep alive (a program may destroy a source graph
// right after instantiating it; its nodes' handles must outlive every
// executable graph planned from it). Thread-safe. Used by hook/ only.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "model/graph_plan.h"
#include "msched/no_destructor.h"

namespace msched::hook {

// What msched knows of one executable graph.
struct GraphRecord {
  CUgraph source = nullptr;
  std::vector<CUgraphNode> nodes;    // the source graph's nodes, by index
  std::vector<GraphNodeSpec> specs;  // their predictions and dependencies, by the same index (immutable)
  Mutex mu;                          // held through a launch: plans and toggles one at a time
  GraphPlan plan MSCHED_GUARDED_BY(mu);
  uint64_t planned_for MSCHED_GUARDED_BY(mu) = UINT64_MAX;  // the budget `plan` was made for
};

// Every planned executable graph, and the source graphs they keep alive.
class GraphRegistry {
 public:
  static GraphRegistry& Get() {
    static NoDestructor<GraphRegistry> r;  // hooks may run during exit
    return *r;
  }

  void Add(CUgraphExec exec, std::shared_ptr<GraphRecord> record) MSCHED_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    ++sources_[record->source].execs;
    execs_[exec] = std::move(record);
  }

  std::shared_ptr<GraphRecord> Find(CUgraphExec exec) MSCHED_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = execs_.find(exec);
    return it == execs_.end() ? nullptr : it->second;
  }

  // Forgets `exec`; returns the source graph to destroy now that nothing
  // needs it (its destruction was asked for and deferred), else null.
  CUgraph Remove(CUgraphExec exec) MSCHED_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = execs_.find(exec);
    if (it == execs_.end()) return nullptr;
    const CUgraph source = it->second->source;
    execs_.erase(it);
    Source& s = sources_[source];
    if (--s.execs > 0) return nullptr;
    const bool destroy = s.destroy_deferred;
    sources_.erase(source);
    return destroy ? source : nullptr;
  }

  // True when `graph` must outlive a planned executable graph: then its
  // destruction happens when the last of them is destroyed.
  bool DeferDestroy(CUgraph graph) MSCHED_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = sources_.find(graph);
    if (it == sources_.end()) return false;
    it->second.destroy_deferred = true;
    return true;
  }

 private:
  struct Source {
    int execs = 0;
    bool destroy_deferred = false;
  };
  Mutex mu_;
  std::unordered_map<CUgraphExec, std::shared_ptr<GraphRecord>> execs_ MSCHED_GUARDED_BY(mu_);
  std::unordered_map<CUgraph, Source> sources_ MSCHED_GUARDED_BY(mu_);
};

}  // namespace msched::hook

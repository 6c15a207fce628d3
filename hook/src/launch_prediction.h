// What the launch hooks (launch_hooks.cc) share with the graph hooks
// (graph_hooks.cc), which predict the kernel nodes of a graph as if each
// were launched: the kernel behind a handle and a launch's arguments.
// Used by hook/ only.
#pragma once

#include <cuda.h>

#include "kernel_cache.h"
#include "model/kernel_args.h"
#include "runtime.h"

namespace msched::hook {

// The kernel behind handle `f` (a CUfunction, or a CUkernel cast to one),
// resolved and cached on first sight; never null, valid for the life of the
// process. Lock-free when the calling thread saw `f` recently.
const KernelInfo* KernelOf(Runtime& rt, CUfunction f);

// A launch's arguments in whichever form they came (`params`, else the
// packed `extra` buffer); an empty view when the layout is unknown or
// `extra` is malformed.
ArgView LaunchArguments(const KernelInfo& k, void** params, void** extra);

}  // namespace msched::hook

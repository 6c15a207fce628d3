// What the launch hooks (launch_hooks.cc) share with the graph hooks
// (graph_hooks.cc), which predict the kernel nodes of a graph as if each
// were launched: the kernel behind a handle, a launch's dimensions and its
// arguments.
// Used by hook/ only.
#pragma once

#include <cuda.h>

#include "job/kernel_cache.h"
#include "job/runtime.h"
#include "model/kernel_args.h"

namespace msched::hook {

// The kernel behind handle `f` (a CUfunction, or a CUkernel cast to one),
// resolved and cached on first sight; never null, valid for the life of the
// process. Lock-free when the calling thread saw `f` recently.
const KernelInfo* KernelOf(Runtime& rt, CUfunction f);

// A launch's grid, block and dynamic shared memory.
LaunchDims Dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared);

// A launch's arguments in whichever form they came (`params`, else the
// packed `extra` buffer); an empty view when the layout is unknown or
// `extra` is malformed.
ArgView LaunchArguments(const KernelInfo& k, void** params, void** extra);

}  // namespace msched::hook

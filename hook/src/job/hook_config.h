// The hook's configuration: every MSCHED_* variable, parsed once from the
// environment on first use (no CUDA calls). Thread-safe.
#pragma once

#include "msched/config.h"

namespace msched::hook {

const ConfigParse& HookConfigParse();
inline const Config& HookConfig() { return HookConfigParse().config; }

}  // namespace msched::hook

#include "model/action_executor.h"

namespace msched {

Status ExecuteActions(const MemoryActions& actions, StreamHandle stream, DeviceOps& ops, MemoryManager& manager,
                      MovedBytes* moved) {
  if (actions.empty()) return Status::Ok();
  Status first_error;
  MemoryActions failed;
  auto note = [&](const Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
    return s.ok();
  };
  // Advice first: a write must not land on a read duplicate, and loads made
  // after the advice keep their host copies. Failed advice only costs the
  // copies back it would have saved.
  for (const ByteRange& r : actions.read_mostly_off) note(ops.SetReadMostly(r, false));
  for (const ByteRange& r : actions.read_mostly_on) note(ops.SetReadMostly(r, true));
  // Each plan that moves memory marks its place in the launch stream, so
  // that a later plan's evictions can wait for exactly the kernels that
  // used their victims rather than for everything queued by then.
  if (actions.op != 0 && !(actions.load.empty() && actions.evict.empty())) note(ops.MarkQueued(stream, actions.op));
  // This plan's evictions and loads touch different chunks and may overlap;
  // earlier plans' evictions must not overtake its loads.
  if (!actions.load.empty()) note(ops.LoadsAfterEvictions());
  if (actions.evict_after != 0 && !note(ops.EvictionsAfter(stream, actions.evict_after))) {
    // Evicting now could take memory from queued kernels: skip the evictions.
    failed.evict = actions.evict;
  } else {
    for (const ByteRange& r : actions.evict) {
      if (!note(ops.Prefetch(r, /*to_device=*/false))) failed.evict.push_back(r);
    }
  }
  for (const ByteRange& r : actions.load) {
    if (!note(ops.Prefetch(r, /*to_device=*/true))) failed.load.push_back(r);
  }
  if (!actions.load.empty()) note(ops.StreamAfterTransfers(stream));
  if (!failed.empty()) manager.Invalidate(failed);
  if (moved != nullptr) {
    moved->evicted = TotalBytes(actions.evict) - TotalBytes(failed.evict);
    moved->loaded = TotalBytes(actions.load) - TotalBytes(failed.load);
  }
  return first_error;
}

}  // namespace msched

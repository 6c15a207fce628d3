// Finding the lists a kernel walks (ListSlot in msched/templates.h). PyTorch's
// foreach kernels (every optimizer step) take their tensors as a struct of
// pointer slots and a byte per block naming the slot that block works on; a
// launch uses the slots up to its last block's, and the slots past it hold
// whatever an earlier launch (or the stack) left there, often pointers into
// live tensors. A template with a region per slot then prefetches tensors
// the launch never reads. This finds, in the struct, the byte array and the
// number of slots per pointer array that explain which regions each
// profiled launch touched, and guards each such region with its slot.
// Pure functions; thread-safe. Used by the fitter (template_fitter.h).
#pragma once

#include <vector>

#include "msched/templates.h"
#include "profile/template_fitter.h"

namespace msched {

// Sets `list` on the regions of `tmpl` that are slots of a list its launches
// walk, when the observations show one:
//   - a byte array in a struct parameter, on an 8-byte boundary, is a
//     block-to-slot map over its first grid.x bytes in every launch (0 for
//     the first block, never decreasing), names a slot other than 0 in some
//     launch, and is the first array with its last-block bytes (a later
//     one with the same is a copy an earlier launch left on the stack);
//   - the regions based before it in the struct, at least 8 of them on
//     8-byte steps from the lowest, are its slots: slot = ((offset - lowest
//     offset) / 8) mod the slots per pointer array (a struct of several
//     pointer arrays, one per tensor list, repeats them);
//   - every region a launch touched has a slot at most the array's byte
//     for the launch's last block. With `precision` above 1 (CUPTI), a
//     region counts as touched only with 2 MiB or more: the driver moves
//     whole pages and prefetches within 2 MiB blocks, so a stale slot's
//     pointer near a tensor in use collects bytes the kernel never read;
//   - of the arrays and slot counts that qualify, the one that would skip
//     the fewest (region, launch) pairs showing something touched (under
//     2 MiB), then the most showing nothing, then with the fewest slots per
//     array (none skipped: nothing is set).
void GuardListSlots(const std::vector<const Observation*>& obs, uint64_t precision, KernelTemplate* tmpl);

}  // namespace msched

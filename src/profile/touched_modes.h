// What one profiled launch touched on a real GPU, with the access mode of
// each range, from CUPTI's unified-memory records: the driver's migrations
// to the device (ranges with no access type, the driver's 64 KiB upgrade
// and 2 MiB-block prefetch included) and the GPU's page faults (a page each,
// read, write or atomic).
// A fault's type alone does not tell what a kernel wrote: a read fault maps
// an ordinary page writable, so a later write to it goes unseen. The
// profiler therefore advises every managed allocation read-mostly before
// each launch: a page the kernel reads is duplicated and mapped read-only,
// so every write faults, with a write type, even after a read; a migrated
// page with no write fault was only read. Pure functions. Used by the
// profile recorder (hook/src/observe/) and its tests.
#pragma once

#include <vector>

#include "profile/trace.h"

namespace msched {

// `records`: migrations (mode kRead: touched, no write seen) and faults
// (their access type), in any order, possibly overlapping. Returns the
// touched ranges sorted and disjoint, each with the union of the modes of
// the records over it, ranges that touch merged when their modes agree.
// Without `writes_fault` (the advice was not in force) a write may have
// gone unseen, so every range is kReadWrite.
std::vector<TouchedRange> TouchedByMode(const std::vector<TouchedRange>& records, bool writes_fault);

}  // namespace msched

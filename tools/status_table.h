// `msched status` for a terminal: the coordinator's status document (its
// fields are listed in docs/operate.md) rendered as a summary and a table of
// jobs within a width. Pure functions; thread-safe. Used by the msched CLI
// and its tests.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace msched {

// The summary (wrapped between its parts) and one row per job, every line at
// most `width` columns; 0 means no limit, every column at full width. When
// the full table does not fit, names longer than 16 columns are shortened
// first (ending in "…"), then the columns least needed to see who holds the
// GPU and why the others wait are left out, from SWAPS, OVER, BUDGET, PID, CLASS,
// PRIO, SLICES, WORKSET, DECLARED, USER, ALLOCATED and RESIDENT to WAITED
// and WHY, then names shrink to 6 columns; JOB, NAME and STATE always stay.
// A column is a UTF-8 code point.
std::string RenderStatus(const nlohmann::json& status, size_t width);

// The width to render for on `fd`: $COLUMNS when it is a positive number
// (as for ls and systemctl), else the terminal's width when `fd` is one,
// else 0 (a pipe or a file gets every column).
size_t OutputWidth(int fd);

}  // namespace msched

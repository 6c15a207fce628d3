// Reading the benchmark suite's JSON inputs (scenarios, device profiles, the
// statistics runs write) within the bounds of msched/bounded_input.h: a
// regular file of bounded size and nesting. Stateless; thread-safe. Used by
// bench/suite only.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace msched {

// The parsed file; a discarded value, with the reason (naming `path`) in
// *error, when it is not a regular file, is too large, nests too deep or is
// not JSON.
nlohmann::json ReadJsonFile(const std::string& path, std::string* error);

}  // namespace msched

// Running a program from a test: its exit status and everything it printed,
// with variables set or removed in its environment (a variable set to ""
// is removed). Test-only; thread-compatible.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "msched/json_checked.h"

namespace msched::testsupport {

struct ProgramRun {
  int status = -1;  // exit status, 128 + signal, or -1 when it could not start
  std::string out, err;
};

ProgramRun RunProgram(const std::vector<std::string>& argv, std::map<std::string, std::string> env);

// The whole file, or "" when it cannot be read.
std::string Slurp(const std::string& path);

// The "checksum NAME VALUE" lines of a workload run's output.
std::string Checksums(const std::string& out);

// The unsigned number at `path` in `j`, or 0 when absent.
using msched::JsonU64;

}  // namespace msched::testsupport

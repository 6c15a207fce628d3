#include "run_program.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/subprocess.h"

namespace msched::testsupport {

std::string Slurp(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

std::string Checksums(const std::string& out) {
  std::istringstream in(out);
  std::string line, sums;
  while (std::getline(in, line)) {
    if (line.rfind("checksum", 0) == 0) sums += line + "\n";
  }
  return sums;
}

ProgramRun RunProgram(const std::vector<std::string>& argv, std::map<std::string, std::string> env) {
  static int serial = 0;
  const std::string base = ::testing::TempDir() + "run_" + std::to_string(getpid()) + "_" + std::to_string(serial++);
  SpawnOptions o;
  for (auto& [k, v] : env) {
    if (v.empty())
      o.unset_env.push_back(k);
    else
      o.env[k] = v;
  }
  o.stdout_path = base + ".out";
  o.stderr_path = base + ".err";
  ProgramRun r;
  Result<Subprocess> p = Subprocess::Spawn(argv, o);
  if (!p.ok()) {
    r.err = p.status().ToString();
    return r;
  }
  r.status = p->Wait();
  r.out = Slurp(o.stdout_path);
  r.err = Slurp(o.stderr_path);
  ::unlink(o.stdout_path.c_str());
  ::unlink(o.stderr_path.c_str());
  return r;
}

}  // namespace msched::testsupport

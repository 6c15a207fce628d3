// `msched run` as users type it: every option shape reaches the program as
// its MSCHED_* variables, the program's own arguments arrive intact, its
// exit status comes back, and mistakes give one clear line and exit 2.
// The jobs here are plain programs with the coordinator off; the
// coordinator tests run real simulated-GPU jobs through `msched run`. Also
// the commands that need no coordinator: --version, --help, trace merge.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_program.h"

namespace {

namespace ts = msched::testsupport;

ts::ProgramRun Msched(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), MSCHED_CLI);
  env.emplace("MSCHED_SOCKET", "");
  env.emplace("LD_PRELOAD", "");
  return ts::RunProgram(args, env);
}

// A shell that prints each of its arguments in brackets.
const std::vector<std::string> kPrintArgs = {"/bin/sh", "-c", "printf '[%s]' \"$@\"", "sh"};

std::vector<std::string> Join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(MschedRunTest, TheProgramGetsExactlyItsArguments) {
  ts::ProgramRun r = Msched({"run", "--coord", "off", "--", "/bin/echo", "a", "b"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "a b\n");
  r = Msched(Join({"run", "--coord", "off", "--"}, Join(kPrintArgs, {"a b", "", "c", "--mem", "--"})));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[a b][][c][--mem][--]") << "spaces, empty arguments and option-like words pass through";
  // Without `--` the command starts at the first word that is not an option.
  r = Msched({"run", "--coord=off", "--mode", "off", "/bin/echo", "x", "y", "z"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "x y z\n");
  r = Msched({"run", "/bin/echo", "no", "options"}, {{"MSCHED_COORD", "off"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "no options\n");
}

TEST(MschedRunTest, EveryOptionShapeBecomesTheJobsVariables) {
  const std::vector<std::string> show = {
      "/bin/sh", "-c",
      "echo \"$MSCHED_MEM|$MSCHED_JOB_NAME|$MSCHED_CLASS|$MSCHED_PRIORITY|$MSCHED_MODE|$MSCHED_COORD|$MSCHED_SOCKET\"; "
      "case \"$LD_PRELOAD\" in *libmsched.so*) echo preloaded;; esac"};
  ts::ProgramRun r = Msched(Join({"--socket", "/tmp/a.sock", "run", "--mem", "1G", "--name=n1", "--class", "short",
                                  "--priority=-3", "--mode", "um", "--coord", "off", "--"},
                                 show));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1G|n1|short|-3|um|off|/tmp/a.sock\npreloaded\n");
  // --socket after the command word, and inside run's options.
  r = Msched(Join({"run", "--socket", "/tmp/b.sock", "--coord", "off"}, show));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("|/tmp/b.sock\n"), std::string::npos) << r.out;
  r = Msched(Join({"run", "--coord", "off", "--socket=/tmp/c.sock", "--"}, show));
  EXPECT_NE(r.out.find("|/tmp/c.sock\n"), std::string::npos) << r.out;
}

// `msched run --name` with a name over 63 bytes runs the job (no exit 2,
// "expected any text"). The job gets the whole name; libmsched cuts it to
// 63 bytes on a character boundary when it joins a coordinator
// (coordinator_test.cc checks the name the coordinator shows).
TEST(MschedRunTest, ANameOfAnyLengthReachesTheJobWhole) {
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";  // é
  for (const std::string& name : {std::string(64, 'x'), accents}) {
    const ts::ProgramRun r =
        Msched({"run", "--coord", "off", "--name", name, "--", "/bin/sh", "-c", "printf '%s' \"$MSCHED_JOB_NAME\""});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, name);
  }
}

// --gpu N places the job on the machine's GPU N alone; the job then finds
// that GPU's coordinator itself, so no socket is forced on it.
TEST(MschedRunTest, GpuPlacesTheJobOnThatGpu) {
  const std::vector<std::string> show = {"/bin/sh", "-c",
                                         "echo \"[$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|$MSCHED_SOCKET]\""};
  ts::ProgramRun r = Msched(Join({"run", "--gpu", "1", "--coord", "off", "--"}, show),
                            {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"CUDA_DEVICE_ORDER", "FASTEST_FIRST"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[1|PCI_BUS_ID|]\n") << "GPU 1 as nvidia-smi numbers it";
  r = Msched(Join({"--gpu", "3", "run", "--coord", "off", "--"}, show));
  EXPECT_EQ(r.out, "[3|PCI_BUS_ID|]\n") << "before the command word too";
  r = Msched(Join({"run", "--coord", "off", "--"}, show), {{"CUDA_VISIBLE_DEVICES", "2"}, {"CUDA_DEVICE_ORDER", ""}});
  EXPECT_EQ(r.out, "[2||]\n") << "without --gpu the job's own choice stands";
  r = Msched(Join({"run", "--gpu", "1", "--coord", "off", "--"}, show), {{"MSCHED_SOCKET", "/tmp/gpu0.sock"}});
  EXPECT_EQ(r.out, "[1|PCI_BUS_ID|]\n") << "GPU 1's coordinator, not the one MSCHED_SOCKET names";
}

// `msched run` leaves PyTorch's allocator as the user chose it, without a
// word in the job's output; a choice of expandable segments (VMM memory,
// moved whole between turns but never paged) gets one line saying so.
TEST(MschedRunTest, PyTorchsAllocatorIsTheUsersChoice) {
  const std::vector<std::string> show = {"/bin/sh", "-c", "echo \"[$PYTORCH_CUDA_ALLOC_CONF]\""};
  ts::ProgramRun r = Msched(Join({"run", "--coord", "off", "--"}, show), {{"PYTORCH_CUDA_ALLOC_CONF", ""}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n") << "PyTorch's default stands";
  EXPECT_EQ(r.err, "") << "nothing added to every job's output";
  EXPECT_NE(Msched({"help"}).out.find("the job's budget must hold all of it"), std::string::npos);

  r = Msched(Join({"run", "--coord", "off", "--"}, show), {{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}});
  EXPECT_EQ(r.out, "[backend:cudaMallocAsync]\n");
  EXPECT_EQ(r.err.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << "the user's choice, silently: " << r.err;

  r = Msched(Join({"run", "--coord", "off", "--"}, show), {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}});
  EXPECT_EQ(r.out, "[expandable_segments:True]\n");
  EXPECT_NE(r.err.find("moves that memory whole between turns but cannot page it"), std::string::npos) << r.err;

  r = Msched(Join({"run", "--coord", "off", "--mode", "off", "--"}, show),
             {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}});
  EXPECT_EQ(r.err.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << "msched off says nothing: " << r.err;
}

TEST(MschedRunTest, TheProgramsExitStatusComesBack) {
  EXPECT_EQ(Msched({"run", "--coord", "off", "--", "/bin/sh", "-c", "exit 7"}).status, 7);
  const ts::ProgramRun missing = Msched({"run", "--coord", "off", "--", "/nonexistent/program"});
  EXPECT_EQ(missing.status, 127);
  EXPECT_NE(missing.err.find("msched: cannot run /nonexistent/program"), std::string::npos) << missing.err;
}

TEST(MschedRunTest, MistakesGiveOneClearLineAndUsage) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"run"}, "run needs a command"},
      {{"run", "--coord", "off", "--"}, "run needs a command"},
      {{"run", "--mem"}, "--mem needs a value"},
      {{"run", "--bogus", "1", "--", "true"}, "unknown run option --bogus"},
      {{"run", "--mem", "lots", "--", "true"}, "MSCHED_MEM='lots' is not valid"},
      {{"run", "--mem", "8", "--", "true"}, "--mem 8: give the size with its unit, such as 8GiB or 8MiB"},
      {{"run", "--gpu-memory=512", "--", "true"}, "--gpu-memory 512: give the size with its unit"},
      {{"run", "--priority=500", "true"}, "MSCHED_PRIORITY='500' is not valid"},
      {{"run", "--class", "bogus", "--", "true"},
       "MSCHED_CLASS='bogus' is not valid: expected short|long|service\n"
       "msched: the job was not started"},
      {{"run", "--gpu", "first", "--", "true"}, "--gpu 'first' is not a GPU index"},
      {{"status", "--gpu", "-1"}, "--gpu '-1' is not a GPU index"},
      {{"status", "--json", "--gpu", "x"}, "--gpu 'x' is not a GPU index"},
      {{"--gpu", "1", "status", "--socket", "/tmp/a.sock"}, "--gpu and --socket both say which coordinator"},
      {{"run", "--gpu", "1", "--socket", "/tmp/a.sock", "--", "true"}, "--gpu and --socket both say which coordinator"},
      // Not a job id: "-1" must not be read as job 18446744073709551615 and sent.
      {{"pause", "-1"}, "'-1' is not a job: give a job id (1, 2, ...) or a job's name"},
      {{"resume", "+2"}, "'+2' is not a job"},
      {{"priority", "-7", "5"}, "'-7' is not a job"},
      {{"pause", ""}, "'' is not a job"},
      {{"pause", "18446744073709551616"}, "job id 18446744073709551616 is too large"},
  };
  for (const Case& c : cases) {
    const ts::ProgramRun r = Msched(c.args);
    EXPECT_EQ(r.status, 2) << testing::PrintToString(c.args);
    EXPECT_NE(r.err.find(c.says), std::string::npos) << testing::PrintToString(c.args) << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << "errors go to stderr";
  }
}

// Every program answers --version with its name and the project's version,
// and --help with its usage, both on stdout with status 0.
TEST(MschedRunTest, EveryProgramSaysItsVersionAndHelpOnStdout) {
  for (const std::string program : {MSCHED_CLI, MSCHEDD, MSCHED_PROFILE}) {
    const std::string name = program.substr(program.rfind('/') + 1);
    const ts::ProgramRun version = ts::RunProgram({program, "--version"}, {{"LD_PRELOAD", ""}});
    EXPECT_EQ(version.status, 0) << program;
    EXPECT_EQ(version.out, name + " (msched) " MSCHED_VERSION "\n") << program;
    const ts::ProgramRun help = ts::RunProgram({program, "--help"}, {{"LD_PRELOAD", ""}});
    EXPECT_EQ(help.status, 0) << program;
    EXPECT_EQ(help.out.rfind("usage: " + name, 0), 0u) << program << ": " << help.out;
  }
  const ts::ProgramRun msim = ts::RunProgram({MSIM_RUN, "--help"}, {{"LD_PRELOAD", ""}});
  EXPECT_EQ(msim.status, 0);
  EXPECT_NE(msim.out.find("MSIM_DEVICE=NAME"), std::string::npos) << msim.out;
  EXPECT_NE(msim.out.find("MSIM_HBM_BYTES=SIZE"), std::string::npos) << msim.out;
}

// msched trace merge: the coordinator's and the jobs' files become one
// array of their events, a file its coordinator could not close included;
// what is not a timeline, and an output that is an input, are refused.
TEST(MschedTraceTest, MergeJoinsTheEventsOfEveryFile) {
  const std::string dir = ::testing::TempDir() + "merge_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/coord.json") << "[{\"ph\":\"M\",\"pid\":1},\n{\"ph\":\"X\",\"pid\":7,\"ts\":1},\n";
  std::ofstream(dir + "/job-7.json") << "{\"traceEvents\":[{\"ph\":\"i\",\"pid\":7,\"ts\":2}]}";
  std::ofstream(dir + "/bad.json") << "not a timeline";
  ts::ProgramRun r = Msched({"trace", "merge", dir + "/all.json", dir + "/coord.json", dir + "/job-7.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "wrote 3 events from 2 files to " + dir + "/all.json\n");
  std::ifstream in(dir + "/all.json");
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(all.is_array());
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2]["ph"], "i");
  r = Msched({"trace", "merge", dir + "/all.json", dir + "/bad.json"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("bad.json is not a timeline"), std::string::npos) << r.err;
  r = Msched({"trace", "merge", dir + "/coord.json", dir + "/coord.json"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is one of the inputs"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace

// Writes the seeds that are not copied from files in the repository: one
// encoded frame of each protocol message type (corpus/protocol), a stream of
// all of them (corpus/frame_reader) and two traces, exact and CUPTI-rounded
// (corpus/trace). Usage:
//   build-fuzz/tests/fuzz/fuzz_gen_seeds tests/fuzz/corpus
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "msched/protocol.h"
#include "profile/trace.h"

namespace proto = msched::proto;

namespace {

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  proto::Hello hello;
  hello.declared_mem = 20ull << 30, hello.allocated = 1 << 20, hello.device_total = 80ull << 30;
  hello.now_ns = 123456789, hello.priority = -7, hello.job_class = msched::JobClass::kShort, hello.name = "train\tjob";
  proto::Welcome welcome;
  welcome.job = 3, welcome.slot = 2, welcome.admitted = true, welcome.idle_yield_ns = 50'000'000;
  proto::Go go;
  go.start_ns = 1000, go.budget = 8ull << 30, go.slice_end_ns = 5000, go.idle_yield_ns = 10'000'000, go.load = true;
  proto::Stop stop;
  stop.evict_bytes = proto::kNever, stop.reason = proto::StopReason::kPreempt;
  proto::Control control;
  control.op = proto::ControlOp::kPriority, control.job = 3, control.priority = 42;
  proto::ControlReply reply;
  reply.ok = true, reply.text = "{\"jobs\":[]}\n";
  const proto::Message messages[] = {
      hello,
      proto::Usage{.allocated = 4096, .now_ns = 9, .counters = {.faults = 12, .prefetched = 1 << 20}},
      proto::SliceEnd{.now_ns = 77},
      proto::Idle{.at_ns = 88, .idle = true},
      proto::Stopped{.now_ns = 1, .resident = 2, .working_set = 3, .loaded = 4, .load_ns = 5, .counters = {6, 7}},
      proto::Goodbye{.now_ns = 8, .counters = {.faults = 30, .prefetched = 2 << 20}},
      welcome,
      proto::Refused{.reason = "needs 90 GiB; the device has 80"},
      go,
      stop,
      proto::Budget{.budget = 1 << 30},
      control,
      reply};
  std::string stream;
  for (const proto::Message& m : messages) {
    const std::string frame = proto::Encode(m);
    Write(dir + "/protocol/" + proto::MsgTypeName(proto::TypeOf(m)), frame);
    stream += frame;
  }
  // Chunk sizes 1, 5, 13 and 200 (see frame_reader_fuzzer.cc), then frames.
  Write(dir + "/frame_reader/all_types", std::string("\x04\x01\x05\x0d\xc8", 5) + stream);
  Write(dir + "/frame_reader/whole", std::string(1, '\0') + stream);

  msched::TraceLaunch l;
  l.seq = 7;
  l.kernel = "_Z6kernelPfm";
  l.layout = {{0, 8}, {8, 4}};
  l.args = {{0, 0x10, 0, 0, 0, 0, 0, 0}, {0xff, 0, 0, 0x10}};
  l.dims.grid[0] = 3, l.dims.block[0] = 128, l.dims.block[1] = 2, l.dims.shared_mem = 64;
  l.touched = {{{0x1000, 0x1800}, msched::AccessMode::kRead}, {{0x9000, 0x9004}, msched::AccessMode::kReadWrite}};
  l.latency_ns = 1234;
  Write(dir + "/trace/sample.jsonl", msched::TraceHeaderLine("simulator", 1, "./app") + "\n" +
                                         msched::TraceAllocLine(0x1000, 0x10000) + "\n" +
                                         msched::TraceNoteLine("hello") + "\n" + msched::TraceLaunchLine(l) + "\n" +
                                         msched::TraceFreeLine(0x1000) + "\n");

  // CUPTI's form: 64 KiB pages, a struct argument with two pointers into
  // one allocation and a count, ranges that start below the pointers.
  std::string cupti = msched::TraceHeaderLine("cupti", 65536, "python3") + "\n" +
                      msched::TraceAllocLine(0x7f0000000000, 0x4000000) + "\n";
  for (uint64_t n : {100000, 300000, 50000}) {
    msched::TraceLaunch c;
    c.seq = n;
    c.kernel = "_Z4listPv";
    c.layout = {{0, 24}};
    std::vector<uint8_t> words(24);
    const uint64_t fields[] = {0x7f0000010000, 0x7f0000200000, n};
    std::memcpy(words.data(), fields, sizeof fields);
    c.args = {words};
    c.touched = {{{0x7f0000000000, 0x7f0000010000 + 4 * n}, msched::AccessMode::kRead},
                 {{0x7f0000200000, 0x7f0000200000 + 8 * n}, msched::AccessMode::kWrite}};
    cupti += msched::TraceLaunchLine(c) + "\n";
  }
  Write(dir + "/trace/cupti.jsonl", cupti);
  return 0;
}

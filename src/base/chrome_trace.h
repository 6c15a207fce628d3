// The Chrome trace event format (its JSON array form), which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: a writer that streams events
// to a file and never lets it grow past a cap, and a reader of such files.
//   - The writer keeps the file a valid JSON array at every Close; if the
//     process dies first, only the closing bracket is missing, which both
//     viewers accept (and ReadTraceEvents too).
//   - Past `max_bytes` events are dropped and counted; Close then adds one
//     instant event saying how many, inside the cap.
// Writer: externally synchronized. The free functions are thread-safe.
// Included by src/, hook/ and the programs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "msched/status.h"

namespace msched::trace {

struct Event {
  char ph = 'X';  // X span, i instant, C counter, M metadata
  std::string name;
  std::string cat;
  uint64_t ts_ns = 0;
  uint64_t dur_ns = 0;  // X only
  int64_t pid = 0;
  int64_t tid = 0;
  nlohmann::json args;  // an object, or null for none
};

// The event as the format has it: "ts" and "dur" in microseconds (with the
// nanoseconds as decimals), instants scoped to their thread.
nlohmann::json ToJson(const Event& e);

// Metadata events naming a process or a thread in the viewers.
Event ProcessName(int64_t pid, const std::string& name);
Event ThreadName(int64_t pid, int64_t tid, const std::string& name);

class Writer {
 public:
  // Creates (or truncates) `path`, readable by its owner only: a timeline
  // names other users' jobs.
  static Result<std::unique_ptr<Writer>> Create(const std::string& path, uint64_t max_bytes);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Write(const Event& e) { WriteJson(ToJson(e)); }
  // An event already in the format's form (from ReadTraceEvents).
  void WriteJson(const nlohmann::json& event);
  // Hands what is buffered to the kernel (a viewer can open the file meanwhile).
  void Flush();
  // Ends the array. Not OK when a write failed (a full disk) at any point.
  Status Close();

  uint64_t bytes() const { return bytes_; }
  uint64_t dropped() const { return dropped_; }

 private:
  Writer(std::FILE* f, std::string path, uint64_t max_bytes) : f_(f), path_(std::move(path)), max_bytes_(max_bytes) {}
  void Put(const std::string& text);

  std::FILE* f_;
  std::string path_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  uint64_t events_ = 0;
  uint64_t dropped_ = 0;
};

// The events of a trace file (an array, closed or not). Not OK when the
// file cannot be read or is not such an array.
Result<std::vector<nlohmann::json>> ReadTraceEvents(const std::string& path);

// Writes the events of `inputs` into one trace at `out`, metadata first,
// then in time order. An input that cannot be read is left out, and the
// result says which (the others are merged all the same).
Status MergeTraceFiles(const std::vector<std::string>& inputs, const std::string& out, uint64_t max_bytes);

}  // namespace msched::trace

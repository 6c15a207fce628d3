#include "base/chrome_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "msched/bounded_input.h"

namespace msched::trace {
namespace {

using json = nlohmann::json;

// Room kept under the cap for the closing bracket and the note saying how
// many events were dropped.
constexpr uint64_t kReserve = 512;

double Micros(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

json ToJson(const Event& e) {
  json j = {{"ph", std::string(1, e.ph)}, {"name", e.name}, {"ts", Micros(e.ts_ns)}, {"pid", e.pid}, {"tid", e.tid}};
  if (!e.cat.empty()) j["cat"] = e.cat;
  if (e.ph == 'X') j["dur"] = Micros(e.dur_ns);
  if (e.ph == 'i') j["s"] = "t";
  if (!e.args.is_null()) j["args"] = e.args;
  return j;
}

Event ProcessName(int64_t pid, const std::string& name) {
  return Event{'M', "process_name", "", 0, 0, pid, 0, {{"name", name}}};
}

Event ThreadName(int64_t pid, int64_t tid, const std::string& name) {
  return Event{'M', "thread_name", "", 0, 0, pid, tid, {{"name", name}}};
}

Result<std::unique_ptr<Writer>> Writer::Create(const std::string& path, uint64_t max_bytes) {
  if (max_bytes < 2 * kReserve) {
    return Status::InvalidArgument("a trace needs a cap of at least " + std::to_string(2 * kReserve) + " bytes");
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("cannot write the trace " + path + ": " + std::strerror(errno));
  std::FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    ::close(fd);
    return Status::IoError("cannot write the trace " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<Writer> w(new Writer(f, path, max_bytes));
  w->Put("[\n");
  return w;
}

Writer::~Writer() { (void)Close(); }

void Writer::Put(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), f_);
  bytes_ += text.size();
}

void Writer::WriteJson(const json& event) {
  if (f_ == nullptr) return;
  // Names come from jobs (checked UTF-8 at the protocol boundary); replacing
  // any invalid byte keeps a bug elsewhere from ever throwing here.
  const std::string line = (events_ ? ",\n" : "") + event.dump(-1, ' ', false, json::error_handler_t::replace);
  if (bytes_ + line.size() + kReserve > max_bytes_) {
    ++dropped_;
    return;
  }
  Put(line);
  ++events_;
}

void Writer::Flush() {
  if (f_ != nullptr) std::fflush(f_);
}

Status Writer::Close() {
  if (f_ == nullptr) return Status::Ok();
  if (dropped_ > 0) {
    const Event note{'i', "trace truncated", "", 0, 0, 0, 0, {{"dropped_events", dropped_}, {"max_bytes", max_bytes_}}};
    Put((events_ ? ",\n" : "") + ToJson(note).dump());
  }
  Put("\n]\n");
  const bool failed = std::ferror(f_) != 0;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (failed || !closed) return Status::IoError("cannot write the trace " + path_ + " (a full disk?)");
  return Status::Ok();
}

Result<std::vector<json>> ReadTraceEvents(const std::string& path) {
  std::string text, error;
  if (!ReadJsonFileText(path, kMaxTraceFileBytes, &text, &error)) return Status::InvalidArgument(path + ": " + error);
  // A trace whose writer died lacks its closing bracket; the format allows that.
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (end != std::string::npos && text[end] != ']') {
    text.resize(text[end] == ',' ? end : end + 1);
    text += "\n]";
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::InvalidArgument(path + ": not a trace (a JSON array of events)");
  std::vector<json> events;
  for (json& e : j) {
    if (e.is_object()) events.push_back(std::move(e));
  }
  return events;
}

Status MergeTraceFiles(const std::vector<std::string>& inputs, const std::string& out, uint64_t max_bytes) {
  std::vector<json> events;
  std::string unread;
  for (const std::string& path : inputs) {
    Result<std::vector<json>> some = ReadTraceEvents(path);
    if (!some.ok()) {
      unread += (unread.empty() ? "" : "; ") + some.status().message();
      continue;
    }
    std::move(some->begin(), some->end(), std::back_inserter(events));
  }
  auto key = [](const json& e) {
    const bool meta = e.value("ph", "") == "M";
    return std::make_pair(!meta, e.contains("ts") && e["ts"].is_number() ? e["ts"].get<double>() : 0.0);
  };
  std::stable_sort(events.begin(), events.end(), [&](const json& a, const json& b) { return key(a) < key(b); });
  Result<std::unique_ptr<Writer>> w = Writer::Create(out, max_bytes);
  if (!w.ok()) return w.status();
  for (const json& e : events) (*w)->WriteJson(e);
  if (Status s = (*w)->Close(); !s.ok()) return s;
  if (!unread.empty()) return Status::InvalidArgument("left out of " + out + ": " + unread);
  return Status::Ok();
}

}  // namespace msched::trace

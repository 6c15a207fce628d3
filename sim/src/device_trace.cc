#include "device_trace.h"

#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "msched/trace_layout.h"
#include "process.h"

namespace msim {
namespace {

namespace layout = msched::trace;

int64_t TidOf(DeviceTrace::Track t) {
  switch (t) {
    case DeviceTrace::Track::kCompute: return layout::kSimComputeTid;
    case DeviceTrace::Track::kToDevice: return layout::kSimToDeviceTid;
    case DeviceTrace::Track::kToHost: return layout::kSimToHostTid;
    case DeviceTrace::Track::kFaults: return layout::kSimFaultsTid;
  }
  return layout::kSimComputeTid;
}

double Micros(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

DeviceTrace* DeviceTrace::Get() {
  static DeviceTrace* trace = []() -> DeviceTrace* {
    const char* dir = std::getenv("MSIM_TRACE");
    if (dir == nullptr || *dir == '\0') return nullptr;
    const int64_t pid = ::getpid();
    const std::string path = std::string(dir) + "/msim-" + std::to_string(pid) + ".json";
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      ReportError("cannot write the device's timeline " + path + "; MSIM_TRACE ignored");
      return nullptr;
    }
    auto* t = new DeviceTrace(f, pid);  // never destroyed: operations may come during exit
    std::fputs("[\n", f);
    const std::pair<Track, const char*> names[] = {{Track::kCompute, "GPU compute (msim)"},
                                                   {Track::kToDevice, "link host to device (msim)"},
                                                   {Track::kToHost, "link device to host (msim)"},
                                                   {Track::kFaults, "fault batches (msim)"}};
    bool first = true;
    for (const auto& [track, name] : names) {
      const nlohmann::json meta = {
          {"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", TidOf(track)}, {"args", {{"name", name}}}};
      std::fputs(((first ? "" : ",\n") + meta.dump()).c_str(), f);
      first = false;
    }
    std::atexit([] { Get()->Close(); });
    return t;
  }();
  return trace;
}

void DeviceTrace::Span(Track track, const std::string& name, uint64_t begin, uint64_t end, uint64_t bytes) {
  if (end <= begin) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  Open& o = open_[static_cast<int>(track)];
  // Link spans join only their own kind; the compute engine's join whatever
  // runs next to them (the launches track names the kernels).
  if (o.operations != 0 && begin == o.end && (name == o.name || track == Track::kCompute)) {
    o.mixed |= name != o.name;
    o.end = end;
    o.bytes += bytes;
    ++o.operations;
    return;
  }
  if (o.operations != 0) Write(track, o);
  o = Open{name, begin, end, bytes, 1, false};
}

void DeviceTrace::Write(Track track, const Open& s) {
  nlohmann::json args = nlohmann::json::object();
  if (track == Track::kCompute) {
    args["operations"] = s.operations;
  } else {
    args["bytes"] = s.bytes;
  }
  const nlohmann::json e = {{"ph", "X"},
                            {"name", s.mixed ? std::string("operations") : s.name},
                            {"cat", "msim"},
                            {"ts", Micros(s.begin)},
                            {"dur", Micros(s.end - s.begin)},
                            {"pid", pid_},
                            {"tid", TidOf(track)},
                            {"args", args}};
  const std::string text = ",\n" + e.dump();
  if (bytes_ + text.size() > kMaxBytes) {
    ++dropped_;
    return;
  }
  bytes_ += text.size();
  std::fputs(text.c_str(), f_);
}

void DeviceTrace::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  for (int i = 0; i < kTracks; ++i) {
    if (open_[i].operations != 0) Write(static_cast<Track>(i), open_[i]);
  }
  if (dropped_ != 0) {
    const nlohmann::json note = {{"ph", "i"},
                                 {"name", std::to_string(dropped_) + " spans dropped past the timeline's cap"},
                                 {"ts", 0},
                                 {"pid", pid_},
                                 {"tid", layout::kSimComputeTid},
                                 {"s", "t"}};
    std::fputs((",\n" + note.dump()).c_str(), f_);
  }
  std::fputs("\n]\n", f_);
  std::fclose(f_);
}

}  // namespace msim

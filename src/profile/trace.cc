#include "profile/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "msched/bounded_input.h"
#include "msched/json_checked.h"

namespace msched {
namespace {

using json = nlohmann::json;

std::string Hex(const std::vector<uint8_t>& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

bool Unhex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.size() % 2) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); i += 2) {
    const int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return true;
}

Status Bad(std::string message) { return Status::Corruption(std::move(message)); }

Result<uint64_t> U64(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return Bad(std::string("'") + key + "' must be an unsigned integer");
  return it->get<uint64_t>();
}

// An optional unsigned field. Never json::value<unsigned>: it would convert a
// float such as 1e300 to an integer, which is undefined.
Result<uint64_t> OptionalU64(const json& j, const char* key, uint64_t absent) {
  return j.contains(key) ? U64(j, key) : Result<uint64_t>(absent);
}

Status Dim3(const json& j, const char* key, uint32_t out[3]) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 3) return Bad(std::string("'") + key + "' must be [x, y, z]");
  for (int i = 0; i < 3; ++i) {
    if (!(*it)[i].is_number_unsigned()) return Bad(std::string("'") + key + "' must hold integers");
    out[i] = (*it)[i].get<uint32_t>();
  }
  return Status::Ok();
}

Result<TraceLaunch> ParseLaunch(const json& j) {
  TraceLaunch l;
  Result<uint64_t> seq = U64(j, "seq");
  if (!seq.ok()) return seq.status();
  l.seq = *seq;
  auto kernel = j.find("kernel");
  if (kernel == j.end() || !kernel->is_string() || kernel->get<std::string>().empty()) {
    return Bad("'kernel' must be a non-empty string");
  }
  l.kernel = kernel->get<std::string>();
  Result<const json*> params_field = JsonAt(j, "params");
  if (!params_field.ok()) return params_field.status();
  Result<const json*> args_field = JsonAt(j, "args");
  if (!args_field.ok()) return args_field.status();
  const json& params = **params_field;
  const json& args = **args_field;
  if (!params.is_array() || !args.is_array() || params.size() != args.size() || params.size() > kMaxParams) {
    return Bad("'params' and 'args' must be arrays of the same length");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const json& p = params[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_unsigned() || !p[1].is_number_unsigned()) {
      return Bad("'params' entries must be [offset, size]");
    }
    l.layout.push_back({p[0].get<uint32_t>(), p[1].get<uint32_t>()});
    std::vector<uint8_t> bytes;
    if (!args[i].is_string() || !Unhex(args[i].get<std::string>(), &bytes) || bytes.size() != l.layout.back().size) {
      return Bad("argument " + std::to_string(i) + " is not the hex of its parameter's bytes");
    }
    l.args.push_back(std::move(bytes));
  }
  MSCHED_RETURN_IF_ERROR(Dim3(j, "grid", l.dims.grid));
  MSCHED_RETURN_IF_ERROR(Dim3(j, "block", l.dims.block));
  Result<uint64_t> smem = OptionalU64(j, "smem", 0);
  if (!smem.ok()) return smem.status();
  l.dims.shared_mem = static_cast<uint32_t>(*smem);
  Result<const json*> touched = JsonAt(j, "touched");
  if (!touched.ok()) return touched.status();
  for (const json& t : **touched) {
    if (!t.is_array() || t.size() != 3 || !t[0].is_number_unsigned() || !t[1].is_number_unsigned() ||
        !t[2].is_number_unsigned() || t[1].get<uint64_t>() <= t[0].get<uint64_t>() || t[2].get<int>() < 1 ||
        t[2].get<int>() > 3) {
      return Bad("'touched' entries must be [begin, end, mode] with begin < end and mode 1..3");
    }
    l.touched.push_back({{t[0].get<uint64_t>(), t[1].get<uint64_t>()}, static_cast<AccessMode>(t[2].get<int>())});
  }
  Result<uint64_t> latency = OptionalU64(j, "latency_ns", 0);
  if (!latency.ok()) return latency.status();
  l.latency_ns = *latency;
  Result<uint64_t> duration = OptionalU64(j, "duration_ns", 0);
  if (!duration.ok()) return duration.status();
  l.duration_ns = *duration;
  Result<uint64_t> host = OptionalU64(j, "host_ns", 0);
  if (!host.ok()) return host.status();
  l.host_ns = *host;
  return l;
}

Status NotATrace(const std::string& where) {
  return Status::Corruption(where + "not an msched trace (the first record must be its header)");
}

// One record, a JSON object (the header included). A problem with the record
// is returned, and the record is skipped; one with the trace as a whole (its
// first record no header, a version this msched does not read) is set in
// out->status instead.
Status ReadRecord(const json& j, const std::string& where, bool* header, TraceReadResult* out) {
  Result<std::string> type = JsonStringOr(j, "type", "");
  if (!type.ok()) return type.status();
  if (!*header) {
    if (*type != "header") {
      out->status = NotATrace(where);
      return Status::Ok();
    }
    Result<std::string> format = JsonStringOr(j, "format", "");
    if (!format.ok()) return format.status();
    if (*format != "msched-trace") {
      out->status = NotATrace(where);
      return Status::Ok();
    }
    // Compared as JSON: converting a huge float to int first would be undefined.
    const json v = j.value("version", json());  // a json default: never throws on an object
    if (v != json(kTraceFormatVersion)) {
      out->status = Status::Corruption(
          where + "trace format version " + (v.is_number_integer() ? std::to_string(v.get<int64_t>()) : v.type_name()) +
          " is not supported (this msched reads " + std::to_string(kTraceFormatVersion) + ")");
      return Status::Ok();
    }
    Result<std::string> source = JsonStringOr(j, "source", "unknown");
    if (!source.ok()) return source.status();
    out->trace.source = *source;
    Result<uint64_t> precision = OptionalU64(j, "precision", 1);
    if (!precision.ok()) return precision.status();
    out->trace.precision = std::max<uint64_t>(1, *precision);
    *header = true;
  } else if (*type == "alloc") {
    Result<uint64_t> base = U64(j, "base");
    if (!base.ok()) return base.status();
    Result<uint64_t> size = U64(j, "size");
    if (!size.ok()) return size.status();
    out->trace.allocs.push_back({true, *base, *size});
  } else if (*type == "free") {
    Result<uint64_t> base = U64(j, "base");
    if (!base.ok()) return base.status();
    out->trace.allocs.push_back({false, *base, 0});
  } else if (*type == "launch") {
    Result<TraceLaunch> l = ParseLaunch(j);
    if (!l.ok()) return l.status();
    l->alloc_epoch = out->trace.allocs.size();
    out->trace.launches.push_back(std::move(*l));
  } else if (*type == "note") {
    Result<std::string> text = JsonStringOr(j, "text", "");
    if (!text.ok()) return text.status();
    out->trace.notes.push_back(std::move(*text));
  } else {
    return Bad("unknown record type '" + *type + "'");
  }
  return Status::Ok();
}

}  // namespace

TraceReadResult ReadTrace(const std::string& path) {
  TraceReadResult out;
  std::string text, error;
  if (!ReadRegularFile(path, kMaxTraceFileBytes, &text, &error)) {
    out.status = Status::IoError("cannot open trace " + path + ": " + error);
    return out;
  }
  bool header = false;
  size_t n = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++n;
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    // A record nested past the bound is skipped unparsed, so no recursive
    // walk (parser, accessor, message) ever meets it.
    const bool too_deep = !CheckJsonDepth(line, kMaxJsonDepth, &error);
    json j = too_deep ? json(json::value_t::discarded) : json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (!header) {
        out.status = NotATrace(where);
        return out;
      }
      out.problems.push_back(where +
                             (too_deep ? error : "not a JSON object (a line cut short when the program died?)"));
      continue;
    }
    if (Status s = ReadRecord(j, where, &header, &out); !s.ok()) out.problems.push_back(where + s.message());
    if (!out.status.ok()) return out;
  }
  if (!header) out.status = Status::Corruption(path + ": empty, or no header record");
  return out;
}

Result<Trace> MergeTraces(std::vector<Trace> traces) {
  if (traces.empty()) return Status::InvalidArgument("no traces to merge");
  Trace out;
  out.source = traces[0].source;
  std::set<uint64_t> live;  // bases allocated and not yet freed
  for (Trace& t : traces) {
    if (t.source != out.source) {
      return Status::InvalidArgument("cannot merge a " + t.source + " trace with a " + out.source + " trace");
    }
    for (uint64_t base : live) out.allocs.push_back({/*alloc=*/false, base, 0});
    live.clear();
    const size_t epoch0 = out.allocs.size();
    for (const TraceAllocEvent& e : t.allocs) {
      if (e.alloc) {
        live.insert(e.base);
      } else {
        live.erase(e.base);
      }
      out.allocs.push_back(e);
    }
    for (TraceLaunch& l : t.launches) {
      l.alloc_epoch += epoch0;
      l.seq = out.launches.size();
      out.launches.push_back(std::move(l));
    }
    out.precision = std::max(out.precision, t.precision);
    out.notes.insert(out.notes.end(), t.notes.begin(), t.notes.end());
  }
  return out;
}

std::string TraceOfProcess(const std::string& trace, uint64_t pid) { return trace + "." + std::to_string(pid); }

std::vector<std::string> SiblingTraces(const std::string& trace) {
  namespace fs = std::filesystem;
  const fs::path path(trace);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".";
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code type_ec;
    if (e.is_regular_file(type_ec)) found.emplace_back(std::stoull(pid), (dir / name).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [pid, p] : found) out.push_back(std::move(p));
  return out;
}

bool IsReplaceableTrace(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (st.st_size == 0) return true;
  // O_NONBLOCK: should the file be swapped for a FIFO since lstat, open
  // does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  // The header is one short line; 64 KiB holds it with any program name.
  std::string first;
  char buf[4096];
  ssize_t n = 0;
  while (first.find('\n') == std::string::npos && first.size() < (64u << 10) && (n = ::read(fd, buf, sizeof buf)) > 0) {
    first.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const json line = json::parse(first.substr(0, first.find('\n')), nullptr, false);
  return line.is_object() && line.value("type", std::string()) == "header" &&
         line.value("format", std::string()) == "msched-trace";
}

std::string TraceHeaderLine(const std::string& source, uint64_t precision, const std::string& program) {
  return json{{"type", "header"}, {"format", "msched-trace"}, {"version", kTraceFormatVersion},
              {"source", source}, {"precision", precision},   {"program", program}}
      .dump();
}

std::string TraceAllocLine(uint64_t base, uint64_t size) {
  return json{{"type", "alloc"}, {"base", base}, {"size", size}}.dump();
}

std::string TraceFreeLine(uint64_t base) { return json{{"type", "free"}, {"base", base}}.dump(); }

std::string TraceNoteLine(const std::string& text) { return json{{"type", "note"}, {"text", text}}.dump(); }

std::string TraceLaunchLine(const TraceLaunch& l) {
  json params = json::array(), args = json::array(), touched = json::array();
  for (const ParamInfo& p : l.layout) params.push_back({p.offset, p.size});
  for (const auto& a : l.args) args.push_back(Hex(a));
  for (const TouchedRange& t : l.touched) touched.push_back({t.range.begin, t.range.end, static_cast<int>(t.mode)});
  json j = {{"type", "launch"},
            {"seq", l.seq},
            {"kernel", l.kernel},
            {"params", params},
            {"args", args},
            {"grid", {l.dims.grid[0], l.dims.grid[1], l.dims.grid[2]}},
            {"block", {l.dims.block[0], l.dims.block[1], l.dims.block[2]}},
            {"smem", l.dims.shared_mem},
            {"touched", touched}};
  if (l.latency_ns) j["latency_ns"] = l.latency_ns;
  if (l.duration_ns) j["duration_ns"] = l.duration_ns;
  if (l.host_ns) j["host_ns"] = l.host_ns;
  return j.dump();
}

}  // namespace msched

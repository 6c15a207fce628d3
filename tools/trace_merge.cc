#include "trace_merge.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace msched {
namespace {

using json = nlohmann::json;

// The events of one trace file.
Result<json> EventsOf(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // A coordinator that could not close its file left out only the ']'.
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ' || body.back() == ',')) body.pop_back();
    doc = json::parse(body + "]", nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_object() && doc.contains("traceEvents")) doc = doc["traceEvents"];
  if (!doc.is_array()) {
    return Status::InvalidArgument(path +
                                   " is not a timeline (a JSON array of trace events, or an object with "
                                   "traceEvents)");
  }
  return doc;
}

}  // namespace

Result<size_t> MergeTraces(const std::vector<std::string>& inputs, const std::string& out) {
  std::error_code ec;
  for (const std::string& in : inputs) {
    if (std::filesystem::equivalent(in, out, ec)) return Status::InvalidArgument(out + " is one of the inputs");
  }
  json all = json::array();
  for (const std::string& in : inputs) {
    Result<json> events = EventsOf(in);
    if (!events.ok()) return events.status();
    for (json& e : *events) all.push_back(std::move(e));
  }
  std::ofstream file(out, std::ios::trunc);
  file << all.dump() << "\n";
  if (!file) return Status::IoError("cannot write " + out);
  return all.size();
}

}  // namespace msched

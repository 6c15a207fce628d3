#include "suite/json_file.h"

#include "msched/bounded_input.h"

namespace msched {

nlohmann::json ReadJsonFile(const std::string& path, std::string* error) {
  std::string text;
  if (!ReadJsonFileText(path, kMaxConfigFileBytes, &text, error)) {
    *error = path + ": " + *error;
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) *error = path + ": not valid JSON";
  return j;
}

}  // namespace msched

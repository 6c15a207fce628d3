#include "device_profile.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "msched/bounded_input.h"

namespace msim {
namespace {

using json = nlohmann::json;

bool Flag(const json& doc, const char* key, bool* out, std::string* error) {
  auto it = doc.find(key);
  if (it == doc.end()) {
    *error = std::string("missing field '") + key + "'";
    return false;
  }
  if (!it->is_boolean()) {
    *error = std::string("field '") + key + "' must be true or false";
    return false;
  }
  *out = it->get<bool>();
  return true;
}

bool Number(const json& doc, const char* key, bool required, double lo, double hi, double* out, std::string* error) {
  auto it = doc.find(key);
  if (it == doc.end()) {
    if (required) *error = std::string("missing field '") + key + "'";
    return !required;
  }
  if (!it->is_number()) {
    *error = std::string("field '") + key + "' must be a number";
    return false;
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    *error = std::string("field '") + key + "' = " + it->dump() + " is outside [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    return false;
  }
  *out = v;
  return true;
}

// Version 2's "link": the rate of every other kind of move, each required
// and positive (a profile that leaves one out would quietly model it as
// free), and whether a prefetch to the host holds its caller. Version 1 has
// none: each move then costs what it did before, and no call waits.
bool ParseLink(const json& doc, int version, DeviceProfile* p, std::string* error) {
  auto link = doc.find("link");
  if (version == 1) {
    if (link != doc.end()) {
      *error = "field 'link' needs version 2";
      return false;
    }
    p->first_touch_gbps = p->hbm_gbps;
    p->first_eviction_gbps = p->d2h_gbps;
    p->fault_migration_gbps = p->h2d_gbps;
    return true;
  }
  if (link == doc.end() || !link->is_object()) {
    *error = "missing field 'link' (an object of the link's rates, version 2)";
    return false;
  }
  const bool ok = Number(*link, "first_touch_gbps", true, 0.01, 1e5, &p->first_touch_gbps, error) &&
                  Number(*link, "first_eviction_gbps", true, 0.01, 1e4, &p->first_eviction_gbps, error) &&
                  Number(*link, "fault_migration_gbps", true, 0.01, 1e4, &p->fault_migration_gbps, error) &&
                  Number(*link, "duplicate_drop_us", true, 1e-3, 1e6, &p->duplicate_drop_us, error) &&
                  Number(*link, "duplicate_drop_us_per_gib", true, 1e-3, 1e6, &p->duplicate_drop_us_per_gib, error) &&
                  Number(*link, "discard_gbps", true, 0.01, 1e5, &p->discard_gbps, error) &&
                  Number(*link, "duplex_gbps", true, 0.01, 1e4, &p->duplex_gbps, error) &&
                  Number(*link, "prefetch_move_us", true, 1e-3, 1e6, &p->prefetch_move_us, error) &&
                  Number(*link, "batch_range_us", true, 1e-3, 1e6, &p->batch_range_us, error) &&
                  Number(*link, "collapse_us_per_page", true, 1e-3, 1e6, &p->collapse_us_per_page, error) &&
                  Number(*link, "unset_duplicate_gbps", true, 0.01, 1e5, &p->unset_duplicate_gbps, error) &&
                  Flag(*link, "host_prefetch_waits", &p->host_prefetch_waits, error);
  if (!ok) *error = "link: " + *error;
  return ok;
}

void CopyString(const std::string& s, char* dst, size_t cap) {
  std::strncpy(dst, s.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

}  // namespace

bool ParseDeviceProfile(const std::string& json_text, DeviceProfile* out, std::string* error) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    *error = "not a JSON object (truncated or malformed)";
    return false;
  }
  auto fmt = doc.find("format");
  if (fmt == doc.end() || !fmt->is_string() || fmt->get<std::string>() != "msim-device") {
    *error = "field 'format' must be \"msim-device\"";
    return false;
  }
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || (version->get<int>() != 1 && version->get<int>() != 2)) {
    *error = "field 'version' must be 1 or 2";
    return false;
  }
  DeviceProfile p;
  auto name = doc.find("name");
  if (name == doc.end() || !name->is_string() || name->get<std::string>().empty()) {
    *error = "field 'name' must be a non-empty string";
    return false;
  }
  CopyString(name->get<std::string>(), p.name, sizeof p.name);
  auto dev = doc.find("device_name");
  CopyString(dev != doc.end() && dev->is_string() ? dev->get<std::string>() : name->get<std::string>(), p.device_name,
             sizeof p.device_name);
  double hbm = 0, batch = 256, ccmaj = 9, ccmin = 0, sms = 80;
  const bool ok = Number(doc, "hbm_bytes", true, 1 << 20, 1e15, &hbm, error) &&
                  Number(doc, "hbm_gbps", true, 1, 1e5, &p.hbm_gbps, error) &&
                  Number(doc, "tflops", true, 0.01, 1e5, &p.tflops, error) &&
                  Number(doc, "h2d_gbps", true, 0.01, 1e4, &p.h2d_gbps, error) &&
                  Number(doc, "d2h_gbps", true, 0.01, 1e4, &p.d2h_gbps, error) &&
                  Number(doc, "fault_control_us", true, 0, 1e6, &p.fault_control_us, error) &&
                  Number(doc, "fault_min_transfer_us", false, 0, 1e6, &p.fault_min_transfer_us, error) &&
                  Number(doc, "fault_batch_size", false, 1, 65536, &batch, error) &&
                  Number(doc, "prefetch_call_us", false, 0, 1e6, &p.prefetch_call_us, error) &&
                  Number(doc, "kernel_launch_us", false, 0, 1e6, &p.kernel_launch_us, error) &&
                  Number(doc, "launch_api_us", false, 0, 1e6, &p.launch_api_us, error) &&
                  Number(doc, "api_call_us", true, 0.001, 1e6, &p.api_call_us, error) &&
                  Number(doc, "cc_major", false, 1, 99, &ccmaj, error) &&
                  Number(doc, "cc_minor", false, 0, 9, &ccmin, error) &&
                  Number(doc, "sm_count", false, 1, 10000, &sms, error);
  if (!ok || !ParseLink(doc, version->get<int>(), &p, error)) return false;
  p.hbm_bytes = static_cast<uint64_t>(hbm);
  p.fault_batch_size = static_cast<uint32_t>(batch);
  p.cc_major = static_cast<int>(ccmaj);
  p.cc_minor = static_cast<int>(ccmin);
  p.sm_count = static_cast<int>(sms);
  *out = p;
  return true;
}

bool LoadDeviceProfile(const std::string& name_or_path, DeviceProfile* out, std::string* error) {
  std::string path = name_or_path;
  if (name_or_path.find('/') == std::string::npos) {
    std::string dirs[2];
    if (const char* env = std::getenv("MSIM_PROFILE_DIR")) dirs[0] = env;
    dirs[1] = MSIM_SHIPPED_PROFILE_DIR;
    path.clear();
    for (const std::string& d : dirs) {
      if (d.empty()) continue;
      const std::string candidate = d + "/" + name_or_path + ".json";
      if (std::ifstream(candidate).good()) {
        path = candidate;
        break;
      }
    }
    if (path.empty()) {
      *error = "no device profile named '" + name_or_path + "' in $MSIM_PROFILE_DIR or " + MSIM_SHIPPED_PROFILE_DIR;
      return false;
    }
  }
  std::string text;
  if (!msched::ReadJsonFileText(path, msched::kMaxConfigFileBytes, &text, error) ||
      !ParseDeviceProfile(text, out, error)) {
    *error = "device profile " + path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace msim

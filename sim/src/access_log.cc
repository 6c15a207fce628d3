#include "access_log.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "msim/access_log.h"
#include "process.h"

namespace msim {

AccessLog* AccessLog::Get() {
  static AccessLog* log = []() -> AccessLog* {
    const char* path = std::getenv("MSIM_ACCESS_LOG");
    if (path == nullptr || *path == '\0') return nullptr;
    std::FILE* f = std::fopen(path, "wb");
    if (f == nullptr) {
      ReportError(std::string("cannot write the access log ") + path + "; MSIM_ACCESS_LOG ignored");
      return nullptr;
    }
    std::fwrite(access_log::kMagic, 1, sizeof access_log::kMagic, f);
    std::atexit([] { std::fflush(Get()->f_); });
    return new AccessLog(f);  // never destroyed: launches may come during exit
  }();
  return log;
}

void AccessLog::Operation(const std::vector<std::pair<uint64_t, uint32_t>>& blocks) {
  const uint32_t n = static_cast<uint32_t>(blocks.size());
  std::fputc(access_log::kOperation, f_);
  std::fwrite(&n, sizeof n, 1, f_);
  for (const auto& [block, units] : blocks) {
    std::fwrite(&block, sizeof block, 1, f_);
    std::fwrite(&units, sizeof units, 1, f_);
  }
}

void AccessLog::Free(uint64_t begin, uint64_t end) {
  std::fputc(access_log::kFree, f_);
  std::fwrite(&begin, sizeof begin, 1, f_);
  std::fwrite(&end, sizeof end, 1, f_);
}

}  // namespace msim

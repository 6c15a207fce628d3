// Fuzzes msched::ReadTrace (src/profile/trace.cc), which takes a path: the
// input is handed over as an in-memory file (/proc/self/fd/N). A trace that
// reads is also analysed and its templates checked on it (the fitters of
// src/profile/template_fitter.h and rounded_fit.h, the accuracy report), as
// msched-profile analyze and check do with a file from anyone.
#include "fuzz_input.h"
#include "profile/profile_report.h"
#include "profile/trace.h"

namespace {

// Keeps each input fast: the fitters' cost grows with launches and words.
constexpr size_t kMaxAnalysedLaunches = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  msched_fuzz::MemFile file(data, size);
  msched::TraceReadResult r = msched::ReadTrace(file.path());
  (void)r.status.ToString();
  if (r.status.ok() && r.trace.launches.size() <= kMaxAnalysedLaunches) {
    const msched::ProfileReport report = msched::Analyze(r.trace);
    (void)msched::CheckJson(msched::CheckTemplates(report.templates, r.trace));
  }
  return 0;
}

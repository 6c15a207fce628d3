// Fuzzes msched::ReadTrace (src/trace.cc), which takes a path: the input
// is handed over as an in-memory file (/proc/self/fd/N).
#include "fuzz_input.h"
#include "profile/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  msched_fuzz::MemFile file(data, size);
  msched::TraceReadResult r = msched::ReadTrace(file.path());
  (void)r.status.ToString();
  return 0;
}

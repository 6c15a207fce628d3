// Analysing a profile trace: templates fitted per kernel, and their accuracy
// measured the way the MSched paper's Table 1 reports it. Each predictable
// kernel is fitted on its even-numbered calls and evaluated on the odd ones
// (held out), next to the naive whole-allocation prediction on the same
// calls; false negatives and positives are counted in bytes (exact touched
// ranges against exact predicted ranges) and in 4 KiB pages (the pages each
// side covers: what migration moves). The templates written out are fitted on
// every call. Pure functions; thread-safe. Used by msched-profile.
#pragma once

#include <string>
#include <vector>

#include "msched/templates.h"
#include "profile/trace.h"

namespace msched {

struct Accuracy {
  uint64_t touched_bytes = 0, touched_pages = 0;  // pages counted in bytes
  uint64_t predicted_bytes = 0, predicted_pages = 0;
  uint64_t fn_bytes = 0, fp_bytes = 0, fn_pages = 0, fp_pages = 0;
  // 2 MiB blocks (the driver's VA blocks), counted: what CUPTI's ranges can
  // be trusted to (the driver prefetches within a block, so a touched range
  // is a superset of the accesses), summed over launches.
  uint64_t touched_blocks = 0, predicted_blocks = 0, fn_blocks = 0, fp_blocks = 0;

  void Add(const Accuracy& o);
  double FnBytesPct() const { return Pct(fn_bytes, touched_bytes); }
  double FpBytesPct() const { return Pct(fp_bytes, predicted_bytes); }
  double FnPagesPct() const { return Pct(fn_pages, touched_pages); }
  double FpPagesPct() const { return Pct(fp_pages, predicted_pages); }
  double FnBlocksPct() const { return Pct(fn_blocks, touched_blocks); }
  double FpBlocksPct() const { return Pct(fp_blocks, predicted_blocks); }

 private:
  static double Pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * part / whole : 0.0; }
};

// Compares what was predicted with what one launch touched.
Accuracy Compare(const RangeSet& predicted, const RangeSet& touched);

struct KernelReport {
  std::string name;
  std::string kind;    // "T1", "T2", "T3", or "unpredictable"
  std::string reason;  // unpredictable: why; otherwise notes (seen once, held-out fit failed)
  uint64_t calls = 0;
  uint64_t heldout_calls = 0;
  uint64_t failed_calls = 0;  // check: calls with a region that failed in the job's memory (FailuresInJobMemory)
  // Analyze: every call had the same arguments but its pointers, so the
  // trace cannot say how its regions grow with a size (a fixed region and
  // one that follows an argument fit it alike): a run at another size can.
  bool one_size = false;
  Accuracy tmpl;   // template, held-out calls
  Accuracy naive;  // whole allocations, held-out calls
};

struct ProfileReport {
  std::vector<KernelReport> kernels;
  TemplateFile templates;
  Accuracy tmpl_total, naive_total;    // over predictable kernels' held-out calls
  uint64_t regions[4] = {0, 0, 0, 0};  // T1, T2, T3 and rest regions in the templates
  size_t one_size_kernels = 0;         // predictable kernels whose calls all had the same sizes (KernelReport)
};

ProfileReport Analyze(const Trace& trace);

// The accuracy of what msched would prefetch at run time, on every launch
// of a trace: each launch's template when its kernel has one, else the
// fallback (MSCHED_UNKNOWN=pointers: from each pointer argument as far as
// templates predicted the data there to reach, else to the end of its
// allocation), as the hook predicts (model/predictor.h), launch by launch in
// trace order. Templates fitted from small profiling runs, checked on a run
// at full size, show before a benchmark does whether they extrapolate. One
// entry per kernel launched, beside whole allocations.
struct TemplateCheck {
  std::vector<KernelReport> kernels;  // kind "fallback" for kernels the file lacks
  Accuracy total, naive_total;
  uint64_t launches = 0;
  uint64_t template_launches = 0;  // predicted by a template whose every region evaluated
};
TemplateCheck CheckTemplates(const TemplateFile& templates, const Trace& trace);
std::string FormatCheck(const TemplateCheck& check, const Trace& trace, const std::string& templates_name,
                        const std::string& trace_name);
// The same figures as JSON: {"kernels":[{"name","template","calls","failed_calls",
// "touched_bytes","predicted_bytes","fn_bytes","fp_bytes","touched_blocks",
// "predicted_blocks","fn_blocks","fp_blocks"}...],"total":{the same
// figures},"launches":{"total","template","fallback"}}.
std::string CheckJson(const TemplateCheck& check);

// The report as Markdown: the per-kernel table, totals, unpredictable
// kernels with their reasons, and what the trace's precision means.
std::string FormatReport(const ProfileReport& report, const Trace& trace, const std::string& trace_name);

}  // namespace msched

#include "profile/profile_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "model/predictor.h"
#include "model/template_eval.h"
#include "profile/template_fitter.h"

namespace msched {
namespace {

RangeSet AlignedOut(const RangeSet& s, uint64_t align) {
  RangeSet out;
  for (const ByteRange& r : s.ranges()) out.Add(r.AlignedOut(align));
  return out;
}

// Whether every call of a kernel had the same argument words but its
// pointers: one size seen, whatever the number of calls.
bool OneSize(const std::vector<const Observation*>& obs) {
  for (const Observation* o : obs) {
    if (o->words.size() != obs[0]->words.size()) return false;
    for (size_t w = 0; w < o->words.size(); ++w) {
      if (!o->is_pointer[w] && !obs[0]->is_pointer[w] && o->words[w].value != obs[0]->words[w].value) return false;
    }
  }
  return true;
}

std::string KindOf(const KernelTemplate& t) {
  std::string kind = "T1";
  bool rest = false;
  for (const Region& r : t.regions) {
    if (r.kind == Region::Kind::kStrided) kind = "T3";
    if (r.kind == Region::Kind::kLinear && kind == "T1") kind = "T2";
    rest = rest || r.kind == Region::Kind::kRest;
  }
  return rest ? kind + "+rest" : kind;
}

// The template's ranges for one launch, each within the allocation it
// starts in: a kernel's own template alone (Analyze's held-out accuracy).
RangeSet Predict(const CompiledTemplate& t, const Observation& o) {
  Prediction p(/*alignment=*/1);
  t.Evaluate(o.args, o.launch->dims, &p);
  AllocationMap allocs;
  for (const ByteRange& a : o.pointed) (void)allocs.Insert(a.begin, a.size(), AllocKind::kManaged);
  ClipToAllocations(allocs, 0, &p, nullptr);
  RangeSet s;
  for (const PredictedRegion& r : p.regions()) s.Add(r.range);
  return s;
}

std::string Pct(double v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

void Accuracy::Add(const Accuracy& o) {
  touched_bytes += o.touched_bytes, touched_pages += o.touched_pages;
  predicted_bytes += o.predicted_bytes, predicted_pages += o.predicted_pages;
  fn_bytes += o.fn_bytes, fp_bytes += o.fp_bytes, fn_pages += o.fn_pages, fp_pages += o.fp_pages;
  touched_blocks += o.touched_blocks, predicted_blocks += o.predicted_blocks;
  fn_blocks += o.fn_blocks, fp_blocks += o.fp_blocks;
}

Accuracy Compare(const RangeSet& predicted, const RangeSet& touched) {
  Accuracy a;
  a.touched_bytes = touched.TotalBytes();
  a.predicted_bytes = predicted.TotalBytes();
  const uint64_t hit = touched.OverlapBytes(predicted);
  a.fn_bytes = a.touched_bytes - hit;
  a.fp_bytes = a.predicted_bytes - hit;
  const RangeSet tp = AlignedOut(touched, kPageSize), pp = AlignedOut(predicted, kPageSize);
  a.touched_pages = tp.TotalBytes();
  a.predicted_pages = pp.TotalBytes();
  const uint64_t page_hit = tp.OverlapBytes(pp);
  a.fn_pages = a.touched_pages - page_hit;
  a.fp_pages = a.predicted_pages - page_hit;
  const RangeSet tb = AlignedOut(touched, kChunkSize), pb = AlignedOut(predicted, kChunkSize);
  a.touched_blocks = tb.TotalBytes() / kChunkSize;
  a.predicted_blocks = pb.TotalBytes() / kChunkSize;
  const uint64_t block_hit = tb.OverlapBytes(pb) / kChunkSize;
  a.fn_blocks = a.touched_blocks - block_hit;
  a.fp_blocks = a.predicted_blocks - block_hit;
  return a;
}

ProfileReport Analyze(const Trace& trace) {
  ProfileReport report;
  const std::vector<Observation> observations = Observe(trace);
  // Launches by kernel, in first-launch order (a name with another layout is another kernel).
  std::vector<std::pair<std::string, std::vector<const Observation*>>> groups;
  std::map<std::pair<std::string, ParamLayout>, size_t> index;
  for (const Observation& o : observations) {
    auto key = std::make_pair(o.launch->kernel, o.launch->layout);
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back({o.launch->kernel, {}});
    groups[it->second].second.push_back(&o);
  }
  std::map<std::string, uint64_t> kept_calls;  // a templates file holds one entry per name
  for (auto& [name, obs] : groups) {
    KernelReport k;
    k.name = name;
    k.calls = obs.size();
    KernelFit full = FitKernel(obs, trace.precision);
    if (!full.predictable) {
      k.kind = "unpredictable";
      k.reason = full.reason;
      report.templates.unpredictable.push_back({name, full.reason});
      report.kernels.push_back(std::move(k));
      continue;
    }
    k.kind = KindOf(full.tmpl);
    k.one_size = !full.tmpl.regions.empty() && OneSize(obs);
    report.one_size_kernels += k.one_size ? 1 : 0;
    if (obs.size() < 2) {
      k.reason = "seen once: fitted from one call, accuracy not measured";
    } else {
      std::vector<const Observation*> train, test;
      for (size_t i = 0; i < obs.size(); ++i) (i % 2 == 0 ? train : test).push_back(obs[i]);
      KernelFit held = FitKernel(train, trace.precision);
      if (!held.predictable) {
        k.reason = "held-out fit failed: " + held.reason;
      } else {
        const CompiledTemplate compiled(std::move(held.tmpl));
        for (const Observation* o : test) {
          k.tmpl.Add(Compare(Predict(compiled, *o), o->touched));
          k.naive.Add(Compare(o->naive, o->touched));
        }
        k.heldout_calls = test.size();
        report.tmpl_total.Add(k.tmpl);
        report.naive_total.Add(k.naive);
      }
    }
    for (const Region& r : full.tmpl.regions) ++report.regions[static_cast<int>(r.kind)];
    if (kept_calls[name] < obs.size()) {
      kept_calls[name] = obs.size();
      auto& kernels = report.templates.kernels;
      kernels.erase(
          std::remove_if(kernels.begin(), kernels.end(), [&n = name](const KernelTemplate& t) { return t.name == n; }),
          kernels.end());
      kernels.push_back(std::move(full.tmpl));
    }
    report.kernels.push_back(std::move(k));
  }
  return report;
}

TemplateCheck CheckTemplates(const TemplateFile& templates, const Trace& trace) {
  TemplateCheck check;
  TraceAllocations replay(trace);
  ExtentMemo learned;
  // Each kernel launched: its entry in check.kernels and its template, compiled (none: the fallback).
  std::map<std::pair<std::string, ParamLayout>, std::pair<size_t, std::optional<CompiledTemplate>>> index;
  for (const Observation& o : Observe(trace)) {
    auto [it, fresh] = index.emplace(std::make_pair(o.launch->kernel, o.launch->layout),
                                     std::make_pair(check.kernels.size(), std::nullopt));
    if (fresh) {
      const KernelTemplate* found = nullptr;
      for (const KernelTemplate& t : templates.kernels) {
        if (t.name == o.launch->kernel && t.layout == o.launch->layout) found = &t;
      }
      if (found != nullptr) it->second.second.emplace(*found);
      KernelReport k;
      k.name = o.launch->kernel;
      k.kind = found ? KindOf(*found) : "fallback";
      check.kernels.push_back(std::move(k));
    }
    const std::optional<CompiledTemplate>& t = it->second.second;
    KernelReport& k = check.kernels[it->second.first];
    // As the hook predicts (LaunchPrediction, model/predictor.h), with
    // MSCHED_UNKNOWN=pointers: the template, teaching the memo; the fallback
    // where there is none (from the memo's extents) or where one of its
    // regions failed in the job's memory (to the allocations' ends). The check's predictions are exact
    // to the byte where the hook's are page-aligned, so the ends it learns
    // can be up to a page shorter than the hook's.
    Prediction p(/*alignment=*/1);
    const LaunchPrediction lp =
        PredictLaunch({Mode::kMsched, UnknownPolicy::kPointers, t ? &*t : nullptr, o.args, o.launch->dims},
                      replay.At(*o.launch), &learned, &p);
    RangeSet predicted;
    for (const PredictedRegion& r : p.regions()) predicted.Add(r.range);
    ++check.launches;
    if (lp.source() == PredictionSource::kTemplate && !lp.uses_pointer_rule()) ++check.template_launches;
    if (lp.failed() > 0) ++k.failed_calls;
    const Accuracy a = Compare(predicted, o.touched);
    const Accuracy naive = Compare(o.naive, o.touched);
    ++k.calls;
    k.tmpl.Add(a);
    k.naive.Add(naive);
    check.total.Add(a);
    check.naive_total.Add(naive);
  }
  return check;
}

std::string FormatCheck(const TemplateCheck& c, const Trace& trace, const std::string& templates_name,
                        const std::string& trace_name) {
  std::string out = "# Templates checked on a run\n\n";
  out +=
      "Templates " + templates_name + " on trace " + trace_name + " (" + trace.source + ", " +
      std::to_string(trace.launches.size()) +
      " launches): what msched prefetches at run time for every "
      "call, the kernel's template or else the fallback (from each pointer argument as far as templates "
      "predicted the data there to reach, else to the end of its allocation), beside predicting whole "
      "allocations. " +
      std::to_string(c.template_launches) + " of " + std::to_string(c.launches) +
      " launches predicted by a template. Failed: calls whose template had a region that did not evaluate in the job's "
      "memory "
      "(they fall back to each pointer's allocation end). FN: touched but not predicted (each "
      "costs faults); FP: predicted but not touched (link bandwidth and HBM wasted). Blocks: the 2 MiB blocks "
      "each side covers, summed over launches.\n\n";
  out +=
      "| kernel | template | calls | failed | FN % blocks | FP % blocks | FN % bytes | FN % pages | FP % bytes | "
      "FP % pages | FN MB | FP MB | whole-alloc FN % | whole-alloc FP % |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto row = [&](const std::string& name, const std::string& kind, const std::string& calls, const std::string& failed,
                 const Accuracy& a, const Accuracy& n) {
    char mb[64];
    std::snprintf(mb, sizeof mb, "%.1f | %.1f", a.fn_bytes / 1e6, a.fp_bytes / 1e6);
    out += "| " + name + " | " + kind + " | " + calls + " | " + failed + " | " + Pct(a.FnBlocksPct()) + " | " +
           Pct(a.FpBlocksPct()) + " | " + Pct(a.FnBytesPct()) + " | " + Pct(a.FnPagesPct()) + " | " +
           Pct(a.FpBytesPct()) + " | " + Pct(a.FpPagesPct()) + " | " + mb + " | " + Pct(n.FnBytesPct()) + " | " +
           Pct(n.FpBytesPct()) + " |\n";
  };
  uint64_t failed = 0;
  for (const KernelReport& k : c.kernels) {
    row(k.name, k.kind, std::to_string(k.calls), std::to_string(k.failed_calls), k.tmpl, k.naive);
    failed += k.failed_calls;
  }
  row("**all kernels**", "", "", std::to_string(failed), c.total, c.naive_total);
  return out;
}

std::string CheckJson(const TemplateCheck& c) {
  auto figures = [](const Accuracy& a) {
    return nlohmann::json{{"touched_bytes", a.touched_bytes},
                          {"predicted_bytes", a.predicted_bytes},
                          {"fn_bytes", a.fn_bytes},
                          {"fp_bytes", a.fp_bytes},
                          {"touched_blocks", a.touched_blocks},
                          {"predicted_blocks", a.predicted_blocks},
                          {"fn_blocks", a.fn_blocks},
                          {"fp_blocks", a.fp_blocks}};
  };
  nlohmann::json j;
  j["kernels"] = nlohmann::json::array();
  for (const KernelReport& k : c.kernels) {
    nlohmann::json e = figures(k.tmpl);
    e["name"] = k.name;
    e["template"] = k.kind;
    e["calls"] = k.calls;
    e["failed_calls"] = k.failed_calls;
    j["kernels"].push_back(std::move(e));
  }
  j["total"] = figures(c.total);
  j["launches"] = {
      {"total", c.launches}, {"template", c.template_launches}, {"fallback", c.launches - c.template_launches}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string FormatReport(const ProfileReport& r, const Trace& trace, const std::string& trace_name) {
  std::string out = "# msched-profile report\n\n";
  out += "Trace: " + trace_name + " (" + trace.source + ", touched ranges known to " + std::to_string(trace.precision) +
         " byte" + (trace.precision == 1 ? "" : "s") + "), " + std::to_string(trace.launches.size()) + " launches of " +
         std::to_string(r.kernels.size()) + " kernels.\n";
  if (trace.precision > 1) {
    out +=
        "Precision: the driver migrates whole 64 KiB pages and prefetches within 2 MiB blocks, so touched ranges "
        "are rounded out to " +
        std::to_string(trace.precision) + " bytes; templates err towards larger regions.\n";
  }
  for (const std::string& note : trace.notes) out += "Note: " + note + "\n";
  out +=
      "\nHeld-out accuracy: templates fitted on each kernel's even-numbered calls, measured on its odd-numbered "
      "calls, beside predicting whole allocations (the naive baseline). FN: touched but not predicted; FP: "
      "predicted but not touched. In bytes: exact ranges; in pages: the 4 KiB pages each side covers (what migration "
      "moves). Measured at the sizes this trace ran at: it says nothing of other sizes (msched-profile check does, "
      "on a trace at another size).\n";
  if (r.one_size_kernels > 0) {
    out += "One size: " + std::to_string(r.one_size_kernels) + (r.one_size_kernels == 1 ? " kernel" : " kernels") +
           " (marked \"one size\") had the same arguments in every call but their pointers, so this trace "
           "cannot tell a fixed region from one that grows with a size: run the program at a second size and fit "
           "both traces (msched-profile analyze A.trace B.trace).\n";
  }
  out += "\n";
  out +=
      "| kernel | template | calls | held out | FN % bytes | FN % pages | FP % bytes | FP % pages | "
      "whole-alloc FN % | whole-alloc FP % |\n";
  out += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const KernelReport& k : r.kernels) {
    out += "| " + k.name + " | " + k.kind + (k.one_size ? " (one size)" : "") + " | " + std::to_string(k.calls) +
           " | " + std::to_string(k.heldout_calls);
    if (k.heldout_calls > 0) {
      out += " | " + Pct(k.tmpl.FnBytesPct()) + " | " + Pct(k.tmpl.FnPagesPct()) + " | " + Pct(k.tmpl.FpBytesPct()) +
             " | " + Pct(k.tmpl.FpPagesPct()) + " | " + Pct(k.naive.FnPagesPct()) + " | " + Pct(k.naive.FpPagesPct()) +
             " |\n";
    } else {
      out += " | - | - | - | - | - | - |\n";
    }
  }
  out += "| **all predictable kernels** | | | | " + Pct(r.tmpl_total.FnBytesPct()) + " | " +
         Pct(r.tmpl_total.FnPagesPct()) + " | " + Pct(r.tmpl_total.FpBytesPct()) + " | " +
         Pct(r.tmpl_total.FpPagesPct()) + " | " + Pct(r.naive_total.FnPagesPct()) + " | " +
         Pct(r.naive_total.FpPagesPct()) + " |\n\n";
  out += "Template regions: T1 (fixed) " + std::to_string(r.regions[0]) + ", T2 (linear) " +
         std::to_string(r.regions[1]) + ", T3 (strided) " + std::to_string(r.regions[2]) +
         ", to the end of the allocation (no rule found) " + std::to_string(r.regions[3]) + ".\n";
  bool any = false;
  for (const KernelReport& k : r.kernels) {
    if (k.reason.empty()) continue;
    if (!any) out += "\n";
    any = true;
    out += "- " + k.name + (k.kind == "unpredictable" ? " (unpredictable, left to MSCHED_UNKNOWN): " : ": ") +
           k.reason + "\n";
  }
  return out;
}

}  // namespace msched

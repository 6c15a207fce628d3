// TemplateStore: the templates a process uses, indexed by kernel name, loaded
// from files and directories (every *.templates.json below a directory; a
// file named explicitly is read whatever its name). A later definition of a kernel replaces an earlier one, so
// MSCHED_TEMPLATES can override the shipped templates. Each template is
// compiled as it is added (CompiledTemplate), so that launches only evaluate
// it. Immutable after loading: thread-safe for lookups. Used by the hook and
// the profiler.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/template_eval.h"
#include "msched/templates.h"

namespace msched {

class TemplateStore {
 public:
  // Loads each path (a file, or a directory searched recursively for
  // *.templates.json). Problems
  // (unreadable files, broken entries) are appended to `problems`; the rest
  // loads.
  void LoadPaths(const std::vector<std::string>& paths, std::vector<TemplateProblem>* problems);
  void Add(KernelTemplate t);
  void AddUnpredictable(UnpredictableKernel u);

  // The template for `name` whose layout equals `layout`; nullptr otherwise,
  // with *why saying whether the kernel is unknown, unpredictable, or its
  // layout differs (a template made for another build of the kernel).
  const CompiledTemplate* Find(std::string_view name, const ParamLayout& layout, std::string* why) const;
  size_t size() const { return by_name_.size(); }

 private:
  std::unordered_map<std::string, CompiledTemplate> by_name_;
  std::unordered_map<std::string, std::string> unpredictable_;  // name -> reason
};

}  // namespace msched

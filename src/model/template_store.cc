#include "model/template_store.h"

#include <algorithm>
#include <filesystem>

namespace msched {

void TemplateStore::Add(KernelTemplate t) {
  unpredictable_.erase(t.name);
  std::string name = t.name;
  by_name_.insert_or_assign(std::move(name), CompiledTemplate(std::move(t)));
}

void TemplateStore::AddUnpredictable(UnpredictableKernel u) {
  if (!by_name_.count(u.name)) unpredictable_[u.name] = u.reason;
}

void TemplateStore::LoadPaths(const std::vector<std::string>& paths, std::vector<TemplateProblem>* problems) {
  namespace fs = std::filesystem;
  for (const std::string& path : paths) {
    std::error_code ec;
    std::vector<std::string> files;
    if (fs::is_directory(path, ec)) {
      // Directories hold other JSON too (device profiles, simulator
      // modules): only files named *.templates.json are templates.
      for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const std::string suffix = ".templates.json";
        if (it->is_regular_file() && name.size() > suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
          files.push_back(it->path().string());
        }
      }
      std::sort(files.begin(), files.end());  // a deterministic override order
    } else {
      files.push_back(path);
    }
    for (const std::string& file : files) {
      TemplateLoadResult r = LoadTemplatesFile(file);
      problems->insert(problems->end(), r.problems.begin(), r.problems.end());
      for (KernelTemplate& t : r.templates.kernels) Add(std::move(t));
      for (UnpredictableKernel& u : r.templates.unpredictable) AddUnpredictable(std::move(u));
    }
  }
}

const CompiledTemplate* TemplateStore::Find(std::string_view name, const ParamLayout& layout, std::string* why) const {
  const std::string key(name);
  auto it = by_name_.find(key);
  if (it == by_name_.end()) {
    auto u = unpredictable_.find(key);
    if (why) *why = u == unpredictable_.end() ? "no template" : "unpredictable: " + u->second;
    return nullptr;
  }
  if (it->second.source().layout != layout) {
    if (why) *why = "its parameter layout differs from the template's (another build of the kernel?)";
    return nullptr;
  }
  return &it->second;
}

}  // namespace msched

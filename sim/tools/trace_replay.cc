#include "trace_replay.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "msim/msim.h"

namespace msim {
namespace {

using msched::Trace;
using msched::TraceLaunch;

// The driver's limits on a launch (the simulator's module parser and
// cuLaunchKernel enforce the same): a launch beyond them is skipped.
constexpr uint32_t kMaxParamBytes = 4096;
constexpr uint32_t kMaxParamOffset = 32764;
constexpr uint64_t kMaxThreadsPerBlock = 1024;
// What no GPU holds in one allocation (256 TiB): a larger recorded size is a
// corrupt record, not a program's allocation.
constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 48;

// The allocations live at one point of the trace, by recorded base.
class LiveAllocations {
 public:
  struct Live {
    uint64_t size;
    std::string buffer;
  };

  // The allocation holding `addr`, or ending at it (a pointer just past the
  // end), or nullptr; with its recorded base in *base.
  const Live* Find(uint64_t addr, uint64_t* base) const {
    auto it = live_.upper_bound(addr);
    if (it == live_.begin()) return nullptr;
    --it;
    if (addr > it->first + it->second.size) return nullptr;
    *base = it->first;
    return &it->second;
  }

  // Calls fn(base, live) for each allocation overlapping [begin, end).
  template <typename Fn>
  void ForEachOverlapping(uint64_t begin, uint64_t end, Fn fn) const {
    auto it = live_.upper_bound(begin);
    if (it != live_.begin() && std::prev(it)->first + std::prev(it)->second.size > begin) --it;
    for (; it != live_.end() && it->first < end; ++it) fn(it->first, it->second);
  }

  std::map<uint64_t, Live>& map() { return live_; }

 private:
  std::map<uint64_t, Live> live_;
};

class Converter {
 public:
  Converter(const Trace& trace, const std::string& name, uint64_t host_ns_per_launch)
      : trace_(trace), host_ns_per_launch_(host_ns_per_launch) {
    out_.workload.name = name;
  }

  ReplayedTrace Convert() {
    size_t applied = 0;
    for (const TraceLaunch& l : trace_.launches) {
      for (; applied < l.alloc_epoch && applied < trace_.allocs.size(); ++applied) AllocEvent(trace_.allocs[applied]);
      Launch(l);
    }
    for (; applied < trace_.allocs.size(); ++applied) AllocEvent(trace_.allocs[applied]);
    nlohmann::json kernels = nlohmann::json::array();
    for (const auto& [kernel, layout] : layouts_) {
      nlohmann::json params = nlohmann::json::array();
      for (const msched::ParamInfo& p : layout) params.push_back({p.offset, p.size});
      kernels.push_back({{"name", kernel}, {"params", params}, {"host", kReplayStampKernel}});
    }
    out_.workload.module_texts.push_back(
        nlohmann::json{{"format", "msim-module"}, {"version", 1}, {"kernels", kernels}}.dump());
    for (const auto& [base, live] : live_.map()) out_.workload.checksum.push_back(live.buffer);
    return std::move(out_);
  }

 private:
  void Free(std::map<uint64_t, LiveAllocations::Live>::iterator it) {
    Step s;
    s.op = Step::Op::kFree;
    s.buffer = it->second.buffer;
    out_.workload.steps.push_back(std::move(s));
    live_.map().erase(it);
  }

  void AllocEvent(const msched::TraceAllocEvent& e) {
    auto& live = live_.map();
    if (!e.alloc) {
      auto it = live.find(e.base);
      if (it == live.end()) {
        ++out_.unknown_frees;
        return;
      }
      Free(it);
      return;
    }
    if (e.size == 0) return;  // nothing a kernel could touch
    if (e.size > kMaxAllocationBytes || e.base + e.size < e.base) {
      ++out_.skipped_allocations;
      return;
    }
    // An allocation over live ones: the program freed those where the trace
    // did not see it.
    std::vector<uint64_t> replaced;
    live_.ForEachOverlapping(e.base, e.base + e.size, [&](uint64_t base, const auto&) { replaced.push_back(base); });
    for (uint64_t base : replaced) Free(live.find(base));
    out_.replaced_allocations += replaced.size();
    BufferSpec b;
    b.name = "a" + std::to_string(out_.allocations++);
    b.size = Constant(static_cast<int64_t>(e.size));
    b.kind = "device";
    b.deferred = true;
    live.emplace(e.base, LiveAllocations::Live{e.size, b.name});
    Step s;
    s.op = Step::Op::kAlloc;
    s.buffer = b.name;
    out_.workload.buffers.push_back(std::move(b));
    out_.workload.steps.push_back(std::move(s));
  }

  // Whether the driver would take this launch, and its kernel is declared
  // with this layout (the first launch of a kernel declares it).
  bool Launchable(const TraceLaunch& l) {
    // A name the driver's C strings cannot carry.
    if (l.kernel.empty() || l.kernel.find('\0') != std::string::npos) return false;
    uint64_t threads = 1;
    for (int i = 0; i < 3; ++i) {
      if (l.dims.grid[i] == 0 || l.dims.block[i] == 0) return false;
      threads *= l.dims.block[i];
    }
    if (threads > kMaxThreadsPerBlock) return false;
    for (const msched::ParamInfo& p : l.layout) {
      if (p.size == 0 || p.size > kMaxParamBytes || p.offset > kMaxParamOffset) return false;
    }
    const auto [it, inserted] = layouts_.emplace(l.kernel, l.layout);
    return inserted || it->second == l.layout;
  }

  // One parameter's bytes as literal runs and pointers into replayed
  // allocations. Only words aligned in the argument buffer can be pointers
  // (and the runner packs a pointer at an 8-byte offset of its parameter).
  ArgSpec Argument(const msched::ParamInfo& p, const std::vector<uint8_t>& bytes) const {
    ArgSpec arg;
    arg.kind = ArgSpec::Kind::kStruct;
    ArgSpec literal;
    literal.kind = ArgSpec::Kind::kBytes;
    const auto flush = [&] {
      if (!literal.bytes.empty()) arg.fields.push_back(std::move(literal));
      literal = ArgSpec{};
      literal.kind = ArgSpec::Kind::kBytes;
    };
    for (size_t at = 0; at < bytes.size();) {
      uint64_t word = 0, base = 0;
      const LiveAllocations::Live* target = nullptr;
      if (p.offset % 8 == 0 && at % 8 == 0 && at + 8 <= bytes.size()) {
        std::memcpy(&word, bytes.data() + at, 8);
        target = live_.Find(word, &base);
      }
      if (target == nullptr) {
        literal.bytes.push_back(bytes[at++]);
        continue;
      }
      flush();
      ArgSpec ptr;
      ptr.kind = ArgSpec::Kind::kPtr;
      ptr.buffer = target->buffer;
      ptr.offset = word - base;
      arg.fields.push_back(std::move(ptr));
      at += 8;
    }
    flush();
    return arg;
  }

  void Launch(const TraceLaunch& l) {
    if (!Launchable(l)) {
      ++out_.skipped_launches;
      return;
    }
    Step s;
    s.op = Step::Op::kLaunch;
    s.kernel = l.kernel;
    for (size_t i = 0; i < l.layout.size(); ++i) s.args.push_back(Argument(l.layout[i], l.args[i]));
    for (int i = 0; i < 3; ++i) {
      s.grid[i] = Constant(l.dims.grid[i]);
      s.block[i] = Constant(l.dims.block[i]);
    }
    s.replayed = true;
    if (l.host_ns != 0 && l.host_ns <= MSIM_MAX_KERNEL_NS) {
      s.host_ns = l.host_ns;
      ++out_.recorded_host;
    } else if (host_ns_per_launch_ != 0) {
      s.host_ns = host_ns_per_launch_;
      ++out_.stated_host;
    }
    // A duration no kernel runs (past MSIM_MAX_KERNEL_NS) is a corrupt record: the
    // simulator models this launch's time instead, and the clock never
    // wraps or leaps for it.
    if (l.duration_ns > MSIM_MAX_KERNEL_NS) {
      ++out_.implausible_durations;
    } else {
      s.compute_ns = l.duration_ns;
    }
    for (const msched::TouchedRange& t : l.touched) {
      bool inside = false;
      live_.ForEachOverlapping(t.range.begin, t.range.end, [&](uint64_t base, const LiveAllocations::Live& a) {
        inside = true;
        s.touches.push_back({a.buffer, std::max(t.range.begin, base) - base,
                             std::min(t.range.end, base + a.size) - base, static_cast<uint32_t>(t.mode)});
      });
      if (!inside) ++out_.dropped_ranges;
    }
    ++out_.launches;
    if (s.compute_ns != 0) ++out_.clean_durations;
    out_.workload.steps.push_back(std::move(s));
  }

  // A literal expression, shared between the launches that use the value.
  ExprPtr Constant(int64_t value) {
    ExprPtr& e = constants_[value];
    if (!e) {
      std::string error;
      e = Expr::Parse(std::to_string(value), &error);
    }
    return e;
  }

  const Trace& trace_;
  const uint64_t host_ns_per_launch_;
  ReplayedTrace out_;
  LiveAllocations live_;
  std::map<std::string, msched::ParamLayout> layouts_;
  std::map<int64_t, ExprPtr> constants_;
};

}  // namespace

ReplayedTrace ReplayOf(const Trace& trace, const std::string& name, uint64_t host_ns_per_launch) {
  return Converter(trace, name, host_ns_per_launch).Convert();
}

msched::Result<ReplayedTrace> ReplayTrace(const std::string& path, uint64_t host_ns_per_launch) {
  msched::TraceReadResult read = msched::ReadTrace(path);
  if (!read.status.ok() && path.ends_with(".xz")) {
    return msched::Status::InvalidArgument(read.status.message() +
                                           " (compressed? replay reads the trace itself: "
                                           "xz -dk " +
                                           path + ")");
  }
  if (!read.status.ok()) return read.status;
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* suffix : {".trace", ".jsonl"}) {
    if (name.size() > std::strlen(suffix) && name.ends_with(suffix)) name.resize(name.size() - std::strlen(suffix));
  }
  ReplayedTrace replay = ReplayOf(read.trace, name, host_ns_per_launch);
  replay.problems = std::move(read.problems);
  return replay;
}

}  // namespace msim

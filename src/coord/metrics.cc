#include "coord/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

namespace msched {
namespace {

// A number as the text format writes it: integers exactly, other values in
// the shortest form that reads back the same, infinities as +Inf/-Inf.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// `\` and newline escaped, and `"` too when `quotes` (label values; HELP
// text keeps its quotes), as the exposition format asks.
std::string Escaped(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Writes families in order; each opens with its HELP and TYPE lines, and
// its samples follow before the next family begins.
class Exposition {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += Escaped(help, /*quotes=*/false);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // `labels` is empty or `a="x",b="y"`, values already escaped.
  void Sample(std::string_view name, std::string_view labels, const std::string& value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels, uint64_t value) {
    Sample(name, labels, std::to_string(value));
  }
  void Sample(std::string_view name, std::string_view labels, double value) { Sample(name, labels, Number(value)); }
  // A family of one unlabelled sample.
  template <typename T>
  void Single(std::string_view name, std::string_view type, std::string_view help, T value) {
    Family(name, type, help);
    Sample(name, "", value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string Label(std::string_view key, std::string_view value) {
  return std::string(key) + "=\"" + EscapeLabelValue(value) + "\"";
}

// A job's identity as labels: its id and user, and its name only where the
// operator chose to publish names (the endpoint asks nobody who is reading).
// Not "job": Prometheus gives every scraped series its own `job` label (the
// scrape job's), and would rename ours to exported_job.
std::string JobLabels(const JobMetrics& j, bool names) {
  std::string labels = Label("job_id", std::to_string(j.id)) + "," + Label("uid", std::to_string(j.uid));
  if (names) labels += "," + Label("name", j.name);
  return labels;
}

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

MetricsHistogram::MetricsHistogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void MetricsHistogram::Observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[bucket];
  sum += value;
  ++count;
}

std::vector<double> SliceSecondsBounds() {
  return {0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600};
}

std::string EscapeLabelValue(std::string_view value) { return Escaped(value, /*quotes=*/true); }

std::string RenderPrometheus(const MetricsSnapshot& s) {
  Exposition e;
  e.Family("msched_build_info", "gauge", "The msched version of this coordinator; always 1.");
  e.Sample("msched_build_info", Label("version", s.version), uint64_t{1});
  e.Single("msched_start_time_seconds", "gauge", "When this coordinator started, in seconds since the Unix epoch.",
           s.start_time_seconds);
  e.Single("msched_gpu_memory_bytes", "gauge",
           "GPU memory the coordinator schedules: --gpu-memory, else what the first job's device reports (0 until "
           "then).",
           s.hbm_bytes);
  e.Single("msched_link_bytes_per_second", "gauge",
           "Host-to-device link speed measured from the jobs' loads after switches (until one is measured, the "
           "coordinator's starting assumption); it sizes slices.",
           s.link_bytes_per_second);

  e.Family("msched_jobs", "gauge",
           "Live jobs by admission state: waiting (not admitted yet), running (admitted, on the GPU or waiting for "
           "its turn) or paused; msched_job_info says which are on the GPU.");
  e.Sample("msched_jobs", Label("state", "waiting"), s.jobs_waiting);
  e.Sample("msched_jobs", Label("state", "running"), s.jobs_running);
  e.Sample("msched_jobs", Label("state", "paused"), s.jobs_paused);
  e.Single("msched_jobs_submitted_total", "counter",
           "Jobs that registered with this coordinator, refused ones included.", s.jobs_submitted);
  e.Single("msched_admissions_total", "counter", "Jobs admitted by this coordinator.", s.admissions);
  e.Single("msched_admission_wait_seconds_total", "counter",
           "Time the admitted jobs waited from registering to admission, summed, in seconds of the device clock "
           "(wall time on a real GPU, virtual time on the simulator); divided by msched_admissions_total, the mean "
           "wait.",
           Seconds(s.admission_wait_ns));
  e.Single("msched_groups", "gauge",
           "Groups of admitted jobs whose working sets fit the GPU together; more than one means the groups take "
           "turns.",
           s.groups);
  e.Single("msched_switches_total", "counter", "Switches of the GPU from one group of jobs to another.", s.switches);

  e.Family("msched_slice_seconds", "histogram",
           "How long jobs held the GPU per turn, from the Go that began a turn to the stop, pause or exit that "
           "ended it, in seconds of the device clock; a job that never shares the GPU has one turn, its whole run.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < s.slice_seconds.bounds.size(); ++i) {
    cumulative += s.slice_seconds.counts[i];
    e.Sample("msched_slice_seconds_bucket", Label("le", Number(s.slice_seconds.bounds[i])), cumulative);
  }
  e.Sample("msched_slice_seconds_bucket", Label("le", "+Inf"), s.slice_seconds.count);
  e.Sample("msched_slice_seconds_sum", "", s.slice_seconds.sum);
  e.Sample("msched_slice_seconds_count", "", s.slice_seconds.count);

  e.Family("msched_swap_bytes_total", "counter",
           "Bytes moved by switches. in: the working sets jobs brought back when their turn began, as the jobs "
           "measured them (reported at their next stop; a job that exits first reports nothing). out: an estimate, "
           "the fall in a job's resident bytes across each stop (the coordinator's estimate before, the job's "
           "figure after).");
  e.Sample("msched_swap_bytes_total", Label("direction", "in"), s.swap_in_bytes);
  e.Sample("msched_swap_bytes_total", Label("direction", "out"), s.swap_out_bytes);
  e.Single("msched_faults_total", "counter",
           "GPU page faults the jobs reported, summed. Only the simulated GPU counts them: a job on a real GPU "
           "reports 0. Jobs report with each change of their allocations, each stop and their exit, so the sum "
           "can lag; a job that reconnects after a coordinator restart brings its earlier faults along.",
           s.faults);
  e.Single("msched_prefetched_bytes_total", "counter",
           "Bytes the jobs moved to the GPU ahead of use (each kernel's predicted working set, and working sets "
           "brought back after a switch), summed as they reported them (with each change of their allocations, "
           "each stop and their exit).",
           s.prefetched_bytes);

  // Per live job. Each family lists every job, so a job's series all
  // appear and vanish together.
  struct PerJob {
    const char* name;
    const char* type;
    const char* help;
    std::string (*value)(const JobMetrics&);
  };
  const PerJob per_job[] = {
      {"msched_job_declared_bytes", "gauge", "Memory the job declared (MSCHED_MEM); 0 if it declared none.",
       [](const JobMetrics& j) { return std::to_string(j.declared_bytes); }},
      {"msched_job_allocated_bytes", "gauge", "Memory the job has allocated, as it last reported.",
       [](const JobMetrics& j) { return std::to_string(j.allocated_bytes); }},
      {"msched_job_resident_bytes", "gauge",
       "Bytes the job holds in GPU memory, an estimate: what the job reported at its last stop, raised to what its "
       "turn brings in.",
       [](const JobMetrics& j) { return std::to_string(j.resident_bytes); }},
      {"msched_job_budget_bytes", "gauge", "GPU memory the job may hold while it runs.",
       [](const JobMetrics& j) { return std::to_string(j.budget_bytes); }},
      {"msched_job_peak_over_budget_bytes", "gauge",
       "The most the job reported holding in GPU memory beyond its budget when its work was complete: what "
       "kernels msched could not predict faulted in. 0 while it keeps to its budget.",
       [](const JobMetrics& j) { return std::to_string(j.peak_over_budget_bytes); }},
      {"msched_job_shared_bytes", "gauge",
       "Bytes of the job's GPU memory shared with another process through a handle (VMM handles exported or "
       "imported, IPC imports): kept on the GPU through pauses and switches, since the peer maps it too.",
       [](const JobMetrics& j) { return std::to_string(j.shared_bytes); }},
      {"msched_job_waited_seconds", "gauge",
       "How long the job waited from registering to admission, or has waited so far, in seconds of the device "
       "clock.",
       [](const JobMetrics& j) { return Number(Seconds(j.waited_ns)); }},
      {"msched_job_on_gpu", "gauge", "1 while the job runs in the group that holds the GPU, else 0.",
       [](const JobMetrics& j) { return std::string(j.on_gpu ? "1" : "0"); }},
      {"msched_job_faults_total", "counter",
       "GPU page faults the job reported since it started (simulated GPU only; see msched_faults_total).",
       [](const JobMetrics& j) { return std::to_string(j.faults); }},
      {"msched_job_prefetched_bytes_total", "counter",
       "Bytes the job reported moving to the GPU ahead of use since it started.",
       [](const JobMetrics& j) { return std::to_string(j.prefetched_bytes); }},
  };
  for (const PerJob& m : per_job) {
    e.Family(m.name, m.type, m.help);
    for (const JobMetrics& j : s.jobs) e.Sample(m.name, JobLabels(j, s.job_names), m.value(j));
  }
  e.Family("msched_job_info", "gauge",
           "Always 1; its labels say what msched status shows of the job: state (running on the GPU, waiting, "
           "swapped out, paused), wait_reason (why it is off the GPU: admission, turn, priority, paused, idle, "
           "unresponsive; empty on it), class and priority. msched_jobs{state=\"running\"} counts admitted jobs; "
           "count(msched_job_info{state=\"running\"}) those on the GPU.");
  for (const JobMetrics& j : s.jobs) {
    e.Sample("msched_job_info",
             JobLabels(j, s.job_names) + "," + Label("state", j.run_state) + "," + Label("wait_reason", j.wait_reason) +
                 "," + Label("class", j.job_class) + "," + Label("priority", std::to_string(j.priority)),
             uint64_t{1});
  }
  return e.Take();
}

void MetricsBoard::Publish(std::shared_ptr<const MetricsSnapshot> snapshot) {
  MutexLock lock(&mu_);
  latest_ = std::move(snapshot);
}

std::shared_ptr<const MetricsSnapshot> MetricsBoard::Latest() const {
  MutexLock lock(&mu_);
  return latest_;
}

}  // namespace msched

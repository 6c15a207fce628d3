#include "coord/job_progress.h"

#include <utility>

namespace msched {
namespace {

std::string Seconds(JobProgress::Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

JobProgress::JobProgress(bool enabled, std::string name, std::FILE* out)
    : enabled_(enabled), name_(std::move(name)), out_(out) {}

void JobProgress::Welcomed(uint64_t job, bool admitted, Clock::time_point now) {
  if (!enabled_) return;
  MutexLock lock(&mu_);
  job_ = job;
  if (admitted) {
    Say("joined the coordinator and is admitted");
    awaiting_ = Awaiting::kNothing;
  } else {
    Say("is queued: it waits until the GPU's memory allows it (msched status shows why)");
    awaiting_ = Awaiting::kAdmission;
    since_ = now;
  }
}

void JobProgress::TurnBegan(Clock::time_point now) {
  if (!enabled_) return;
  MutexLock lock(&mu_);
  switch (awaiting_) {
    case Awaiting::kNothing: return;
    case Awaiting::kAdmission: Say("is admitted after " + Seconds(now - since_) + " in the queue"); break;
    case Awaiting::kResume: Say("is resumed after " + Seconds(now - since_) + " paused"); break;
  }
  awaiting_ = Awaiting::kNothing;
}

void JobProgress::Paused(Clock::time_point now) {
  if (!enabled_) return;
  MutexLock lock(&mu_);
  Say("is paused: its memory is on the host until msched resume");
  awaiting_ = Awaiting::kResume;
  since_ = now;
}

void JobProgress::Done() {
  if (!enabled_) return;
  MutexLock lock(&mu_);
  Say("is done");
}

void JobProgress::Say(const std::string& what) {
  std::fprintf(out_, "msched: job %llu (%s) %s\n", static_cast<unsigned long long>(job_), name_.c_str(), what.c_str());
  std::fflush(out_);
}

}  // namespace msched

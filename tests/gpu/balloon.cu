// balloon: plain device memory that fills a real GPU, and a probe of what
// another process can allocate, for scripts/gpu-fullcard.sh. A plain driver-API
// program: it must run without libmsched (LD_PRELOAD unset), as any other
// tenant of the card would.
//
// Usage: balloon hold KEEP_GIB HEADROOM_MIB [MAX_S]
//            cuMemAllocs all of the card's free memory but KEEP_GIB GiB plus
//            HEADROOM_MIB MiB (the room left for the jobs' contexts), writes
//            it, says what it took and cuMemGetInfo after, then holds it until
//            its stdin closes (when stdin is a pipe, FIFO or terminal), it gets
//            SIGTERM, SIGINT or SIGHUP, its parent dies, or MAX_S seconds pass
//            (0 or none: no limit); then frees it and exits 0 (1 when it took
//            less than it should, 4 when the card had no more than that free).
//        balloon probe MIB [hold [MAX_S]]
//            cuMemGetInfo, then one timed cuMemAlloc of MIB MiB: success or
//            failure and its time, cuMemGetInfo; with hold, keeps the memory as
//            hold does; then frees it and says cuMemGetInfo again. Exit 0 when
//            the allocation succeeded, 3 when it failed.
//        balloon info
//            cuMemGetInfo once, with this process's own context made.
// Every figure is in bytes, on lines of KEY=VALUE fields (free_bytes,
// total_bytes, took_bytes, ms) that the script reads.
#include <cuda.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

const char* ErrorName(CUresult r) {
  const char* name = nullptr;
  return cuGetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr ? name : "unknown error";
}

#define CHECK(call)                                                           \
  do {                                                                        \
    CUresult r_ = (call);                                                     \
    if (r_ != CUDA_SUCCESS) {                                                 \
      std::fprintf(stderr, "balloon: %s failed: %s\n", #call, ErrorName(r_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The primary context of device 0, as the runtime (and every CUDA program) uses it.
int MakeContext(CUcontext* ctx) {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(ctx, dev));
  CHECK(cuCtxSetCurrent(*ctx));
  return 0;
}

int Info(const char* who, const char* when) {
  size_t free = 0, total = 0;
  CHECK(cuMemGetInfo(&free, &total));
  std::printf("%s: %s free_bytes=%zu total_bytes=%zu\n", who, when, free, total);
  std::fflush(stdout);
  return 0;
}

// Blocks until stdin closes (if it is a pipe, FIFO or terminal: /dev/null and
// files would close at once), a termination signal arrives, the parent dies
// (PR_SET_PDEATHSIG sends SIGTERM) or max_s seconds pass. Says which.
void Hold(const char* who, double max_s) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  const int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  struct stat st;
  const bool watch_stdin = fstat(0, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(0));
  std::printf("%s: holding until %s\n", who,
              watch_stdin ? "stdin closes or a signal" : "a signal (stdin is not a pipe)");
  std::fflush(stdout);
  const double deadline = max_s > 0 ? Now() + max_s : 0;
  std::string why = "?";
  for (;;) {
    if (getppid() == 1) {
      why = "its parent died";
      break;
    }
    pollfd fds[2] = {{sfd, POLLIN, 0}, {watch_stdin ? 0 : -1, POLLIN, 0}};
    int wait_ms = 1000;
    if (deadline > 0) {
      const double left = deadline - Now();
      if (left <= 0) {
        why = "its time limit passed";
        break;
      }
      if (left * 1000 < wait_ms) wait_ms = static_cast<int>(left * 1000) + 1;
    }
    const int n = poll(fds, 2, wait_ms);
    if (n < 0) continue;  // EINTR
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si;
      const ssize_t got = read(sfd, &si, sizeof si);
      why = got == static_cast<ssize_t>(sizeof si) ? std::string("signal ") + strsignal(si.ssi_signo) : "a signal";
      break;
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
      char buf[256];
      const ssize_t got = read(0, buf, sizeof buf);
      if (got <= 0) {
        why = "stdin closed";
        break;
      }
    }
  }
  std::printf("%s: released (%s)\n", who, why.c_str());
  std::fflush(stdout);
}

int HoldBalloon(uint64_t keep_gib, uint64_t headroom_mib, double max_s) {
  CUcontext ctx;
  if (MakeContext(&ctx) != 0) return 1;
  size_t free = 0, total = 0;
  CHECK(cuMemGetInfo(&free, &total));
  std::printf("balloon: context free_bytes=%zu total_bytes=%zu\n", free, total);
  const uint64_t keep = keep_gib * kGiB + headroom_mib * kMiB;
  if (free <= keep + 64 * kMiB) {  // the card is already that full: nothing to take, nothing to hold
    std::printf("balloon: nothing to take free_bytes=%zu total_bytes=%zu keep_bytes=%" PRIu64 "\n", free, total, keep);
    return 4;
  }
  // All but `keep`, in 2 MiB units, in chunks of up to 4 GiB (halved when one
  // fails, down to 64 MiB), each written once so that it is really backed.
  const uint64_t want = (free - keep) / (2 * kMiB) * (2 * kMiB);
  std::vector<CUdeviceptr> chunks;
  uint64_t took = 0, chunk = 4 * kGiB;
  const double t0 = Now();
  while (took < want && chunk >= 64 * kMiB) {
    const uint64_t size = want - took < chunk ? want - took : chunk;
    CUdeviceptr p = 0;
    const CUresult r = cuMemAlloc(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      chunk /= 2;
      continue;
    }
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "balloon: cuMemAlloc(%" PRIu64 ") failed: %s\n", size, ErrorName(r));
      break;
    }
    if (cuMemsetD8(p, 0xA5, size) != CUDA_SUCCESS) std::fprintf(stderr, "balloon: cuMemsetD8 failed\n");
    chunks.push_back(p);
    took += size;
  }
  CHECK(cuCtxSynchronize());
  const double t1 = Now();
  CHECK(cuMemGetInfo(&free, &total));
  std::printf("balloon: holding took_bytes=%" PRIu64
              " chunks=%zu ms=%.1f free_bytes=%zu total_bytes=%zu keep_bytes=%" PRIu64 "\n",
              took, chunks.size(), (t1 - t0) * 1e3, free, total, keep);
  std::fflush(stdout);
  const bool short_of = took + 256 * kMiB < want;
  if (short_of) std::fprintf(stderr, "balloon: took %" PRIu64 " of the %" PRIu64 " bytes wanted\n", took, want);
  Hold("balloon", max_s);
  for (CUdeviceptr p : chunks) CHECK(cuMemFree(p));
  CHECK(cuMemGetInfo(&free, &total));
  std::printf("balloon: freed free_bytes=%zu total_bytes=%zu\n", free, total);
  CHECK(cuDevicePrimaryCtxRelease(0));
  return short_of ? 1 : 0;
}

int Probe(uint64_t mib, bool hold, double max_s) {
  CUcontext ctx;
  if (MakeContext(&ctx) != 0) return 1;
  if (Info("probe", "before") != 0) return 1;
  const uint64_t size = mib * kMiB;
  CUdeviceptr p = 0;
  const double t0 = Now();
  const CUresult r = cuMemAlloc(&p, size);
  const double t1 = Now();
  if (r != CUDA_SUCCESS) {
    std::printf("probe: alloc failed bytes=%" PRIu64 " ms=%.3f error=%s\n", size, (t1 - t0) * 1e3, ErrorName(r));
    std::fflush(stdout);
    Info("probe", "after");
    return 3;
  }
  // Written once, so that the memory is backed and the time to use it shows.
  const CUresult w = cuMemsetD8(p, 0x5A, size);
  const CUresult s = w == CUDA_SUCCESS ? cuCtxSynchronize() : w;
  const double t2 = Now();
  std::printf("probe: alloc ok bytes=%" PRIu64 " ms=%.3f write_ms=%.3f%s\n", size, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
              s == CUDA_SUCCESS ? "" : " (the write failed)");
  std::fflush(stdout);
  if (Info("probe", "during") != 0) return 1;
  if (hold) Hold("probe", max_s);
  CHECK(cuMemFree(p));
  if (Info("probe", "after") != 0) return 1;
  return 0;
}

uint64_t Count(const char* text, bool* ok) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || text[0] == '-') *ok = false;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  bool ok = true;
  if (what == "hold" && (argc == 4 || argc == 5)) {
    const uint64_t keep = Count(argv[2], &ok), headroom = Count(argv[3], &ok);
    const double max_s = argc == 5 ? static_cast<double>(Count(argv[4], &ok)) : 0;
    if (ok) return HoldBalloon(keep, headroom, max_s);
  } else if (what == "probe" && argc >= 3 && argc <= 5 && (argc == 3 || std::string(argv[3]) == "hold")) {
    const uint64_t mib = Count(argv[2], &ok);
    const double max_s = argc == 5 ? static_cast<double>(Count(argv[4], &ok)) : 0;
    if (ok && mib > 0) return Probe(mib, argc >= 4, max_s);
  } else if (what == "info" && argc == 2) {
    CUcontext ctx;
    return MakeContext(&ctx) != 0 || Info("info", "now") != 0 ? 1 : 0;
  }
  std::fprintf(stderr,
               "usage: balloon hold KEEP_GIB HEADROOM_MIB [MAX_S] | balloon probe MIB [hold [MAX_S]] | balloon info\n");
  return 2;
}

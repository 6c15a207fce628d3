// mschedd --metrics: `GET /metrics` over HTTP, in the Prometheus text
// format (src/coord/metrics.h), served by civetweb from its own threads.
// Those threads read only the MetricsBoard the coordinator publishes to,
// never the scheduler, and render the latest snapshot per request. It
// listens at one IPv4 address only; everything but GET or HEAD of /metrics
// is answered 404 (another path) or 405 (another method). Nothing asks who
// is reading: what may be published is decided before the snapshot is made
// (docs/operate.md, "Metrics").
// Thread-safe; linked only into mschedd.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "coord/metrics.h"
#include "msched/status.h"

struct mg_connection;
struct mg_context;

namespace msched {

class MetricsHttp {
 public:
  // "ADDR:PORT" with a numeric IPv4 address and a port from 0 to 65535 (0:
  // any free one), as civetweb's listening_ports wants it; InvalidArgument
  // naming the accepted form otherwise.
  static Result<std::string> ParseAddress(std::string_view text);
  // Serves `board` at `address` (from ParseAddress). Fails with the reason
  // civetweb gave when it cannot listen there (a port in use). `log` takes
  // civetweb's error lines from then on, from its threads.
  static Result<std::unique_ptr<MetricsHttp>> Start(const std::string& address,
                                                    std::shared_ptr<const MetricsBoard> board,
                                                    std::function<void(const std::string&)> log);
  // Stops listening and waits for the requests being served.
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  // The address it listens at, with the port it got: "127.0.0.1:9400".
  const std::string& address() const { return address_; }

 private:
  MetricsHttp(std::shared_ptr<const MetricsBoard> board, std::function<void(const std::string&)> log)
      : board_(std::move(board)), log_(std::move(log)) {}
  static int Serve(mg_connection* conn, void* self);
  static int OnLog(const mg_connection* conn, const char* message);
  void Log(const std::string& line) MSCHED_EXCLUDES(mu_);

  const std::shared_ptr<const MetricsBoard> board_;
  const std::function<void(const std::string&)> log_;
  mg_context* ctx_ = nullptr;
  std::string address_;
  Mutex mu_;
  bool started_ MSCHED_GUARDED_BY(mu_) = false;
  std::string start_errors_ MSCHED_GUARDED_BY(mu_);  // civetweb's lines while it starts
};

}  // namespace msched

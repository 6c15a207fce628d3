// mschedd --metrics: `GET /metrics` over HTTP/1.x, in the Prometheus text
// format (src/coord/metrics.h), served by one thread of its own that runs
// an epoll loop over every connection. That thread reads only the
// MetricsBoard the coordinator publishes to, never the scheduler, and
// renders the latest snapshot per request. It listens at one IPv4 address
// only; everything but GET or HEAD of /metrics is answered 404 (another
// path) or 405 (another method), and each connection is closed after its
// answer. No number of connections can keep a scrape out: a request must be
// whole within 1 s of its connection being accepted, and at the cap on open
// connections a newcomer closes an older one, one already answered or else
// the oldest still sending its request (docs/operate.md, "Metrics").
// Nothing asks who is reading: what may be published is decided before the
// snapshot is made.
// Start and the destructor are called from one thread; the connections are
// confined to the server's thread. Linked only into mschedd (and its tests).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "coord/metrics.h"
#include "msched/status.h"

namespace msched {

class MetricsHttp {
 public:
  // "ADDR:PORT" with a numeric IPv4 address and a port from 0 to 65535 (0:
  // any free one), in canonical form; InvalidArgument naming the accepted
  // form otherwise.
  static Result<std::string> ParseAddress(std::string_view text);
  // Serves `board` at `address` (from ParseAddress). IoError naming the
  // address and the reason when it cannot listen there ("Address already in
  // use"). From then on, `log` takes a line for each error the server meets,
  // and at most one a minute counting the connections it dropped, from the
  // server's thread.
  static Result<std::unique_ptr<MetricsHttp>> Start(const std::string& address,
                                                    std::shared_ptr<const MetricsBoard> board,
                                                    std::function<void(const std::string&)> log);
  // Stops the server's thread, waits for it and closes every connection.
  ~MetricsHttp();
  MetricsHttp(const MetricsHttp&) = delete;
  MetricsHttp& operator=(const MetricsHttp&) = delete;

  // The address it listens at, with the port it got: "127.0.0.1:9400".
  const std::string& address() const { return address_; }
  // The most connections it holds open at once: 512, or a quarter of the
  // process's descriptor limit when that is lower.
  size_t max_connections() const;

 private:
  class Loop;  // the server thread's state (metrics_http.cc)
  MetricsHttp(std::unique_ptr<Loop> loop, std::string address);

  const std::unique_ptr<Loop> loop_;
  const std::string address_;
  std::thread thread_;  // runs loop_
};

}  // namespace msched

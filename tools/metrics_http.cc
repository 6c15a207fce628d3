#include "metrics_http.h"

#include <arpa/inet.h>
#include <civetweb.h>

#include <charconv>
#include <cstring>
#include <utility>

namespace msched {
namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// civetweb gives each connection a thread of its own from the moment it is
// accepted until it is answered or dropped: a connection that sends nothing,
// or half a request, holds its thread for the whole request timeout, and
// civetweb cannot cap connections per peer (nor would a cap help on
// loopback, where every local user is 127.0.0.1). Scrapes are rare and
// answered in a millisecond, so threads are there to outnumber stalled
// connections, and the timeout is short: a scraper sends its whole request
// at once, and a stalled connection is dropped after 1 s. A scrape then
// waits only while more than 32 connections stall at once, about a second
// for every 32 more.
constexpr char kThreads[] = "32";
constexpr char kRequestTimeoutMs[] = "1000";

}  // namespace

Result<std::string> MetricsHttp::ParseAddress(std::string_view text) {
  const auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not an address to listen at: expected IPv4-ADDRESS:PORT, such as "
                                   "127.0.0.1:9400 (port 0: any free one)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad();
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  in_addr addr{};
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535 ||
      ::inet_pton(AF_INET, host.c_str(), &addr) != 1) {
    return bad();
  }
  // civetweb would take a host name too and listen on every address: only
  // the canonical form of a numeric one goes to it.
  char canonical[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &addr, canonical, sizeof canonical);
  return std::string(canonical) + ":" + std::to_string(port);
}

Result<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& address,
                                                        std::shared_ptr<const MetricsBoard> board,
                                                        std::function<void(const std::string&)> log) {
  std::unique_ptr<MetricsHttp> http(new MetricsHttp(std::move(board), std::move(log)));
  mg_init_library(0);
  mg_callbacks callbacks{};
  callbacks.log_message = &MetricsHttp::OnLog;
  // No document_root: civetweb serves no files, only the handler below.
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", kThreads,
                           "request_timeout_ms", kRequestTimeoutMs, nullptr};
  mg_init_data init{&callbacks, http.get(), options};
  char text[256] = "";
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof text};
  http->ctx_ = mg_start2(&init, &error);
  {
    MutexLock lock(&http->mu_);
    http->started_ = true;
    if (http->ctx_ == nullptr) {
      // civetweb's own summary ("Failed to setup server ports") follows the
      // line that says why ("cannot bind to ...: 98 (Address already in use)").
      const std::string why = http->start_errors_.empty() ? std::string(text) : http->start_errors_;
      return Status::IoError("cannot serve metrics at " + address + ": " + why);
    }
  }
  mg_set_request_handler(http->ctx_, "/", &MetricsHttp::Serve, http.get());
  mg_server_port ports[4];
  const int n = mg_get_server_ports(http->ctx_, 4, ports);
  const std::string host = address.substr(0, address.rfind(':'));
  http->address_ = n > 0 ? host + ":" + std::to_string(ports[0].port) : address;
  return http;
}

MetricsHttp::~MetricsHttp() {
  if (ctx_ != nullptr) mg_stop(ctx_);  // joins civetweb's threads
  mg_exit_library();
}

int MetricsHttp::Serve(mg_connection* conn, void* self) {
  const MetricsHttp& http = *static_cast<const MetricsHttp*>(self);
  const mg_request_info* request = mg_get_request_info(conn);
  if (request == nullptr || request->local_uri == nullptr || std::strcmp(request->local_uri, "/metrics") != 0) {
    mg_send_http_error(conn, 404, "%s", "mschedd serves /metrics only\n");
    return 404;
  }
  const bool head = std::strcmp(request->request_method, "HEAD") == 0;
  if (!head && std::strcmp(request->request_method, "GET") != 0) {
    mg_response_header_start(conn, 405);
    mg_response_header_add(conn, "Allow", "GET, HEAD", -1);
    mg_response_header_add(conn, "Content-Length", "0", -1);
    mg_response_header_send(conn);
    return 405;
  }
  const std::shared_ptr<const MetricsSnapshot> snapshot = http.board_->Latest();
  if (snapshot == nullptr) {  // the coordinator publishes one before this server starts
    mg_send_http_error(conn, 503, "%s", "no metrics yet\n");
    return 503;
  }
  const std::string body = RenderPrometheus(*snapshot);
  mg_send_http_ok(conn, kContentType, static_cast<long long>(body.size()));
  if (!head) mg_write(conn, body.data(), body.size());
  return 200;
}

int MetricsHttp::OnLog(const mg_connection* conn, const char* message) {
  const mg_context* ctx = conn != nullptr ? mg_get_context(conn) : nullptr;
  auto* http = ctx != nullptr ? static_cast<MetricsHttp*>(mg_get_user_data(ctx)) : nullptr;
  if (http != nullptr && message != nullptr) http->Log(message);
  return 1;  // handled: civetweb writes nothing itself
}

void MetricsHttp::Log(const std::string& line) {
  {
    MutexLock lock(&mu_);
    if (!started_) {
      start_errors_ += (start_errors_.empty() ? "" : "; ") + line;
      return;
    }
  }
  log_("metrics server: " + line);
}

}  // namespace msched

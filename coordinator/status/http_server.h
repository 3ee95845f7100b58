// A small HTTP/1.1 server for the status page and /metrics: one thread,
// non-blocking sockets and poll(2), one request per connection (answered
// with `Connection: close`). What a client can cost is bounded: a request
// must arrive whole, headers included, within kRequestTimeout and
// kMaxRequestBytes; a response must be taken within kResponseTimeout; at
// most kMaxConnections are open (a new one closes the oldest). A slow or
// silent client therefore holds a slot for seconds, never the thread, and
// never the coordinator: the handler runs on this thread and asks the
// coordinator's owner only for a copy of the status.
//
// Hand-written rather than cpp-httplib: httplib's timeouts apply to each
// read, so a client sending a byte every few seconds keeps one of its
// worker threads for as long as it likes.
#ifndef TRL_COORDINATOR_STATUS_HTTP_SERVER_H_
#define TRL_COORDINATOR_STATUS_HTTP_SERVER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace trl {

struct HttpRequest {
  std::string method;  // "GET"
  std::string target;  // "/metrics?x=1"
  std::string host;    // the Host header, "" if none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A plain-text response (errors, refusals).
HttpResponse TextResponse(int status, std::string body);

// Parses a request's head (up to and including its blank line). Returns
// nothing for a malformed one.
std::optional<HttpRequest> ParseHttpRequestHead(const std::string& head);

// The bytes of `response` on the wire (HEAD: without the body).
std::string SerializeHttpResponse(const HttpResponse& response, bool head_only);

class StatusHttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  static constexpr std::chrono::seconds kRequestTimeout{5};
  static constexpr std::chrono::seconds kResponseTimeout{30};
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 64;

  // Listens on address:port (a numeric address; port 0 picks one) and
  // serves until destroyed. `handler` runs on the server's thread.
  static absl::StatusOr<std::unique_ptr<StatusHttpServer>> Start(
      const std::string& address, int port, Handler handler);
  ~StatusHttpServer();
  StatusHttpServer(const StatusHttpServer&) = delete;
  StatusHttpServer& operator=(const StatusHttpServer&) = delete;

  int port() const { return port_; }

 private:
  StatusHttpServer(int listen_fd, int wake_fd, int port, Handler handler);
  void Run();

  const int listen_fd_;
  const int wake_fd_;  // an eventfd: written to stop the thread
  const int port_;
  const Handler handler_;
  std::thread thread_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_HTTP_SERVER_H_

#include "coordinator/status/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/network.h"

namespace trl {
namespace {

using Clock = std::chrono::steady_clock;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

// One client: its request comes in, then its response goes out.
struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool writing = false;
};

}  // namespace

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

std::optional<HttpRequest> ParseHttpRequestHead(const std::string& head) {
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty()) return std::nullopt;
  std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || !absl::StartsWith(first[2], "HTTP/1.") ||
      first[1].empty() || first[1][0] != '/') {
    return std::nullopt;
  }
  HttpRequest request;
  request.method = first[0];
  request.target = first[1];
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    if (absl::EqualsIgnoreCase(lines[i].substr(0, colon), "host")) {
      request.host =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
  }
  return request;
}

std::string SerializeHttpResponse(const HttpResponse& response,
                                  bool head_only) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status),
                   "\r\nContent-Type: ", response.content_type,
                   "\r\nContent-Length: ", response.body.size(),
                   "\r\nConnection: close\r\nCache-Control: no-store\r\n"
                   "X-Content-Type-Options: nosniff\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  out.append("\r\n");
  if (!head_only) out.append(response.body);
  return out;
}

absl::StatusOr<std::unique_ptr<StatusHttpServer>> StatusHttpServer::Start(
    const std::string& address, int port, Handler handler) {
  auto socket_address = NumericSocketAddress(address, port);
  if (!socket_address) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not a numeric IP address"));
  }
  const sockaddr* sa =
      reinterpret_cast<const sockaddr*>(&socket_address->storage);
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, sa, socket_address->length) != 0 || listen(fd, SOMAXCONN) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", JoinHostPort(address, port), ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(std::strerror(errno));
  }
  std::unique_ptr<StatusHttpServer> server(
      new StatusHttpServer(fd, wake, bound_port, std::move(handler)));
  server->thread_ = std::thread([s = server.get()] { s->Run(); });
  return server;
}

StatusHttpServer::StatusHttpServer(int listen_fd, int wake_fd, int port,
                                   Handler handler)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      handler_(std::move(handler)) {}

StatusHttpServer::~StatusHttpServer() {
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void StatusHttpServer::Run() {
  // Oldest first: when full, the front goes.
  std::deque<Connection> connections;
  std::vector<pollfd> fds;
  auto finish_request = [this](Connection& c) {
    const size_t end = c.in.find("\r\n\r\n");
    auto request = ParseHttpRequestHead(c.in.substr(0, end + 2));
    HttpResponse response;
    bool head_only = false;
    if (!request) {
      response = TextResponse(400, "malformed request\n");
    } else {
      head_only = request->method == "HEAD";
      response = handler_(*request);
    }
    c.out = SerializeHttpResponse(response, head_only);
    c.writing = true;
    c.deadline = Clock::now() + kResponseTimeout;
    shutdown(c.fd, SHUT_RD);
  };
  while (true) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto now = Clock::now();
    auto next_deadline = now + std::chrono::seconds(1);
    for (const Connection& c : connections) {
      fds.push_back(
          {c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
        next_deadline - now);
    if (poll(fds.data(), fds.size(),
             static_cast<int>(std::max<int64_t>(0, wait.count()) + 1)) < 0 &&
        errno != EINTR) {
      ComponentLogger("status")->error("poll: {}", std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;
    // Serve the open connections (their pollfds follow the first two).
    now = Clock::now();
    size_t index = 2;
    for (auto it = connections.begin(); it != connections.end(); ++index) {
      Connection& c = *it;
      bool done = false;
      if (fds[index].revents != 0 && !c.writing) {
        char buffer[4096];
        const ssize_t n = read(c.fd, buffer, sizeof(buffer));
        if (n > 0) {
          c.in.append(buffer, n);
          if (c.in.size() > kMaxRequestBytes) {
            c.out = SerializeHttpResponse(
                TextResponse(431, "request too large\n"), false);
            c.writing = true;
            c.deadline = now + kResponseTimeout;
          } else if (c.in.find("\r\n\r\n") != std::string::npos) {
            finish_request(c);
          }
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          done = true;
        }
      } else if (fds[index].revents != 0 && c.writing) {
        const ssize_t n = send(c.fd, c.out.data() + c.sent,
                               c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) {
          c.sent += n;
          done = c.sent == c.out.size();
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          done = true;
        }
      }
      if (!done && now >= c.deadline) {
        if (!c.writing) {
          // Too slow to ask: told so, once, without waiting for it to read.
          const std::string late = SerializeHttpResponse(
              TextResponse(408, "request timeout\n"), false);
          ssize_t ignored =
              send(c.fd, late.data(), late.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          (void)ignored;
        }
        done = true;
      }
      if (done) {
        close(c.fd);
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents != 0) {
      // Take every waiting client; over the cap the oldest makes room.
      while (true) {
        const int fd =
            accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (connections.size() >= kMaxConnections) {
          close(connections.front().fd);
          connections.pop_front();
        }
        Connection c;
        c.fd = fd;
        c.deadline = Clock::now() + kRequestTimeout;
        connections.push_back(std::move(c));
      }
    }
  }
  for (Connection& c : connections) close(c.fd);
}

}  // namespace trl

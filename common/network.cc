#include "common/network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/kernel_files.h"
#include "common/listen_port_range.h"

namespace trl {
namespace {

std::string AddressText(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr,
              text, sizeof(text));
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr,
              text, sizeof(text));
  }
  return text;
}

// Closes a descriptor on every path out of a scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<addrinfo*> Lookup(const std::string& host, int port,
                                 int socktype) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  return result;
}

}  // namespace

absl::StatusOr<std::string> LocalAddressTowards(const std::string& host,
                                                int port) {
  auto found = Lookup(host, port, SOCK_DGRAM);
  if (!found.ok()) return found.status();
  std::string error = "no address";
  for (addrinfo* ai = *found; ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) continue;
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      error = std::strerror(errno);
      continue;
    }
    sockaddr_storage local = {};
    socklen_t length = sizeof(local);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) ==
        0) {
      freeaddrinfo(*found);
      return AddressText(reinterpret_cast<sockaddr*>(&local));
    }
  }
  freeaddrinfo(*found);
  return absl::UnavailableError(
      absl::StrCat("no route to ", host, ":", port, ": ", error));
}

std::string InterfaceWithAddress(const std::string& address) {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "";
  std::string name;
  for (ifaddrs* it = interfaces; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    if (AddressText(it->ifa_addr) == address) {
      name = it->ifa_name;
      break;
    }
  }
  freeifaddrs(interfaces);
  return name;
}

absl::StatusOr<std::string> ResolveHost(const std::string& host) {
  auto found = Lookup(host, 0, SOCK_STREAM);
  if (!found.ok()) return found.status();
  std::string best;
  for (addrinfo* ai = *found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      best = AddressText(ai->ai_addr);
      break;
    }
    if (best.empty()) best = AddressText(ai->ai_addr);
  }
  freeaddrinfo(*found);
  if (best.empty()) {
    return absl::NotFoundError(
        absl::StrCat("host '", host, "' has no address"));
  }
  return best;
}

namespace {

// Binds a TCP socket to `address` with `port` (0: the kernel's pick) and
// gives the port bound, or -1 (errno set). The socket is closed on return.
int BindOnce(const addrinfo* address, int port) {
  sockaddr_storage at = {};
  std::memcpy(&at, address->ai_addr, address->ai_addrlen);
  if (at.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&at)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&at)->sin_port = htons(port);
  }
  ScopedFd fd(socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || bind(fd.get(), reinterpret_cast<sockaddr*>(&at),
                           address->ai_addrlen) != 0) {
    return -1;
  }
  sockaddr_storage local = {};
  socklen_t length = sizeof(local);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) !=
      0) {
    return -1;
  }
  if (local.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

}  // namespace

absl::StatusOr<int> PickFreePort(const std::string& address) {
  auto found = Lookup(address, 0, SOCK_STREAM);
  if (!found.ok()) return found.status();
  const addrinfo* ai = *found;
  // Below the ephemeral range first (common/listen_port_range.h): no
  // outgoing connection takes such a port before its listener binds it.
  const auto ephemeral = ParsePortRange(
      ReadKernelFile("/proc/sys/net/ipv4/ip_local_port_range", 64));
  const auto ports = ephemeral ? ListenPortsBelow(*ephemeral) : std::nullopt;
  int port = -1;
  if (ports) {
    constexpr int kBinds = 64;  // ports tried, skipped ones not counted
    const unsigned seed = std::random_device{}();
    for (int i = 0, binds = 0; i < ports->size() && binds < kBinds && port < 0;
         ++i) {
      const int candidate = CandidatePort(*ports, seed, i);
      if (IsAnotherLaunchersDefault(candidate)) continue;
      ++binds;
      port = BindOnce(ai, candidate);
    }
  }
  if (port < 0) port = BindOnce(ai, 0);
  const int error = errno;
  freeaddrinfo(*found);
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot bind a port on ", address, ": ", std::strerror(error)));
  }
  return port;
}

bool IsLoopbackAddress(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1";
}

std::string LocalHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

std::optional<SocketAddress> NumericSocketAddress(const std::string& host,
                                                  int port) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) !=
      0) {
    return std::nullopt;
  }
  SocketAddress address;
  std::memcpy(&address.storage, found->ai_addr, found->ai_addrlen);
  address.length = found->ai_addrlen;
  address.family = found->ai_family;
  freeaddrinfo(found);
  return address;
}

TcpProbe ProbeTcpPort(const std::string& host, int port, int timeout_ms) {
  TcpProbe probe;
  const auto address = NumericSocketAddress(host, port);
  if (!address) {
    probe.outcome = TcpProbe::kUnreachable;
    probe.error = EINVAL;
    return probe;
  }
  const int fd =
      socket(address->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    probe.error = errno;
    return probe;
  }
  int error = 0;
  if (connect(fd, address->get(), address->length) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd waiting = {fd, POLLOUT, 0};
      socklen_t length = sizeof(error);
      if (poll(&waiting, 1, timeout_ms) != 1 ||
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        close(fd);
        return probe;  // kNoAnswer, error 0: nothing came back in time
      }
    }
  }
  close(fd);
  probe.error = error;
  switch (error) {
    case 0:
      probe.outcome = TcpProbe::kAnswered;
      break;
    case ECONNREFUSED:
      probe.outcome = TcpProbe::kRefused;
      break;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case EHOSTDOWN:
      probe.outcome = TcpProbe::kUnreachable;
      break;
    default:
      probe.outcome = TcpProbe::kNoAnswer;
      break;
  }
  return probe;
}

bool TcpPortAnswers(const std::string& host, int port, int timeout_ms) {
  return ProbeTcpPort(host, port, timeout_ms).outcome == TcpProbe::kAnswered;
}

absl::StatusOr<int> OpenUdpSocket(const std::string& host, int port,
                                  UdpEnd end) {
  const auto address = NumericSocketAddress(host, port);
  if (!address) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host, "' is not a numeric address"));
  }
  const int fd =
      socket(address->family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a UDP socket: ", strerror(errno)));
  }
  const bool done = end == UdpEnd::kBound
                        ? bind(fd, address->get(), address->length) == 0
                        : connect(fd, address->get(), address->length) == 0;
  if (!done) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        end == UdpEnd::kBound ? "cannot bind UDP " : "cannot reach UDP ",
        JoinHostPort(host, port), ": ", strerror(error)));
  }
  return fd;
}

}  // namespace trl

// Small network facts a launcher needs: which local address routes to a
// peer, which interface carries an address, name resolution and free ports.
#ifndef TRL_COMMON_NETWORK_H_
#define TRL_COMMON_NETWORK_H_

#include <sys/socket.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace trl {

// The local address the kernel would use to reach host:port (a UDP connect,
// which sends nothing). This is the address peers reach us at.
absl::StatusOr<std::string> LocalAddressTowards(const std::string& host,
                                                int port);

// The name of the interface holding `address`, or "" if none does.
std::string InterfaceWithAddress(const std::string& address);

// Resolves a host name or literal to a numeric address (IPv4 preferred).
absl::StatusOr<std::string> ResolveHost(const std::string& host);

// A TCP port that is free on `address` right now, for a listener that binds
// it later: below the kernel's ephemeral range where it can
// (common/listen_port_range.h), else the kernel's pick (bind to port 0).
absl::StatusOr<int> PickFreePort(const std::string& address);

std::string LocalHostName();

// A numeric host and a port as a socket address; nullopt when `host` is
// not a numeric address.
struct SocketAddress {
  sockaddr_storage storage = {};
  socklen_t length = 0;
  int family = 0;
  const sockaddr* get() const {
    return reinterpret_cast<const sockaddr*>(&storage);
  }
};
std::optional<SocketAddress> NumericSocketAddress(const std::string& host,
                                                  int port);

// A non-blocking UDP socket bound to host:port (numeric host), or
// connected to it; an error names the address when that fails.
enum class UdpEnd { kBound, kConnected };
absl::StatusOr<int> OpenUdpSocket(const std::string& host, int port,
                                  UdpEnd end);

// What one TCP connection attempt to host:port (numeric) found; the
// connection is closed at once. `error` is the errno of a failure (0 when
// nothing answered in time).
struct TcpProbe {
  enum Outcome {
    kAnswered,     // accepted
    kRefused,      // the host answered: nothing listens on the port
    kUnreachable,  // no route to the host or its network (or a bad address)
    kNoAnswer,     // nothing came back in time (host down, or packets
                   // dropped on the way)
  };
  Outcome outcome = kNoAnswer;
  int error = 0;
};
TcpProbe ProbeTcpPort(const std::string& host, int port, int timeout_ms);

// True if a TCP connection to host:port (numeric) is accepted within
// `timeout_ms`; the connection is closed at once.
bool TcpPortAnswers(const std::string& host, int port, int timeout_ms);

// True for 127.0.0.0/8 and ::1.
bool IsLoopbackAddress(const std::string& address);

// "host:port", bracketing IPv6 literals.
std::string JoinHostPort(const std::string& host, int port);

}  // namespace trl

#endif  // TRL_COMMON_NETWORK_H_

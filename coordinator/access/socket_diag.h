// The kernel's socket-diagnostics interface (NETLINK_SOCK_DIAG, inet_diag)
// asked for the established TCP sockets on one local port. It is what
// `ss` uses. Reading /proc/net/tcp instead had the kernel format a line
// for every socket of the network namespace on every read: at 4096 agents
// that scan was about 75% of the coordinator's CPU. Here the kernel
// filters on the state and the port (a bytecode filter) and sends only the
// matches, in binary.
//
// Not thread-safe: one SocketDiag per thread (the governor's).
#ifndef TRL_COORDINATOR_ACCESS_SOCKET_DIAG_H_
#define TRL_COORDINATOR_ACCESS_SOCKET_DIAG_H_

#include <linux/netlink.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace trl {

// One socket of a dump, as the kernel reports it.
struct DiagSocket {
  int family = 0;  // AF_INET or AF_INET6
  // Network byte order: 4 bytes for AF_INET, 16 for AF_INET6 (an IPv4
  // peer of a dual-stack listener as ::ffff:a.b.c.d).
  std::array<uint8_t, 16> local_address = {};
  std::array<uint8_t, 16> peer_address = {};
  uint16_t local_port = 0;  // host byte order
  uint16_t peer_port = 0;
  uint64_t inode = 0;  // as in /proc/self/fd's "socket:[INODE]"
};

class SocketDiag {
 public:
  // Opens the netlink socket, once: a process at its descriptor limit (what
  // a flood brings about) could not open it again.
  static absl::StatusOr<std::unique_ptr<SocketDiag>> Open();
  ~SocketDiag();
  SocketDiag(const SocketDiag&) = delete;
  SocketDiag& operator=(const SocketDiag&) = delete;

  // The ESTABLISHED TCP sockets of this network namespace with local port
  // `port`, of `family` (AF_INET or AF_INET6: one dump each).
  absl::StatusOr<std::vector<DiagSocket>> Established(int family,
                                                      uint16_t port);

 private:
  explicit SocketDiag(int fd);

  const int fd_;
  uint32_t sequence_ = 0;
  // One batch of a dump: the kernel sends ~100 bytes a socket and at most
  // 32 KiB a batch; twice that, and MSG_TRUNC tells if it ever sends more.
  std::vector<nlmsghdr> buffer_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_ACCESS_SOCKET_DIAG_H_

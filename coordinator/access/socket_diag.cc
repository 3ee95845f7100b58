#include "coordinator/access/socket_diag.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace trl {

namespace {

// A filter the kernel runs on every socket (inet_diag_bc_run): the local
// port is >= port and <= port. Each comparison is an op followed by one
// holding the port; "yes" steps to the next op, "no" jumps 4 bytes past
// the end, which rejects. (INET_DIAG_BC_S_EQ would do it in one op, but
// only from Linux 4.17; these two work on every kernel with inet_diag.)
std::vector<inet_diag_bc_op> LocalPortFilter(uint16_t port) {
  return {
      {INET_DIAG_BC_S_GE, 8, 20},
      {0, 0, port},
      {INET_DIAG_BC_S_LE, 8, 12},
      {0, 0, port},
  };
}

absl::Status Errno(const char* what, int error) {
  return absl::UnavailableError(
      absl::StrCat("socket diagnostics: ", what, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketDiag>> SocketDiag::Open() {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return Errno("socket(NETLINK_SOCK_DIAG)", errno);
  // The kernel always answers a dump; a bound on the wait all the same, so
  // that nothing can hold the caller (the governor's thread) for good.
  timeval timeout = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return std::unique_ptr<SocketDiag>(new SocketDiag(fd));
}

SocketDiag::SocketDiag(int fd)
    : fd_(fd), buffer_(64 * 1024 / sizeof(nlmsghdr)) {}

SocketDiag::~SocketDiag() { close(fd_); }

absl::StatusOr<std::vector<DiagSocket>> SocketDiag::Established(int family,
                                                                uint16_t port) {
  if (family != AF_INET && family != AF_INET6) {
    return absl::InvalidArgumentError("socket diagnostics: not AF_INET(6)");
  }
  const std::vector<inet_diag_bc_op> filter = LocalPortFilter(port);
  const size_t filter_bytes = filter.size() * sizeof(inet_diag_bc_op);

  // nlmsghdr, inet_diag_req_v2, then the filter as INET_DIAG_REQ_BYTECODE.
  std::vector<char> request(NLMSG_LENGTH(sizeof(inet_diag_req_v2)) +
                            NLA_HDRLEN + filter_bytes);
  auto* header = reinterpret_cast<nlmsghdr*>(request.data());
  header->nlmsg_len = request.size();
  header->nlmsg_type = SOCK_DIAG_BY_FAMILY;
  header->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  header->nlmsg_seq = ++sequence_;
  auto* diag = reinterpret_cast<inet_diag_req_v2*>(NLMSG_DATA(header));
  diag->sdiag_family = family;
  diag->sdiag_protocol = IPPROTO_TCP;
  diag->idiag_states = 1u << TCP_ESTABLISHED;
  auto* attribute = reinterpret_cast<nlattr*>(
      request.data() + NLMSG_LENGTH(sizeof(inet_diag_req_v2)));
  attribute->nla_type = INET_DIAG_REQ_BYTECODE;
  attribute->nla_len = NLA_HDRLEN + filter_bytes;
  std::memcpy(reinterpret_cast<char*>(attribute) + NLA_HDRLEN, filter.data(),
              filter_bytes);

  sockaddr_nl kernel = {};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = sendto(fd_, request.data(), request.size(), 0,
                  reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel));
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return Errno("send", errno);

  // Read to the end of this dump even after a problem: the kernel refuses
  // the next dump (EBUSY) while one is unread. Messages of an earlier,
  // abandoned dump (another sequence number) are skipped.
  std::vector<DiagSocket> sockets;
  absl::Status problem;
  char* const buffer = reinterpret_cast<char*>(buffer_.data());
  const size_t buffer_bytes = buffer_.size() * sizeof(nlmsghdr);
  for (;;) {
    const ssize_t n = recv(fd_, buffer, buffer_bytes, MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("receive", errno);
    if (n == 0) return absl::InternalError("socket diagnostics: no reply");
    if (static_cast<size_t>(n) > buffer_bytes) {
      return absl::InternalError("socket diagnostics: a reply was truncated");
    }
    int left = static_cast<int>(n);
    for (auto* message = reinterpret_cast<nlmsghdr*>(buffer);
         NLMSG_OK(message, left); message = NLMSG_NEXT(message, left)) {
      if (message->nlmsg_seq != sequence_) continue;
      if (message->nlmsg_type == NLMSG_DONE) {
        // A dump that failed part of the way says so here.
        int error = 0;
        if (message->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
          std::memcpy(&error, NLMSG_DATA(message), sizeof(int));
        }
        if (error < 0 && problem.ok()) problem = Errno("dump", -error);
        if (!problem.ok()) return problem;
        return sockets;
      }
      if (message->nlmsg_type == NLMSG_ERROR) {
        int error = EPROTO;
        if (message->nlmsg_len >= NLMSG_LENGTH(sizeof(nlmsgerr))) {
          error = -static_cast<nlmsgerr*>(NLMSG_DATA(message))->error;
        }
        // The only answer to a request the kernel refused: nothing follows.
        return Errno("request", error);
      }
      if (message->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
          message->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
        if (problem.ok()) {
          problem = absl::InternalError(
              "socket diagnostics: a message of an unknown kind");
        }
        continue;
      }
      const auto* entry = static_cast<inet_diag_msg*>(NLMSG_DATA(message));
      DiagSocket socket;
      socket.family = entry->idiag_family;
      const size_t address_bytes = socket.family == AF_INET6 ? 16 : 4;
      std::memcpy(socket.local_address.data(), entry->id.idiag_src,
                  address_bytes);
      std::memcpy(socket.peer_address.data(), entry->id.idiag_dst,
                  address_bytes);
      socket.local_port = ntohs(entry->id.idiag_sport);
      socket.peer_port = ntohs(entry->id.idiag_dport);
      socket.inode = entry->idiag_inode;
      sockets.push_back(socket);
    }
  }
}

}  // namespace trl

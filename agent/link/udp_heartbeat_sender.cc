#include "agent/link/udp_heartbeat_sender.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "common/heartbeat_datagram.h"
#include "common/network.h"

namespace trl {

absl::StatusOr<std::unique_ptr<UdpHeartbeatSender>> UdpHeartbeatSender::Open(
    const std::string& host, int port, int machine_rank, uint64_t session,
    std::string key) {
  if (key.size() != kHeartbeatKeySize || session == 0) {
    return absl::InvalidArgumentError("the coordinator sent no usable key");
  }
  // Connected: only the coordinator's address is read from.
  auto fd = OpenUdpSocket(host, port, UdpEnd::kConnected);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<UdpHeartbeatSender>(
      new UdpHeartbeatSender(*fd, machine_rank, session, std::move(key)));
}

UdpHeartbeatSender::UdpHeartbeatSender(int fd, int machine_rank,
                                       uint64_t session, std::string key)
    : fd_(fd), sequence_(machine_rank, session, key) {}

UdpHeartbeatSender::~UdpHeartbeatSender() { close(fd_); }

bool UdpHeartbeatSender::SendHeartbeat() {
  const std::string bytes = sequence_.Next(std::chrono::steady_clock::now());
  return send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT) ==
         static_cast<ssize_t>(bytes.size());
}

bool UdpHeartbeatSender::PeerAddress(sockaddr_storage* to,
                                     socklen_t* to_length) const {
  *to_length = sizeof(*to);
  return getpeername(fd_, reinterpret_cast<sockaddr*>(to), to_length) == 0;
}

int UdpHeartbeatSender::ReadAcks() {
  int acks = 0;
  char buffer[kHeartbeatDatagramSize + 1];
  while (true) {
    const ssize_t got = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got < 0) {
      // ECONNREFUSED: an ICMP error for an earlier datagram (nobody on the
      // port); reading it clears it. Anything else: nothing more to read.
      if (errno == ECONNREFUSED || errno == EINTR) continue;
      return acks;
    }
    if (const auto sent = sequence_.Accept(
            std::string_view(buffer, static_cast<size_t>(got)))) {
      newest_acked_sent_ = *sent;
      ++acks;
    }
  }
}

}  // namespace trl

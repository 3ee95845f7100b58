#include "agent/udp_heartbeat_sender.h"

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
    : fd_(fd), machine_rank_(machine_rank), session_(session), key_(key) {}

UdpHeartbeatSender::~UdpHeartbeatSender() { close(fd_); }

bool UdpHeartbeatSender::SendHeartbeat() {
  HeartbeatDatagram beat;
  beat.kind = HeartbeatKind::kHeartbeat;
  beat.machine_rank = static_cast<uint32_t>(machine_rank_);
  beat.session = session_;
  beat.counter = ++counter_;
  const std::string bytes = EncodeHeartbeat(beat, key_);
  return send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT) ==
         static_cast<ssize_t>(bytes.size());
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
    const std::string_view bytes(buffer, static_cast<size_t>(got));
    const auto ack = ParseHeartbeat(bytes);
    if (ack && ack->kind == HeartbeatKind::kAck && ack->session == session_ &&
        ack->machine_rank == static_cast<uint32_t>(machine_rank_) &&
        ack->counter <= counter_ && ack->counter > acked_ &&
        HeartbeatSignedWith(bytes, key_)) {
      // Only an ack newer than every one before counts: a replayed ack
      // (a frozen coordinator's old answer) must not keep the lease.
      ++acks;
      acked_ = ack->counter;
    }
  }
}

}  // namespace trl

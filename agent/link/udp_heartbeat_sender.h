// The agent's end of heartbeats over UDP (common/heartbeat_datagram.h): a
// socket connected to the coordinator's port that sends the heartbeats of
// a HeartbeatSequence and reads the coordinator's acks.
#ifndef TRL_AGENT_LINK_UDP_HEARTBEAT_SENDER_H_
#define TRL_AGENT_LINK_UDP_HEARTBEAT_SENDER_H_

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/link/heartbeat_sequence.h"

namespace trl {

class UdpHeartbeatSender {
 public:
  // A socket connected to host:port (numeric host), for the session and
  // key the coordinator gave this stream.
  static absl::StatusOr<std::unique_ptr<UdpHeartbeatSender>> Open(
      const std::string& host, int port, int machine_rank, uint64_t session,
      std::string key);
  ~UdpHeartbeatSender();
  UdpHeartbeatSender(const UdpHeartbeatSender&) = delete;
  UdpHeartbeatSender& operator=(const UdpHeartbeatSender&) = delete;

  // Sends the next heartbeat; false if the kernel refused it.
  bool SendHeartbeat();
  // Reads every datagram waiting, without blocking; returns how many were
  // valid acks of this session newer than the newest before (others,
  // replays included, are dropped).
  int ReadAcks();
  // When the newest acknowledged heartbeat was sent (nullopt before the
  // first ack): the lease runs from there.
  std::optional<HeartbeatSequence::Time> NewestAckedSentAt() const {
    return newest_acked_sent_;
  }
  // The coordinator's address, as the socket is connected to it.
  bool PeerAddress(sockaddr_storage* to, socklen_t* to_length) const;
  // The agent's last word for this session (HeartbeatSequence::AgentGone).
  std::string AgentGone() { return sequence_.AgentGone(); }
  // Whether the last heartbeat sent has been acknowledged (false before
  // the first).
  bool LastHeartbeatAcked() const { return sequence_.LastAcked(); }

 private:
  UdpHeartbeatSender(int fd, int machine_rank, uint64_t session,
                     std::string key);

  const int fd_;
  HeartbeatSequence sequence_;
  std::optional<HeartbeatSequence::Time> newest_acked_sent_;
};

}  // namespace trl

#endif  // TRL_AGENT_LINK_UDP_HEARTBEAT_SENDER_H_

// The heartbeat datagrams of one agent's session (common/heartbeat_datagram.h)
// without a socket: each heartbeat signed with the session's key and a
// rising counter, and which of the coordinator's acks count: only a valid
// ack of this session and machine, for a heartbeat sent, newer than every
// one before (a replayed ack, say a frozen coordinator's old answer, must
// not keep the lease). An ack keeps the lease from when its heartbeat was
// sent (the coordinator heard the agent then), not from when it is read. A real
// agent has one per socket (udp_heartbeat_sender.h); the simulator has one per
// simulated agent, all on one socket.
#ifndef TRL_AGENT_LINK_HEARTBEAT_SEQUENCE_H_
#define TRL_AGENT_LINK_HEARTBEAT_SEQUENCE_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/heartbeat_datagram.h"

namespace trl {

class HeartbeatSequence {
 public:
  using Time = std::chrono::steady_clock::time_point;

  HeartbeatSequence(int machine_rank, uint64_t session, std::string_view key);
  HeartbeatSequence(const HeartbeatSequence&) = delete;
  HeartbeatSequence& operator=(const HeartbeatSequence&) = delete;

  // The next heartbeat's bytes, to be sent at `sent`.
  std::string Next(Time sent);
  // Whether `bytes` is an ack that counts (and from now on, the newest):
  // then when its heartbeat was sent. An ack of a heartbeat older than the
  // last kSendsKept does not count.
  std::optional<Time> Accept(std::string_view bytes);
  // Whether the last heartbeat made has been acknowledged (false before
  // the first).
  bool LastAcked() const { return counter_ > 0 && acked_ == counter_; }
  // The agent's last word for this session ("agent gone", counter 0),
  // signed now, to be sent by its guardian once it has died.
  std::string AgentGone();
  int machine_rank() const { return machine_rank_; }

 private:
  const int machine_rank_;
  const uint64_t session_;
  HeartbeatKey key_;
  static constexpr uint64_t kSendsKept = 64;
  uint64_t counter_ = 0;  // of the last heartbeat made
  uint64_t acked_ = 0;    // the highest acknowledged
  // When heartbeat `counter` was made: at counter % kSendsKept.
  std::array<Time, kSendsKept> sent_{};
};

}  // namespace trl

#endif  // TRL_AGENT_LINK_HEARTBEAT_SEQUENCE_H_

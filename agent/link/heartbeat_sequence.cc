#include "agent/link/heartbeat_sequence.h"

namespace trl {

HeartbeatSequence::HeartbeatSequence(int machine_rank, uint64_t session,
                                     std::string_view key)
    : machine_rank_(machine_rank), session_(session), key_(key) {}

std::string HeartbeatSequence::Next() {
  HeartbeatDatagram beat;
  beat.kind = HeartbeatKind::kHeartbeat;
  beat.machine_rank = static_cast<uint32_t>(machine_rank_);
  beat.session = session_;
  beat.counter = ++counter_;
  return EncodeHeartbeat(beat, key_);
}

bool HeartbeatSequence::Accept(std::string_view bytes) {
  const auto ack = ParseHeartbeat(bytes);
  if (!ack || ack->kind != HeartbeatKind::kAck || ack->session != session_ ||
      ack->machine_rank != static_cast<uint32_t>(machine_rank_) ||
      ack->counter > counter_ || ack->counter <= acked_ ||
      !HeartbeatSignedWith(bytes, key_)) {
    return false;
  }
  acked_ = ack->counter;
  return true;
}

}  // namespace trl

#include "agent/link/heartbeat_sequence.h"

namespace trl {

HeartbeatSequence::HeartbeatSequence(int machine_rank, uint64_t session,
                                     std::string_view key)
    : machine_rank_(machine_rank), session_(session), key_(key) {}

std::string HeartbeatSequence::Next(Time sent) {
  HeartbeatDatagram beat;
  beat.kind = HeartbeatKind::kHeartbeat;
  beat.machine_rank = static_cast<uint32_t>(machine_rank_);
  beat.session = session_;
  beat.counter = ++counter_;
  sent_[counter_ % kSendsKept] = sent;
  return EncodeHeartbeat(beat, key_);
}

std::string HeartbeatSequence::AgentGone() {
  HeartbeatDatagram gone;
  gone.kind = HeartbeatKind::kAgentGone;
  gone.machine_rank = static_cast<uint32_t>(machine_rank_);
  gone.session = session_;
  gone.counter = 0;
  return EncodeHeartbeat(gone, key_);
}

std::optional<HeartbeatSequence::Time> HeartbeatSequence::Accept(
    std::string_view bytes) {
  const auto ack = ParseHeartbeat(bytes);
  if (!ack || ack->kind != HeartbeatKind::kAck || ack->session != session_ ||
      ack->machine_rank != static_cast<uint32_t>(machine_rank_) ||
      ack->counter > counter_ || ack->counter <= acked_ ||
      counter_ - ack->counter >= kSendsKept ||
      !HeartbeatSignedWith(bytes, key_)) {
    return std::nullopt;
  }
  acked_ = ack->counter;
  return sent_[acked_ % kSendsKept];
}

}  // namespace trl

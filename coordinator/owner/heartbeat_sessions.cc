#include "coordinator/owner/heartbeat_sessions.h"

#include <algorithm>

namespace trl {

namespace pb = trl::launch::v1;

void HeartbeatSessions::OfferUdp(
    int port, std::function<std::string(size_t)> random_bytes) {
  udp_port_ = port;
  random_bytes_ = std::move(random_bytes);
}

void HeartbeatSessions::Open(AgentLink* stream, int key, int lease_ms,
                             pb::RegistrationReply* reply) {
  Stream& opened = streams_[stream];
  // Acknowledge heartbeats every lease / 3: the agent's lease is kept with
  // two acks to spare, at half the messages of one ack per heartbeat.
  opened.ack_every = std::chrono::milliseconds(std::max(0, lease_ms) / 3);
  if (udp_port_ > 0 && key >= 0) OfferUdpSession(opened, key, reply);
}

void HeartbeatSessions::OfferUdpSession(Stream& stream, int machine_rank,
                                        pb::RegistrationReply* reply) {
  // One draw: 8 bytes of session, then the key. Without randomness, or on
  // a (2^-64) clash, no offer: heartbeats stay on the stream.
  const std::string random = random_bytes_(8 + kHeartbeatKeySize);
  if (random.size() != 8 + kHeartbeatKeySize) return;
  uint64_t session = 0;
  for (size_t i = 0; i < 8; ++i) {
    session = (session << 8) | static_cast<unsigned char>(random[i]);
  }
  if (session == 0 || by_udp_session_.count(session)) return;
  const std::string key = random.substr(8);
  stream.udp_session = session;
  stream.machine_rank = machine_rank;
  stream.udp_key = std::make_unique<HeartbeatKey>(key);
  by_udp_session_[session] = &stream;
  reply->set_heartbeat_udp_port(udp_port_);
  reply->set_heartbeat_session(session);
  reply->set_heartbeat_key(key);
}

void HeartbeatSessions::EndUdpSession(AgentLink* stream) {
  const auto found = streams_.find(stream);
  if (found == streams_.end() || found->second.udp_session == 0) return;
  by_udp_session_.erase(found->second.udp_session);
  found->second.udp_session = 0;
}

void HeartbeatSessions::Close(AgentLink* stream) {
  EndUdpSession(stream);
  streams_.erase(stream);
}

bool HeartbeatSessions::HeartbeatOnStream(AgentLink* stream, TimePoint now) {
  const auto found = streams_.find(stream);
  if (found == streams_.end()) return false;
  Stream& beating = found->second;
  beating.heartbeat_via = "stream";
  if (beating.last_ack == TimePoint{} ||
      now - beating.last_ack >= beating.ack_every) {
    beating.last_ack = now;
    return true;
  }
  return false;
}

HeartbeatSessions::Checked HeartbeatSessions::CheckDatagrams(
    const std::vector<std::string_view>& datagrams) {
  Checked checked;
  for (size_t i = 0; i < datagrams.size(); ++i) {
    const auto beat = ParseHeartbeat(datagrams[i]);
    const char* refused = nullptr;
    const auto found =
        beat ? by_udp_session_.find(beat->session) : by_udp_session_.end();
    Stream* stream = found != by_udp_session_.end() ? found->second : nullptr;
    if (!beat || beat->kind != HeartbeatKind::kHeartbeat) {
      refused = "not a heartbeat";
    } else if (stream == nullptr) {
      refused = "no registered stream has its session";
    } else if (beat->counter <= stream->udp_counter) {
      // Before the MAC: a replayed datagram (captured on the network) is
      // refused without one, and a low counter is refused either way.
      refused = "replayed";
    } else if (static_cast<int64_t>(beat->machine_rank) !=
                   stream->machine_rank ||
               !HeartbeatSignedWith(datagrams[i], *stream->udp_key)) {
      refused = "bad signature";
    }
    if (refused != nullptr) {
      if (checked.first_refusal == nullptr) checked.first_refusal = refused;
      continue;
    }
    stream->udp_counter = beat->counter;
    stream->heartbeat_via = "udp";
    HeartbeatDatagram ack = *beat;
    ack.kind = HeartbeatKind::kAck;
    checked.accepted.push_back(
        {i, stream->machine_rank, EncodeHeartbeat(ack, *stream->udp_key)});
  }
  return checked;
}

const char* HeartbeatSessions::Via(const AgentLink* stream) const {
  const auto found = streams_.find(stream);
  return found == streams_.end() ? nullptr : found->second.heartbeat_via;
}

}  // namespace trl

#include "coordinator/owner/heartbeat_sessions.h"

#include <algorithm>

namespace trl {

namespace pb = trl::launch::v1;

void HeartbeatSessions::OfferUdp(
    int port, std::function<std::string(size_t)> random_bytes,
    bool hear_last_words) {
  udp_port_ = port;
  random_bytes_ = std::move(random_bytes);
  hear_last_words_ = hear_last_words;
}

void HeartbeatSessions::Open(AgentLink* stream, int key, int lease_ms,
                             pb::RegistrationReply* reply) {
  Stream& opened = streams_[stream];
  if (key >= 0) closed_.erase(key);  // its last stream's word is moot
  // Acknowledge heartbeats every lease / 3: the agent's lease is kept with
  // two acks to spare, at half the messages of one ack per heartbeat.
  opened.ack_every = std::chrono::milliseconds(std::max(0, lease_ms) / 3);
  if (udp_port_ > 0 && key >= 0) OfferUdpSession(opened, key, reply);
}

template <typename Message>
void HeartbeatSessions::OfferUdpSession(Stream& stream, int machine_rank,
                                        Message* message) {
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
  message->set_heartbeat_udp_port(udp_port_);
  message->set_heartbeat_session(session);
  message->set_heartbeat_key(key);
}

void HeartbeatSessions::EndUdpSession(AgentLink* stream) {
  const auto found = streams_.find(stream);
  if (found == streams_.end() || found->second.udp_session == 0) return;
  by_udp_session_.erase(found->second.udp_session);
  found->second.udp_session = 0;
}

void HeartbeatSessions::Rekey(AgentLink* stream, int machine_rank,
                              pb::RoleChange* change) {
  EndUdpSession(stream);
  const auto found = streams_.find(stream);
  if (found == streams_.end() || udp_port_ <= 0 || machine_rank < 0) return;
  found->second.udp_counter = 0;
  found->second.last_word_heard = false;
  OfferUdpSession(found->second, machine_rank, change);
}

bool HeartbeatSessions::Close(AgentLink* stream, int key) {
  const auto found = streams_.find(stream);
  bool heard = false;
  if (found != streams_.end() && found->second.udp_session != 0 &&
      found->second.machine_rank == key) {
    heard = found->second.last_word_heard;
    if (heard) {
      closed_.erase(key);  // said already: its copies are not heard
    } else {
      closed_[key] = {found->second.udp_session,
                      std::move(found->second.udp_key)};
    }
  } else if (key >= 0) {
    closed_.erase(key);  // a spare that held the machine: no word of it
  }
  EndUdpSession(stream);
  streams_.erase(stream);
  return heard;
}

bool HeartbeatSessions::IsLastWordOf(const HeartbeatDatagram& gone,
                                     std::string_view datagram,
                                     int machine_rank, HeartbeatKey& key) {
  return static_cast<int64_t>(gone.machine_rank) == machine_rank &&
         gone.counter == 0 && HeartbeatSignedWith(datagram, key);
}

const char* HeartbeatSessions::CheckAgentGone(const HeartbeatDatagram& gone,
                                              std::string_view datagram,
                                              Checked& checked) {
  if (!hear_last_words_) return "a last word without TLS";
  const auto open = by_udp_session_.find(gone.session);
  if (open != by_udp_session_.end()) {
    Stream& stream = *open->second;
    if (!IsLastWordOf(gone, datagram, stream.machine_rank, *stream.udp_key)) {
      return "bad signature";
    }
    // Kept until the stream ends (Close): a dead agent's connection closes
    // as it dies, and a word alone, were its key ever read, cannot end a
    // live agent's stream.
    stream.last_word_heard = true;
    return nullptr;
  }
  const auto closed = closed_.find(static_cast<int>(gone.machine_rank));
  if (closed == closed_.end() || closed->second.session != gone.session) {
    return "no registered stream has its session";
  }
  if (!IsLastWordOf(gone, datagram, closed->first, *closed->second.key)) {
    return "bad signature";
  }
  checked.gone.push_back(closed->first);
  closed_.erase(closed);  // once
  return nullptr;
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
    if (beat && beat->kind == HeartbeatKind::kAgentGone) {
      const char* refused = CheckAgentGone(*beat, datagrams[i], checked);
      if (refused != nullptr && checked.first_refusal == nullptr) {
        checked.first_refusal = refused;
      }
      continue;
    }
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

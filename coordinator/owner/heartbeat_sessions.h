// The heartbeats of registered agents' streams: when each is acknowledged
// (every lease / 3 the agent declared, the first at once) and, where UDP
// heartbeats are offered, each machine's datagram session: its id, its key
// and the last counter accepted. A datagram counts as its stream's heartbeat
// if it is a heartbeat of a known session, newer than the last, naming the
// session's machine and signed with its key; it is answered with a signed
// ack.
//
// Pure: the time comes in as an argument; it reads no clock, sends nothing
// and logs nothing (the core does, with what it returns). Streams are only
// keys here, never used. Not thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_HEARTBEAT_SESSIONS_H_
#define TRL_COORDINATOR_OWNER_HEARTBEAT_SESSIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/heartbeat_datagram.h"
#include "coordinator/job/records.h"
#include "coordinator/owner/agent_link.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class HeartbeatSessions {
 public:
  // Machines' streams opened from now on get a session on UDP `port`;
  // `random_bytes(n)` draws each one's session id and key.
  // With `hear_last_words`, an agent's last word ("agent gone") is heard:
  // only where the key came over TLS (in plaintext anyone on the path
  // could read it and say a live agent died).
  void OfferUdp(int port, std::function<std::string(size_t)> random_bytes,
                bool hear_last_words = true);

  // `stream` registered as `key` (a machine; a spare if negative), its
  // agent's lease `lease_ms`: its heartbeats are acknowledged every
  // lease / 3. A machine's stream is offered a UDP session in `reply` when
  // UDP is offered (a spare's heartbeats come on its stream: a datagram
  // names a machine).
  void Open(AgentLink* stream, int key, int lease_ms,
            trl::launch::v1::RegistrationReply* reply);
  // `stream` stands for another machine or spare now: its datagrams, which
  // name the old one, are no longer heard; its heartbeats go on the stream.
  void EndUdpSession(AgentLink* stream);
  // `stream` stands for `machine_rank` now (a spare if negative): its old
  // session ends and, for a machine, when UDP is offered, it gets a new
  // one in `change`, whose datagrams and last word name that machine. The
  // last word of the machine's lost agent is still heard (its guardian's
  // word lets the stand-in start sooner).
  void Rekey(AgentLink* stream, int machine_rank,
             trl::launch::v1::RoleChange* change);
  // `stream`, registered as `key`, is no longer: nothing of it is heard
  // any more but, if it was a machine's stream with a UDP session, its
  // agent's last word ("agent gone", heartbeat_datagram.h), until another
  // stream of that machine registers or is closed. Returns whether that
  // word came already, while the stream was open (it is acted on only
  // once the stream has ended: a datagram alone does not end a stream).
  bool Close(AgentLink* stream, int key);

  // A heartbeat came on `stream` at `now`: whether it gets an ack (the
  // first, then the first at least lease / 3 after the last ack).
  bool HeartbeatOnStream(AgentLink* stream, TimePoint now);

  // A datagram that counts as a heartbeat of `machine_rank`, and its ack.
  struct Accepted {
    size_t index;  // of the datagram
    int machine_rank;
    std::string ack;
  };
  struct Checked {
    std::vector<Accepted> accepted;  // in the datagrams' order
    // Machines whose agent is gone, as its guardian says for it, after
    // its stream ended.
    std::vector<int> gone;
    // Why the first refused datagram was refused; nullptr if none was.
    const char* first_refusal = nullptr;
  };
  Checked CheckDatagrams(const std::vector<std::string_view>& datagrams);

  // How `stream`'s heartbeats came last: "udp" or "stream", "" before the
  // first; nullptr for a stream not open.
  const char* Via(const AgentLink* stream) const;

 private:
  struct Stream {
    std::chrono::milliseconds ack_every{0};  // 0: every heartbeat
    TimePoint last_ack;
    // UDP heartbeats, if offered: 0 / empty otherwise.
    uint64_t udp_session = 0;
    int machine_rank = 0;  // that its datagrams must name
    std::unique_ptr<HeartbeatKey> udp_key;
    uint64_t udp_counter = 0;        // the last accepted
    const char* heartbeat_via = "";  // "udp" or "stream" once one came
    bool last_word_heard = false;    // while it was open
  };
  // Gives `stream` a UDP session and key for `machine_rank`, written by
  // `Message` (a RegistrationReply or a RoleChange: the same fields).
  template <typename Message>
  void OfferUdpSession(Stream& stream, int machine_rank, Message* message);

  // Whether `datagram`, an "agent gone", is the last word of `stream`'s
  // session: its machine's, signed with its key.
  static bool IsLastWordOf(const HeartbeatDatagram& gone,
                           std::string_view datagram, int machine_rank,
                           HeartbeatKey& key);
  // Checks one "agent gone" datagram; why it was refused, or nullptr.
  const char* CheckAgentGone(const HeartbeatDatagram& gone,
                             std::string_view datagram, Checked& checked);

  // The session of a machine's closed stream, whose last word may come.
  struct ClosedSession {
    uint64_t session = 0;
    std::unique_ptr<HeartbeatKey> key;
  };

  std::map<const AgentLink*, Stream> streams_;
  std::map<int, ClosedSession> closed_;  // by machine
  std::unordered_map<uint64_t, Stream*> by_udp_session_;
  int udp_port_ = 0;  // 0: UDP heartbeats not offered
  bool hear_last_words_ = true;
  std::function<std::string(size_t)> random_bytes_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_HEARTBEAT_SESSIONS_H_

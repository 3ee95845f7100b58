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
  void OfferUdp(int port, std::function<std::string(size_t)> random_bytes);

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
  // `stream` is no longer registered: nothing of it is heard any more.
  void Close(AgentLink* stream);

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
  };
  // Gives `stream` a UDP session and key, in `reply`.
  void OfferUdpSession(Stream& stream, int machine_rank,
                       trl::launch::v1::RegistrationReply* reply);

  std::map<const AgentLink*, Stream> streams_;
  std::unordered_map<uint64_t, Stream*> by_udp_session_;
  int udp_port_ = 0;  // 0: UDP heartbeats not offered
  std::function<std::string(size_t)> random_bytes_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_HEARTBEAT_SESSIONS_H_

// The coordinator core's table of agents (owner/core.h): who
// registers under which key (a machine, a spare), the streams re-keyed when
// a spare takes a machine's place or a cordoned machine's agent becomes a
// spare, and the heartbeat datagrams' sessions.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/heartbeat_datagram.h"
#include "common/logging.h"
#include "coordinator/owner/agent_input.h"
#include "coordinator/owner/core.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

}  // namespace

void CoordinatorCore::HandleRegistration(AgentLink* link,
                                         const pb::AgentRegistration& request) {
  if (registered_.count(link)) return;  // registers once per stream
  const AgentInfo info = AgentInfoFromRegistration(request);
  if (const auto& outcome = machine_.outcome(); outcome) {
    // The job ended while this agent was away (frozen, cut off, or its
    // coordinator frozen): it learns how, and leaves with the job's code,
    // instead of being refused as a stranger (nemesis, seed 1).
    TellOfEnd(link, *outcome);
    if (awaiting_farewell_.count(info.machine_rank)) {
      told_of_end_[link] = info.machine_rank;
    } else {
      link->Close();
    }
    return;
  }
  const bool rejoin = machine_.nodes().count(info.machine_rank) > 0;
  const absl::StatusOr<int> key = machine_.Admit(info, clock_());
  const absl::Status status = key.status();
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(status.ok());
  reply.mutable_registration_reply()->set_job_id(options_.job_id);
  if (!status.ok()) {
    Log()->warn("refused the agent at {} ({}, host {}): {}", link->Peer(),
                info.spare ? std::string("a spare")
                           : absl::StrCat("machine_rank ", info.machine_rank),
                info.hostname, std::string(status.message()));
    reply.mutable_registration_reply()->set_reason(
        std::string(status.message()));
    link->Send(reply);
    link->Close();
    return;
  }
  const bool spare = *key < 0;
  reply.mutable_registration_reply()->set_spare(spare);
  reply.mutable_registration_reply()->set_machine_rank(spare ? -1 : *key);
  // Acknowledge heartbeats every lease / 3: the agent's lease is kept with
  // two acks to spare, at half the messages of one ack per heartbeat.
  Registered& agent = registered_[link];
  agent.machine_rank = *key;
  agent.ack_every =
      std::chrono::milliseconds(std::max(0, request.lease_ms()) / 3);
  // A spare's heartbeats come on its stream (a datagram names a machine).
  if (udp_port_ > 0 && !spare) {
    OfferUdpSession(link, agent, reply.mutable_registration_reply());
  }
  for (const auto& arg : options_.worker_argv) {
    reply.mutable_registration_reply()->add_argv(arg);
  }
  reply.mutable_registration_reply()->set_argv_runs_python(
      options_.worker_argv_runs_python);
  link->Send(reply);
  const TimePoint now = clock_();
  if (spare) {
    const std::string was = info.spare
                                ? ""
                                : absl::StrCat(" (machine ", info.machine_rank,
                                               "'s place is taken by a spare)");
    Log()->info(
        "a spare registered: host {}, address {}, {} workers{}; {} "
        "spare(s)",
        info.hostname, info.advertise_addr, info.local_world_size, was,
        machine_.spares().size());
    Note("spare", -1,
         absl::StrCat("a spare registered: host ", info.hostname, ", address ",
                      info.advertise_addr, was));
    Execute(machine_.Tick(now));
    return;
  }
  Log()->info(
      "machine {} registered: host {}, address {} ({}), {} workers; "
      "{}/{} machines",
      info.machine_rank, info.hostname, info.advertise_addr,
      info.interface_name, info.local_world_size, machine_.nodes().size(),
      options_.config.num_machines);
  Note(rejoin ? "rejoined" : "registered", info.machine_rank,
       absl::StrCat("host ", info.hostname, ", address ", info.advertise_addr,
                    ", ", info.local_world_size, " workers"));
  const TimePoint old_may_run =
      machine_.nodes().at(info.machine_rank).old_agent_may_run_until;
  if (old_may_run > now) {
    Log()->warn(
        "machine {} is taken over by another agent (host {}, pid {}): its "
        "ranks are handed over in {:.1f} s, once the old agent's lease and "
        "stop grace have surely run out",
        info.machine_rank, info.hostname, info.agent_pid,
        std::chrono::duration<double>(old_may_run - now).count());
  }
  Execute(machine_.Tick(now));
}

void CoordinatorCore::ApplyHandovers(const std::vector<Handover>& handovers) {
  if (handovers.empty()) return;
  // Every stream is found by its key before any is changed: a swap moves
  // a spare to a machine and the machine's agent to a new spare key.
  std::vector<std::pair<AgentLink*, const Handover*>> moves;
  for (const Handover& handover : handovers) {
    for (auto& [link, agent] : registered_) {
      if (agent.machine_rank == handover.from) {
        moves.emplace_back(link, &handover);
        break;
      }
    }
  }
  for (auto& [link, handover] : moves) {
    Registered& agent = registered_.at(link);
    agent.machine_rank = handover->to;
    if (agent.udp_session != 0) {  // datagrams name the machine
      by_udp_session_.erase(agent.udp_session);
      agent.udp_session = 0;
    }
    pb::CoordinatorMessage role;
    role.mutable_role_change()->set_spare(handover->to < 0);
    role.mutable_role_change()->set_machine_rank(std::max(-1, handover->to));
    role.mutable_role_change()->set_reason(handover->reason);
    link->Send(role);
    Log()->warn("{}", handover->reason);
    Note(handover->to < 0 ? "spare_demoted" : "spare_promoted",
         std::max(handover->to, handover->from), handover->reason);
    if (on_registered_ && handover->to >= 0) on_registered_(handover->to, link);
  }
}

absl::Status CoordinatorCore::Uncordon(const std::string& hostname) {
  const absl::Status status = machine_.Uncordon(hostname);
  if (status.ok()) {
    Log()->info("host {} is uncordoned: it may be given ranks again", hostname);
    cordons_logged_.erase(hostname);
    Note("uncordoned", -1, absl::StrCat("host ", hostname, " is uncordoned"));
    if (!options_.state_file.empty() && !IsFinished(machine_.phase())) {
      PersistInBackground(RecordOf(machine_.generation()));
    }
    Execute(machine_.Tick(clock_()));
  }
  return status;
}

void CoordinatorCore::OfferUdpSession(AgentLink* link, Registered& agent,
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
  agent.udp_session = session;
  agent.udp_key = std::make_unique<HeartbeatKey>(key);
  by_udp_session_[session] = link;
  reply->set_heartbeat_udp_port(udp_port_);
  reply->set_heartbeat_session(session);
  reply->set_heartbeat_key(key);
}

std::map<AgentLink*, CoordinatorCore::Registered>::iterator
CoordinatorCore::Unregister(std::map<AgentLink*, Registered>::iterator it) {
  if (it->second.udp_session != 0)
    by_udp_session_.erase(it->second.udp_session);
  return registered_.erase(it);
}

void CoordinatorCore::OfferUdpHeartbeats(
    int port, std::function<std::string(size_t)> random_bytes) {
  udp_port_ = port;
  random_bytes_ = std::move(random_bytes);
}

std::vector<CoordinatorCore::DatagramReply>
CoordinatorCore::OnHeartbeatDatagrams(
    const std::vector<std::string_view>& datagrams) {
  std::vector<DatagramReply> replies;
  const TimePoint now = clock_();
  for (size_t i = 0; i < datagrams.size(); ++i) {
    const auto beat = ParseHeartbeat(datagrams[i]);
    const char* refused = nullptr;
    auto link =
        beat ? by_udp_session_.find(beat->session) : by_udp_session_.end();
    Registered* agent =
        link != by_udp_session_.end() ? &registered_.at(link->second) : nullptr;
    if (!beat || beat->kind != HeartbeatKind::kHeartbeat) {
      refused = "not a heartbeat";
    } else if (agent == nullptr) {
      refused = "no registered stream has its session";
    } else if (beat->counter <= agent->udp_counter) {
      // Before the MAC: a replayed datagram (captured on the network) is
      // refused without one, and a low counter is refused either way.
      refused = "replayed";
    } else if (static_cast<int64_t>(beat->machine_rank) !=
                   agent->machine_rank ||
               !HeartbeatSignedWith(datagrams[i], *agent->udp_key)) {
      refused = "bad signature";
    }
    if (refused != nullptr) {
      // Logged once: a flood of bad datagrams must not flood the log.
      if (!told_of_bad_datagram_) {
        Log()->warn(
            "dropped a heartbeat datagram ({}); later ones are "
            "dropped without a word",
            refused);
        told_of_bad_datagram_ = true;
      }
      continue;
    }
    agent->udp_counter = beat->counter;
    agent->heartbeat_via = "udp";
    machine_.Heartbeat(agent->machine_rank, now);
    HeartbeatDatagram ack = *beat;
    ack.kind = HeartbeatKind::kAck;
    replies.push_back({i, EncodeHeartbeat(ack, *agent->udp_key)});
  }
  return replies;
}

}  // namespace trl

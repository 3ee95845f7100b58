// The coordinator core's side of agents (owner/core.h): a registration
// admitted or refused (its stream entered in the AgentTable, its heartbeats
// in the HeartbeatSessions), the streams re-keyed when a spare takes a
// machine's place or a cordoned machine's agent becomes a spare, a host
// uncordoned, and heartbeat datagrams handed to the state machine.
// An agent that registers again before its old stream's end reached us
// ends that stream first.
#include "common/heartbeat_datagram.h"
#include "common/logging.h"
#include "coordinator/owner/agent_input.h"
#include "coordinator/owner/agent_messages.h"
#include "coordinator/owner/core.h"

namespace trl {

namespace pb = trl::launch::v1;

void CoordinatorCore::HandleRegistration(AgentLink* link,
                                         const pb::AgentRegistration& request) {
  if (agents_.KeyOf(link)) return;  // registers once per stream
  const AgentInfo info = AgentInfoFromRegistration(request, options_.run_id);
  if (const auto& outcome = machine_.outcome(); outcome) {
    // The job ended while this agent was away (frozen, cut off, or its
    // coordinator frozen): it learns how, and leaves with the job's code,
    // instead of being refused as a stranger (nemesis, seed 1).
    link->Send(JobEnded(*outcome));
    if (!farewells_.ToldOnReturn(link, info.machine_rank, info.spare)) {
      link->Close();
    }
    return;
  }
  if (EndStreamGivenUp(info)) {
    ComponentLogger("coord")->warn(
        "the agent of machine {} (host {}, pid {}) registered again before "
        "its old stream ended: that stream is ended now",
        info.machine_rank, info.hostname, info.agent_pid);
  }
  const bool rejoin = machine_.nodes().count(info.machine_rank) > 0;
  const absl::StatusOr<int> key = machine_.Admit(info, clock_());
  if (!key.ok()) {
    journal_.TellRefused(link->Peer(), info, key.status());
    link->Send(RefusedRegistration(options_.job_id, key.status()));
    link->Close();
    return;
  }
  pb::CoordinatorMessage reply = AcceptedRegistration(options_, *key);
  agents_.Register(link, *key);
  if (*key < 0) {
    // A spare (back, or new): one fewer cut off, as far as we can tell.
    spare_leases_[*key] = info.lease;
    if (info.spare && spares_cut_ > 0) --spares_cut_;
  }
  heartbeats_.Open(link, *key, request.lease_ms(),
                   reply.mutable_registration_reply());
  link->Send(reply);
  const TimePoint now = clock_();
  journal_.TellRegistered(info, /*spare=*/*key < 0, rejoin, now);
  if (!info.health_problem.empty()) {
    journal_.TellHealth(*key, info.hostname, info.health_problem);
  }
  Execute(machine_.Tick(now));
}

bool CoordinatorCore::EndStreamGivenUp(const AgentInfo& info) {
  const auto node = machine_.nodes().find(info.machine_rank);
  if (node == machine_.nodes().end() || !node->second.connected) return false;
  // A pid alone could be another host's, and 0 says nothing: both the host
  // and the process must be the ones that hold the machine.
  const AgentInfo& holder = node->second.info;
  if (info.agent_pid <= 0 || holder.agent_pid != info.agent_pid ||
      !node->second.SameHostAs(info)) {
    return false;
  }
  const std::vector<AgentLink*> old = agents_.StreamsOf(info.machine_rank);
  for (AgentLink* stream : old) {
    OnDisconnected(stream);  // idempotent when its real end comes
    stream->Close();
  }
  return !old.empty();
}

void CoordinatorCore::ApplyHandovers(const std::vector<Handover>& handovers) {
  if (handovers.empty()) return;
  for (const auto& [link, handover] : agents_.Rekey(handovers)) {
    // Datagrams name the machine: a new session for the one it stands for.
    pb::CoordinatorMessage role = RoleChange(*handover);
    heartbeats_.Rekey(link, handover->to, role.mutable_role_change());
    link->Send(role);
    journal_.TellHandover(*handover);
    if (on_registered_ && handover->to >= 0) on_registered_(handover->to, link);
  }
}

absl::Status CoordinatorCore::Uncordon(const std::string& hostname) {
  const absl::Status status = machine_.Uncordon(hostname);
  if (status.ok()) {
    journal_.TellUncordoned(hostname);
    record_.Keep(machine_);
    Execute(machine_.Tick(clock_()));
  }
  return status;
}

void CoordinatorCore::OfferUdpHeartbeats(
    int port, std::function<std::string(size_t)> random_bytes, bool encrypted) {
  heartbeats_.OfferUdp(port, std::move(random_bytes), encrypted);
}

std::vector<CoordinatorCore::DatagramReply>
CoordinatorCore::OnHeartbeatDatagrams(
    const std::vector<std::string_view>& datagrams) {
  HeartbeatSessions::Checked checked = heartbeats_.CheckDatagrams(datagrams);
  if (checked.first_refusal != nullptr) {
    journal_.TellDroppedDatagram(checked.first_refusal);
  }
  std::vector<DatagramReply> replies;
  replies.reserve(checked.accepted.size());
  const TimePoint now = clock_();
  for (auto& accepted : checked.accepted) {
    machine_.Heartbeat(accepted.machine_rank, now);
    replies.push_back({accepted.index, std::move(accepted.ack)});
  }
  for (int m : checked.gone) OnAgentGone(m);
  return replies;
}

void CoordinatorCore::OnAgentGone(int m) {
  if (IsFinished(machine_.phase())) return;
  ComponentLogger("coord")->warn(
      "machine {}'s agent died and every worker it started has ended, its "
      "guardian says: its ranks may run elsewhere now",
      m);
  journal_.TellAgentGone(m);
  machine_.LostAgentGone(m, clock_());
  Execute(machine_.Tick(clock_()));
}

void CoordinatorCore::ApplyLastWords() {
  std::vector<int> heard;
  heard.swap(last_words_heard_);
  for (int m : heard) OnAgentGone(m);
}

}  // namespace trl

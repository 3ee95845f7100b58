// The coordinator core's side of agents (owner/core.h): a registration
// admitted or refused (its stream entered in the AgentTable, its heartbeats
// in the HeartbeatSessions), the streams re-keyed when a spare takes a
// machine's place or a cordoned machine's agent becomes a spare, a host
// uncordoned, and heartbeat datagrams handed to the state machine.
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
  if (agents_.KeyOf(link)) return;  // registers once per stream
  const AgentInfo info = AgentInfoFromRegistration(request);
  if (const auto& outcome = machine_.outcome(); outcome) {
    // The job ended while this agent was away (frozen, cut off, or its
    // coordinator frozen): it learns how, and leaves with the job's code,
    // instead of being refused as a stranger (nemesis, seed 1).
    TellOfEnd(link, *outcome);
    if (!farewells_.ToldOnReturn(link, info.machine_rank)) link->Close();
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
  agents_.Register(link, *key);
  heartbeats_.Open(link, *key, request.lease_ms(),
                   reply.mutable_registration_reply());
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
    journal_.Note("spare", -1,
                  absl::StrCat("a spare registered: host ", info.hostname,
                               ", address ", info.advertise_addr, was));
    Execute(machine_.Tick(now));
    return;
  }
  Log()->info(
      "machine {} registered: host {}, address {} ({}), {} workers; "
      "{}/{} machines",
      info.machine_rank, info.hostname, info.advertise_addr,
      info.interface_name, info.local_world_size, machine_.nodes().size(),
      options_.config.num_machines);
  journal_.Note(
      rejoin ? "rejoined" : "registered", info.machine_rank,
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
  for (const auto& [link, handover] : agents_.Rekey(handovers)) {
    heartbeats_.EndUdpSession(link);  // datagrams name the machine
    pb::CoordinatorMessage role;
    role.mutable_role_change()->set_spare(handover->to < 0);
    role.mutable_role_change()->set_machine_rank(std::max(-1, handover->to));
    role.mutable_role_change()->set_reason(handover->reason);
    link->Send(role);
    Log()->warn("{}", handover->reason);
    journal_.Note(handover->to < 0 ? "spare_demoted" : "spare_promoted",
                  std::max(handover->to, handover->from), handover->reason);
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
    int port, std::function<std::string(size_t)> random_bytes) {
  heartbeats_.OfferUdp(port, std::move(random_bytes));
}

std::vector<CoordinatorCore::DatagramReply>
CoordinatorCore::OnHeartbeatDatagrams(
    const std::vector<std::string_view>& datagrams) {
  HeartbeatSessions::Checked checked = heartbeats_.CheckDatagrams(datagrams);
  // Logged once: a flood of bad datagrams must not flood the log.
  if (checked.first_refusal != nullptr && !told_of_bad_datagram_) {
    Log()->warn(
        "dropped a heartbeat datagram ({}); later ones are "
        "dropped without a word",
        checked.first_refusal);
    told_of_bad_datagram_ = true;
  }
  std::vector<DatagramReply> replies;
  replies.reserve(checked.accepted.size());
  const TimePoint now = clock_();
  for (auto& accepted : checked.accepted) {
    machine_.Heartbeat(accepted.machine_rank, now);
    replies.push_back({accepted.index, std::move(accepted.ack)});
  }
  return replies;
}

}  // namespace trl

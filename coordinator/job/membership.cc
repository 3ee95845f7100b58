#include "coordinator/job/membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rank_layout.h"

namespace trl {

JobMembership::JobMembership(JobSettings settings, TimePoint created_at)
    : settings_(std::move(settings)),
      created_at_(created_at),
      spares_(settings_.MaxSpares()),
      cordons_(settings_.cordon_after, settings_.cordon_window),
      elastic_(settings_) {}

void JobMembership::Resume(
    std::map<int, HostIdentity> previous_hosts,
    std::map<int, std::chrono::milliseconds> previous_run_on) {
  resumed_ = true;
  previous_hosts_ = std::move(previous_hosts);
  previous_run_on_ = std::move(previous_run_on);
}

std::chrono::milliseconds JobMembership::PreviousRunOn(
    int m, const AgentInfo& newcomer) const {
  // The old agent's own lease and fence (I1), not the newcomer's; a state
  // file of an older coordinator does not say them: the newcomer's lease
  // with the stop grace, as before.
  auto kept = previous_run_on_.find(m);
  if (kept != previous_run_on_.end()) return kept->second;
  return newcomer.lease + settings_.stop_grace + std::chrono::seconds(2);
}

absl::Status JobMembership::Register(const AgentInfo& agent, JobPhase phase,
                                     TimePoint now) {
  const int m = agent.machine_rank;
  if (m < 0 || m >= settings_.num_machines) {
    return absl::InvalidArgumentError(absl::StrCat(
        "machine_rank ", m, " is out of range: this job has num_machines ",
        settings_.num_machines, " (machine ranks 0..",
        settings_.num_machines - 1, ")"));
  }
  const NodeRecord* existing = machines_.Find(m);
  if (existing != nullptr && existing->connected) {
    return absl::AlreadyExistsError(absl::StrCat(
        "machine_rank ", m, " is already registered by host ",
        existing->info.hostname, " (", existing->info.advertise_addr, ")"));
  }
  if (absl::Status ok = CheckAgentFitsJob(agent, settings_); !ok.ok()) {
    return ok;
  }
  const bool rejoin = existing != nullptr;
  // An elastic job takes a new machine while a generation runs: into the
  // next one.
  if (IsFinished(phase) || (!rejoin && !settings_.Elastic() &&
                            phase != JobPhase::kWaitingForAgents)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is ", JobPhaseName(phase), " and takes no new agents"));
  }
  if (rejoin && agent.local_world_size != existing->info.local_world_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("machine ", m, " rejoins with ", agent.local_world_size,
                     " workers but had ", existing->info.local_world_size));
  }
  NodeRecord node;
  node.info = agent;
  node.last_heartbeat = now;
  node.command_checked = !agent.checks_command;
  if (rejoin) {
    // Its ranks stay where they are until the next generation assigns
    // them again (a report of their exits refers to them).
    node.rank_offset = existing->rank_offset;
    node.group_rank = existing->group_rank;
    // An agent on the host that was lost may have the machine's ranks at
    // once: the one that was lost stopped its workers before it
    // reconnected, and a new one killed what an earlier one left there
    // before it registered (agent/cleanup/stale_workers.h). An agent on another
    // host only once the old one's workers have surely stopped (I1: one
    // generation of a rank at a time), even if it is frozen or cut off.
    // What agents on other hosts (an earlier holder the last one took
    // over from) may still run is waited for either way.
    node.others_may_run_until = existing->SameHostAs(agent)
                                    ? existing->others_may_run_until
                                    : existing->old_agent_may_run_until;
    node.old_agent_may_run_until = node.others_may_run_until;
  } else if (resumed_) {
    // The old coordinator's agent of this machine heard from it last
    // before we started: its lease ends before then + lease.
    auto previous = previous_hosts_.find(m);
    if (previous == previous_hosts_.end() ||
        !previous->second.SameHostAs(agent.host())) {
      node.old_agent_may_run_until = created_at_ + PreviousRunOn(m, agent);
      node.others_may_run_until = node.old_agent_may_run_until;
    }
  }
  // None of it is this agent's: a word that an agent is gone never
  // shortens it.
  node.run_on_before_loss = node.old_agent_may_run_until;
  const bool member = node.group_rank >= 0;
  machines_.Add(m, std::move(node));
  UpdateHostHealth(agent.hostname, agent.health_problem);
  if (!member && phase == JobPhase::kRunning) elastic_.Joined(m);
  if (!first_registration_at_) first_registration_at_ = now;
  return absl::OkStatus();
}

absl::StatusOr<int> JobMembership::Admit(const AgentInfo& agent, JobPhase phase,
                                         TimePoint now) {
  const int m = agent.machine_rank;
  const bool in_range = m >= 0 && m < settings_.num_machines;
  const NodeRecord* existing = in_range ? machines_.Find(m) : nullptr;
  const bool taken = existing != nullptr && existing->connected;
  if (agent.spare) {
    if (IsFinished(phase)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the job is ", JobPhaseName(phase), " and takes no new agents"));
    }
    if (absl::Status ok = CheckAgentFitsJob(agent, settings_); !ok.ok()) {
      return ok;
    }
    // A spare that stood for a machine before its connection was lost
    // takes it back if it is still vacant, or not registered yet (a
    // restarted coordinator).
    // (An awaited machine too: the stand-in that ran it brings the report.)
    const bool vacant = existing != nullptr
                            ? !taken && machines_.vacant().count(m) > 0
                            : in_range && phase == JobPhase::kWaitingForAgents;
    if (vacant) {
      AgentInfo machine = agent;
      machine.spare = false;
      if (absl::Status ok = Register(machine, phase, now); !ok.ok()) return ok;
      machines_.at(m).from_spare = true;
      return m;
    }
    return AdmitSpare(agent, now);
  }
  // A machine's own agent back while a spare holds its place: a spare now.
  if (taken && existing->from_spare && !IsFinished(phase)) {
    if (absl::Status ok = CheckAgentFitsJob(agent, settings_); !ok.ok()) {
      return ok;
    }
    return AdmitSpare(agent, now);
  }
  if (absl::Status ok = Register(agent, phase, now); !ok.ok()) return ok;
  return m;
}

absl::StatusOr<int> JobMembership::AdmitSpare(const AgentInfo& agent,
                                              TimePoint now) {
  absl::StatusOr<int> key = spares_.Admit(agent, now);
  if (key.ok()) UpdateHostHealth(agent.hostname, agent.health_problem);
  return key;
}

bool JobMembership::HealthReported(int key, const std::string& problem) {
  AgentInfo* info = nullptr;
  if (SpareRecord* spare = spares_.Find(key)) {
    info = &spare->info;
  } else if (NodeRecord* node = machines_.Find(key);
             node != nullptr && node->connected) {
    info = &node->info;
  }
  if (info == nullptr || info->health_problem == problem) return false;
  info->health_problem = problem;
  UpdateHostHealth(info->hostname, problem);
  return true;
}

void JobMembership::RecheckHostHealth(const std::string& host) {
  if (!cordons_.Unhealthy(host)) return;
  bool anyone = false;
  for (const auto& [m, node] : machines_.all()) {
    if (!node.connected || node.info.hostname != host) continue;
    if (!node.info.health_problem.empty()) return;  // still unhealthy
    anyone = true;
  }
  for (const auto& [key, spare] : spares_.all()) {
    if (spare.info.hostname != host) continue;
    if (!spare.info.health_problem.empty()) return;
    anyone = true;
  }
  if (anyone) cordons_.SetHealth(host, "");
}

void JobMembership::UpdateHostHealth(const std::string& host,
                                     const std::string& problem) {
  if (host.empty()) return;
  if (!problem.empty() || !cordons_.Unhealthy(host)) {
    cordons_.SetHealth(host, problem);
    return;
  }
  // Healthy: unless another agent of the host is not.
  for (const auto& [m, node] : machines_.all()) {
    if (node.connected && node.info.hostname == host &&
        !node.info.health_problem.empty()) {
      cordons_.SetHealth(host, node.info.health_problem);
      return;
    }
  }
  for (const auto& [key, spare] : spares_.all()) {
    if (spare.info.hostname == host && !spare.info.health_problem.empty()) {
      cordons_.SetHealth(host, spare.info.health_problem);
      return;
    }
  }
  cordons_.SetHealth(host, "");
}

int JobMembership::CountReady() const {
  int ready = machines_.CountReady();
  if (!cordons_.AnyUnhealthy()) return ready;
  for (const auto& [m, node] : machines_.all()) {
    if (MachineTable::IsReady(node) && cordons_.Unhealthy(node.info.hostname)) {
      --ready;
    }
  }
  return ready;
}

void JobMembership::Heard(int key, TimePoint now) {
  if (key < 0) {
    spares_.Heard(key, now);
  } else {
    machines_.Heard(key, now);
  }
}

void JobMembership::ExcuseStall(std::chrono::steady_clock::duration late,
                                TimePoint now) {
  machines_.ExcuseStall(late, now);
  spares_.ExcuseStall(late, now);
}

std::optional<std::string> JobMembership::StartRescale(int64_t generation,
                                                       TimePoint now) {
  const std::optional<int> m =
      elastic_.JoinerToTakeIn(machines_, cordons_, now);
  if (!m) return std::nullopt;
  elastic_.StartRescale();
  return absl::StrCat("machine ", *m, " (host ", machines_.at(*m).info.hostname,
                      ") joined: generation ", generation,
                      " stops to take it in (--rescale_on_join)");
}

FailureRecord JobMembership::RankFailure(int64_t generation,
                                         const RankRecord& rank) const {
  FailureRecord failure = MachineFailure(generation, rank.machine_rank, "");
  failure.rank = rank.rank;
  failure.exit = rank.exit;
  failure.reason =
      absl::StrCat("rank ", rank.rank, " (local rank ", rank.local_rank,
                   " on machine ", rank.machine_rank, ", host ",
                   failure.hostname, ") ", rank.exit.Describe());
  // Which interpreter ran matters most when it was the wrong one (the
  // system's python3 where a virtual environment was meant): a start
  // error names it already, and an agent's own reason is about a hang.
  if (!rank.exit.executable.empty() && rank.exit.start_error.empty() &&
      rank.exit.reason.empty()) {
    absl::StrAppend(&failure.reason, " (program ", rank.exit.executable, ")");
  }
  return failure;
}

FailureRecord JobMembership::MachineFailure(int64_t generation, int m,
                                            std::string why) const {
  FailureRecord failure;
  failure.generation = generation;
  failure.machine_rank = m;
  failure.hostname = machines_.at(m).info.hostname;
  failure.reason = std::move(why);
  return failure;
}

std::optional<std::string> JobMembership::CommandChecked(
    int key, const std::string& problem, JobPhase phase) {
  if (SpareRecord* spare = spares_.Find(key)) {
    // A spare that cannot run the command takes no place; the job goes on.
    spare->command_checked = true;
    spare->unusable = problem;
    return std::nullopt;
  }
  NodeRecord* node = machines_.Find(key);
  if (node == nullptr || IsFinished(phase)) return std::nullopt;
  if (problem.empty()) {
    node->command_checked = true;
    return std::nullopt;
  }
  return absl::StrCat("machine ", key, " (host ", node->info.hostname,
                      ") cannot run the command: ", problem);
}

const NodeRecord* JobMembership::Lose(int m, const std::string& why,
                                      JobPhase phase, TimePoint now) {
  if (m < 0) {
    const SpareRecord* spare = spares_.Find(m);
    const std::string host =
        spare != nullptr && !spare->info.health_problem.empty()
            ? spare->info.hostname
            : "";
    spares_.Erase(m);  // a spare leaves nothing behind
    if (!host.empty()) RecheckHostHealth(host);
    return nullptr;
  }
  NodeRecord* node = machines_.Find(m);
  if (node == nullptr || !node->connected) return nullptr;
  elastic_.Left(m);
  if (phase == JobPhase::kWaitingForAgents) {
    machines_.Erase(m);  // It may register again.
    return nullptr;
  }
  machines_.Disconnect(m, /*vacant=*/true);
  node->lost_reason = why;
  if (!node->info.health_problem.empty())
    RecheckHostHealth(node->info.hostname);
  // It heard from us at the latest now: its lease ends before now + lease,
  // and its workers are gone its fence after that (AgentInfo::RunOn).
  // (An elastic job's machine outside the generation ran none of its
  // workers: nothing to wait for.)
  node->run_on_before_loss = node->old_agent_may_run_until;
  if (!settings_.Elastic() || node->group_rank >= 0) {
    machines_.OldAgentMayRunUntil(m,
                                  now + node->info.RunOn(settings_.stop_grace));
  }
  return node;
}

void JobMembership::LostAgentGone(int m, TimePoint now) {
  const NodeRecord* node = machines_.Find(m);
  if (node == nullptr) return;
  // What the agents before it may run is not the guardian's to say.
  machines_.OldAgentRanUntil(m, std::max(node->run_on_before_loss, now));
}

bool JobMembership::ReadyToStart(JobPhase phase, TimePoint now) const {
  if (settings_.Elastic()) {
    // I1: a machine lost from the last generation may still run its
    // workers (cut off, not dead) until its lease and stop grace are over;
    // the next generation, with it or without, starts after that. (A
    // machine back on its host has stopped them: it waits for nothing.)
    if (now < machines_.ReplacementsAllowedAt()) return false;
    return elastic_.ReadyToStart(CountReady(), phase == JobPhase::kRestarting,
                                 now);
  }
  if (machines_.size() != settings_.num_machines ||
      machines_.connected() != settings_.num_machines ||
      !machines_.AllCommandsChecked(settings_.num_machines)) {
    return false;
  }
  // An unhealthy machine gets no ranks: a spare takes its place (Tick
  // swaps them before it asks), or the job waits until it is healthy.
  if (cordons_.AnyUnhealthy()) {
    for (const auto& [m, node] : machines_.all()) {
      if (cordons_.Unhealthy(node.info.hostname)) return false;
    }
  }
  return now >= machines_.ReplacementsAllowedAt();
}

GenerationStart JobMembership::Place() {
  // The members: every machine of a fixed-size job (ReadyToStart waited
  // for all); those ready of an elastic one. In machine_rank order, so
  // ranks stay contiguous per machine and keyed by machine_rank.
  const std::vector<int> members = elastic_.NextMembers(machines_, cordons_);
  std::vector<int> local_world_sizes;
  for (const auto& [m, node] : machines_.all()) machines_.at(m).group_rank = -1;
  GenerationStart start;
  for (int m : members) {
    NodeRecord& node = machines_.at(m);
    node.group_rank = static_cast<int>(local_world_sizes.size());
    local_world_sizes.push_back(node.info.local_world_size);
    if (Cordoned(node)) start.cordoned_members.push_back(m);
  }
  const RankLayout layout = ComputeRankLayout(local_world_sizes);
  elastic_.NewGeneration();
  start.world_size = layout.world_size;
  start.num_machines = static_cast<int>(members.size());
  start.master_addr =
      members.empty() ? "" : machines_.at(members[0]).info.advertise_addr;
  int index = 0;
  for (int m : members) {
    NodeRecord& node = machines_.at(m);
    node.rank_offset = layout.rank_offsets[index++];
    start.nodes.push_back(
        {m, node.rank_offset, node.info.local_world_size, node.group_rank});
  }
  return start;
}

std::string JobMembership::NextMasterAddr() const {
  const std::vector<int> members = elastic_.NextMembers(machines_, cordons_);
  return members.empty() ? "" : machines_.at(members[0]).info.advertise_addr;
}

}  // namespace trl

#include "coordinator/job/state_machine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/rank_layout.h"

namespace trl {

JobStateMachine::JobStateMachine(JobSettings settings, TimePoint now)
    : settings_(std::move(settings)),
      created_at_(now),
      budget_(settings_.restart),
      elastic_(settings_),
      spares_(settings_.MaxSpares()),
      cordons_(settings_.cordon_after, settings_.cordon_window) {}

absl::Status JobStateMachine::Register(const AgentInfo& agent, TimePoint now) {
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
  if (IsFinished(phase_) || (!rejoin && !settings_.Elastic() &&
                             phase_ != JobPhase::kWaitingForAgents)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is ", JobPhaseName(phase_), " and takes no new agents"));
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
    // before it registered (agent/stale_workers.h). An agent on another
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
      node.old_agent_may_run_until = created_at_ + agent.lease +
                                     settings_.stop_grace +
                                     std::chrono::seconds(2);
      node.others_may_run_until = node.old_agent_may_run_until;
    }
  }
  const bool member = node.group_rank >= 0;
  machines_.Add(m, std::move(node));
  if (!member && phase_ == JobPhase::kRunning) elastic_.Joined(m);
  if (!first_registration_at_) first_registration_at_ = now;
  return absl::OkStatus();
}

void JobStateMachine::ResumeAfter(int64_t generation, int restarts_used,
                                  std::vector<FailureRecord> failures,
                                  TimePoint not_before,
                                  std::map<int, HostIdentity> previous_hosts) {
  if (phase_ != JobPhase::kWaitingForAgents || generation_ >= 0) return;
  resumed_ = true;
  previous_hosts_ = std::move(previous_hosts);
  generation_ = generation;
  budget_.Resume(restarts_used, not_before);
  failures_ = std::move(failures);
}

void JobStateMachine::Heartbeat(int machine_rank, TimePoint now) {
  if (machine_rank < 0) {
    spares_.Heard(machine_rank, now);
    return;
  }
  machines_.Heard(machine_rank, now);
}

bool JobStateMachine::ReadyToStart(TimePoint now) const {
  if (phase_ != JobPhase::kWaitingForAgents &&
      phase_ != JobPhase::kRestarting) {
    return false;
  }
  // A backoff holds also for a resumed job (kWaitingForAgents).
  if (now < budget_.not_before()) return false;
  if (settings_.Elastic()) {
    // I1: a machine lost from the last generation may still run its
    // workers (cut off, not dead) until its lease and stop grace are over;
    // the next generation, with it or without, starts after that. (A
    // machine back on its host has stopped them: it waits for nothing.)
    if (now < machines_.ReplacementsAllowedAt()) return false;
    return elastic_.ReadyToStart(machines_.CountReady(),
                                 phase_ == JobPhase::kRestarting, now);
  }
  if (machines_.size() != settings_.num_machines ||
      machines_.connected() != settings_.num_machines ||
      !machines_.AllCommandsChecked(settings_.num_machines)) {
    return false;
  }
  return now >= machines_.ReplacementsAllowedAt();
}

void JobStateMachine::ExcuseOwnStall(TimePoint now) {
  const auto interval = settings_.tick_interval;
  const std::optional<TimePoint> last = last_tick_;
  last_tick_ = std::max(now, last.value_or(now));
  if (interval.count() <= 0 || !last || now <= *last) return;
  // Late by more than a tick (or 250 ms, for a loaded machine): stalled.
  const auto slack = std::max<std::chrono::steady_clock::duration>(
      interval, std::chrono::milliseconds(250));
  const auto late = (now - *last) - interval;
  if (late <= slack) return;
  machines_.ExcuseStall(late, now);
  spares_.ExcuseStall(late, now);
  stalls_excused_ += late;
}

Decision JobStateMachine::Tick(TimePoint now) {
  Decision decision;
  if (IsFinished(phase_)) return decision;
  ExcuseOwnStall(now);
  const auto timeout = settings_.agent_heartbeat_timeout;
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents) {
    // Marked lost together, then judged together: machines cut off at
    // once after the others' ranks exited 0 are all awaited.
    std::vector<std::pair<int, int>> lost;
    for (int m : machines_.SilentFor(timeout, now)) {
      const double seconds =
          std::chrono::duration<double>(now - machines_.at(m).last_heartbeat)
              .count();
      lost.emplace_back(
          m,
          MarkLost(m, absl::StrFormat("sent no heartbeat for %.1f s", seconds),
                   now));
      decision.drop_agents.push_back(m);
    }
    if (!lost.empty()) {
      Decision judged = AfterLosses(lost, now);
      if (judged.stop_generation)
        decision.stop_generation = judged.stop_generation;
      if (judged.finished) decision.finished = judged.finished;
    }
    if (IsFinished(phase_)) return decision;
  }
  DropSilentSpares(decision, now);
  FillFromSpares(decision, now);
  CheckRegistrationTimeout(decision, now);
  if (IsFinished(phase_)) return decision;
  CheckRejoinTimeout(decision, now);
  if (IsFinished(phase_)) return decision;
  if (!awaiting_reports_.empty()) {
    Decision settled = SettleAwaitedReport(now);
    if (settled.stop_generation)
      decision.stop_generation = settled.stop_generation;
    if (settled.finished) {
      decision.finished = settled.finished;
      return decision;
    }
  }
  if (settings_.Elastic()) {
    if (phase_ == JobPhase::kWaitingForAgents) {
      elastic_.UpdateHold(machines_.CountReady(), now);
    }
    Decision rescale = MaybeRescale(now);
    if (rescale.stop_generation) {
      decision.stop_generation = rescale.stop_generation;
    }
  }
  decision.start_generation = ReadyToStart(now);
  return decision;
}

void JobStateMachine::CheckRegistrationTimeout(Decision& decision,
                                               TimePoint now) {
  if (phase_ != JobPhase::kWaitingForAgents ||
      now - created_at_ <= settings_.registration_timeout) {
    return;
  }
  std::vector<std::string> missing;
  for (int m = 0; m < settings_.num_machines; ++m) {
    if (!machines_.contains(m)) missing.push_back(std::to_string(m));
  }
  // An elastic job needs only MIN of them.
  if (missing.empty() || machines_.size() >= settings_.MinMachines()) return;
  const std::string why = absl::StrCat(
      "machine(s) ", absl::StrJoin(missing, ", "), " did not register within ",
      settings_.registration_timeout.count() / 1000.0, " s",
      settings_.Elastic() ? absl::StrCat(" (the job needs at least ",
                                         settings_.MinMachines(), ")")
                          : "");
  FailureRecord failure;
  failure.reason = why;
  failures_.push_back(failure);
  Finish(JobOutcome{JobPhase::kFailed, 1, why}, decision);
}

void JobStateMachine::CheckRejoinTimeout(Decision& decision, TimePoint now) {
  // An elastic job goes on without lost machines while MIN are ready.
  if (phase_ != JobPhase::kRestarting || now <= rejoin_deadline_ ||
      (settings_.Elastic() &&
       machines_.CountReady() >= settings_.MinMachines())) {
    return;
  }
  for (const auto& [m, node] : machines_.all()) {
    if (node.connected) continue;
    const std::string why = absl::StrCat(
        "machine ", m, " (host ", node.info.hostname, ") ", node.lost_reason,
        " and did not rejoin within ",
        settings_.rejoin_timeout.count() / 1000.0, " s",
        settings_.Elastic()
            ? absl::StrCat(" (", machines_.CountReady(),
                           " machines left; the job needs at least ",
                           settings_.MinMachines(), ")")
            : "");
    FailureRecord failure;
    failure.generation = generation_;
    failure.machine_rank = m;
    failure.hostname = node.info.hostname;
    failure.reason = why;
    failures_.push_back(failure);
    Finish(JobOutcome{JobPhase::kFailed, 1, why}, decision);
    return;
  }
}

std::optional<TimePoint> JobStateMachine::NextDeadline(TimePoint now) const {
  // Only what is still ahead: a deadline that has passed without changing
  // anything (a backoff that ended while a machine is still away) would
  // have the edge tick in a loop.
  std::optional<TimePoint> next;
  auto consider = [&](TimePoint at) {
    if (at > now && (!next || at < *next)) next = at;
  };
  // Tick acts once `now` is past these, so each is due just past it.
  constexpr auto kPast = std::chrono::microseconds(1);
  if (phase_ == JobPhase::kWaitingForAgents) {
    consider(created_at_ + settings_.registration_timeout + kPast);
    if (elastic_.hold_until()) consider(*elastic_.hold_until());
    consider(budget_.not_before());               // a resumed job's backoff
    consider(machines_.ReplacementsAllowedAt());  // ... its old agents' leases
  }
  if (!awaiting_reports_.empty()) consider(report_deadline_ + kPast);
  if (phase_ == JobPhase::kRestarting) {
    consider(budget_.not_before());
    consider(rejoin_deadline_ + kPast);
    consider(machines_.ReplacementsAllowedAt());
  }
  const auto timeout = settings_.agent_heartbeat_timeout;
  const std::optional<TimePoint> earliest = machines_.EarliestHeartbeat();
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents &&
      !IsFinished(phase_) && earliest) {
    consider(*earliest + timeout + kPast);  // silence of the timeout is OK
  }
  if (timeout.count() > 0 && !IsFinished(phase_)) {
    for (const auto& [key, spare] : spares_.all()) {
      consider(spare.last_heartbeat + timeout + kPast);
    }
  }
  return next;
}

std::string JobStateMachine::NextMasterAddr() const {
  const std::vector<int> members = elastic_.NextMembers(machines_, cordons_);
  return members.empty() ? "" : machines_.at(members[0]).info.advertise_addr;
}

GenerationStart JobStateMachine::StartGeneration(TimePoint now) {
  // The members: every machine of a fixed-size job (ReadyToStart waited
  // for all); those ready of an elastic one. In machine_rank order, so
  // ranks stay contiguous per machine and keyed by machine_rank.
  members_ = elastic_.NextMembers(machines_, cordons_);
  std::vector<int> local_world_sizes;
  for (const auto& [m, node] : machines_.all()) machines_.at(m).group_rank = -1;
  GenerationStart start;
  for (int m : members_) {
    NodeRecord& node = machines_.at(m);
    node.group_rank = static_cast<int>(local_world_sizes.size());
    local_world_sizes.push_back(node.info.local_world_size);
    if (Cordoned(node)) start.cordoned_members.push_back(m);
  }
  const RankLayout layout = ComputeRankLayout(local_world_sizes);
  elastic_.NewGeneration();
  ++generation_;
  phase_ = JobPhase::kRunning;
  pending_outcome_.reset();
  start.generation = generation_;
  start.world_size = layout.world_size;
  start.num_machines = static_cast<int>(members_.size());
  start.master_addr =
      members_.empty() ? "" : machines_.at(members_[0]).info.advertise_addr;
  int index = 0;
  for (int m : members_) {
    NodeRecord& node = machines_.at(m);
    node.rank_offset = layout.rank_offsets[index++];
    start.nodes.push_back(
        {m, node.rank_offset, node.info.local_world_size, node.group_rank});
  }
  ranks_.Assign(start.nodes);
  timeline_.Assigned(generation_, now);
  return start;
}

RankRecord* JobStateMachine::FindRank(int machine_rank, int64_t generation,
                                      int local_rank) {
  // Fencing: events of any other generation are ignored.
  if (generation != generation_) return nullptr;
  const NodeRecord* node = machines_.Find(machine_rank);
  if (node == nullptr) return nullptr;
  return ranks_.Find(machine_rank, node->rank_offset,
                     node->info.local_world_size, local_rank);
}

void JobStateMachine::WorkerStarted(int machine_rank, int64_t generation,
                                    int local_rank, int pid, TimePoint now) {
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr || rank->state != RankState::kPending) return;
  // Every rank of the generation started: whatever shortage there was has
  // passed, and the free restarts count from zero again.
  if (ranks_.Started(*rank, pid)) {
    budget_.GenerationStarted();
    timeline_.Running(generation_, now);
  }
}

}  // namespace trl

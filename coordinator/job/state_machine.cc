#include "coordinator/job/state_machine.h"

#include <string.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/rank_layout.h"

namespace trl {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kWaitingForAgents:
      return "waiting_for_agents";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kStopping:
      return "stopping";
    case JobPhase::kRestarting:
      return "restarting";
    case JobPhase::kSucceeded:
      return "succeeded";
    case JobPhase::kFailed:
      return "failed";
    case JobPhase::kStopped:
      return "stopped";
  }
  return "unknown";
}

bool IsFinished(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed ||
         phase == JobPhase::kStopped;
}

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kPending:
      return "pending";
    case RankState::kRunning:
      return "running";
    case RankState::kSucceeded:
      return "succeeded";
    case RankState::kFailed:
      return "failed";
    case RankState::kStopped:
      return "stopped";
    case RankState::kLost:
      return "lost";
  }
  return "unknown";
}

std::string WorkerExit::Describe() const {
  if (!start_error.empty())
    return absl::StrCat("could not start: ", start_error);
  if (!reason.empty()) return reason;
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return absl::StrCat("was killed by signal ", signal,
                        name ? absl::StrCat(" (SIG", name, ")") : "");
  }
  return absl::StrCat("exited with code ", exit_code);
}

int WorkerExit::LauncherExitCode() const {
  if (!start_error.empty()) return 127;
  if (signal != 0) return 128 + signal;
  return exit_code;
}

JobStateMachine::JobStateMachine(JobSettings settings, TimePoint now)
    : settings_(std::move(settings)),
      created_at_(now),
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
  auto existing = nodes_.find(m);
  if (existing != nodes_.end() && existing->second.connected) {
    return absl::AlreadyExistsError(
        absl::StrCat("machine_rank ", m, " is already registered by host ",
                     existing->second.info.hostname, " (",
                     existing->second.info.advertise_addr, ")"));
  }
  if (absl::Status ok = CheckAgent(agent); !ok.ok()) return ok;
  const bool rejoin = existing != nodes_.end();
  // An elastic job takes a new machine while a generation runs: into the
  // next one.
  if (IsFinished(phase_) || (!rejoin && !settings_.Elastic() &&
                             phase_ != JobPhase::kWaitingForAgents)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is ", JobPhaseName(phase_), " and takes no new agents"));
  }
  if (rejoin &&
      agent.local_world_size != existing->second.info.local_world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "machine ", m, " rejoins with ", agent.local_world_size,
        " workers but had ", existing->second.info.local_world_size));
  }
  NodeRecord node;
  node.info = agent;
  node.last_heartbeat = now;
  node.command_checked = !agent.checks_command;
  if (rejoin) {
    // Its ranks stay where they are until the next generation assigns
    // them again (a report of their exits refers to them).
    node.rank_offset = existing->second.rank_offset;
    node.group_rank = existing->second.group_rank;
    // An agent on the host that was lost may have the machine's ranks at
    // once: the one that was lost stopped its workers before it
    // reconnected, and a new one killed what an earlier one left there
    // before it registered (agent/stale_workers.h). An agent on another
    // host only once the old one's workers have surely stopped (I1: one
    // generation of a rank at a time), even if it is frozen or cut off.
    // What agents on other hosts (an earlier holder the last one took
    // over from) may still run is waited for either way.
    const NodeRecord& before = existing->second;
    node.others_may_run_until = before.SameHostAs(agent)
                                    ? before.others_may_run_until
                                    : before.old_agent_may_run_until;
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
  node.by_heartbeat = by_heartbeat_.insert(by_heartbeat_.end(), m);
  const bool member = node.group_rank >= 0;
  if (rejoin || node.old_agent_may_run_until != TimePoint()) {
    NoteRunUntilChanged();
  }
  if (!node.command_checked) NoteCommandUnchecked(m);
  nodes_[m] = std::move(node);
  vacant_.erase(m);
  ++connected_nodes_;  // new, or back from lost
  if (!member && phase_ == JobPhase::kRunning) joiners_.insert(m);
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
  restarts_used_ = restarts_used;
  failures_ = std::move(failures);
  restart_not_before_ = not_before;
}

void JobStateMachine::Heartbeat(int machine_rank, TimePoint now) {
  if (machine_rank < 0) {
    spares_.Heard(machine_rank, now);
    return;
  }
  auto it = nodes_.find(machine_rank);
  if (it != nodes_.end() && it->second.connected) {
    it->second.last_heartbeat = now;
    by_heartbeat_.splice(by_heartbeat_.end(), by_heartbeat_,
                         it->second.by_heartbeat);
  }
}

bool JobStateMachine::ReadyToStart(TimePoint now) const {
  if (phase_ != JobPhase::kWaitingForAgents &&
      phase_ != JobPhase::kRestarting) {
    return false;
  }
  // A backoff holds also for a resumed job (kWaitingForAgents).
  if (now < restart_not_before_) return false;
  if (settings_.Elastic()) return ElasticReadyToStart(now);
  if (static_cast<int>(nodes_.size()) != settings_.num_machines ||
      connected_nodes_ != settings_.num_machines) {
    return false;
  }
  // From where the last look stopped: the machines below it are checked.
  for (auto it = nodes_.lower_bound(commands_checked_below_);
       it != nodes_.end(); ++it) {
    if (!it->second.command_checked) {
      commands_checked_below_ = it->first;
      return false;
    }
  }
  commands_checked_below_ = settings_.num_machines;
  return now >= ReplacementsAllowedAt();
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
  // Capped at now, which keeps by_heartbeat_'s order.
  for (int m : by_heartbeat_) {
    auto& heard = nodes_.at(m).last_heartbeat;
    heard = std::min(heard + late, now);
  }
  spares_.ExcuseStall(late, now);
  stalls_excused_ += late;
}

Decision JobStateMachine::Tick(TimePoint now) {
  Decision decision;
  if (IsFinished(phase_)) return decision;
  ExcuseOwnStall(now);
  const auto timeout = settings_.agent_heartbeat_timeout;
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents) {
    std::vector<int> silent;
    for (int m : by_heartbeat_) {
      if (now - nodes_.at(m).last_heartbeat <= timeout) break;
      silent.push_back(m);
    }
    // Marked lost together, then judged together: machines cut off at
    // once after the others' ranks exited 0 are all awaited.
    std::vector<std::pair<int, int>> lost;
    for (int m : silent) {
      const double seconds =
          std::chrono::duration<double>(now - nodes_.at(m).last_heartbeat)
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
  if (phase_ == JobPhase::kWaitingForAgents &&
      now - created_at_ > settings_.registration_timeout) {
    std::vector<std::string> missing;
    for (int m = 0; m < settings_.num_machines; ++m) {
      if (nodes_.count(m) == 0) missing.push_back(std::to_string(m));
    }
    // An elastic job needs only MIN of them.
    if (!missing.empty() &&
        static_cast<int>(nodes_.size()) < settings_.MinMachines()) {
      const std::string why = absl::StrCat(
          "machine(s) ", absl::StrJoin(missing, ", "),
          " did not register within ",
          settings_.registration_timeout.count() / 1000.0, " s",
          settings_.Elastic() ? absl::StrCat(" (the job needs at least ",
                                             settings_.MinMachines(), ")")
                              : "");
      FailureRecord failure;
      failure.reason = why;
      failures_.push_back(failure);
      Finish(JobOutcome{JobPhase::kFailed, 1, why}, decision);
      return decision;
    }
  }
  // An elastic job goes on without lost machines while MIN are ready.
  if (phase_ == JobPhase::kRestarting && now > rejoin_deadline_ &&
      (!settings_.Elastic() || CountReady() < settings_.MinMachines())) {
    for (const auto& [m, node] : nodes_) {
      if (node.connected) continue;
      const std::string why = absl::StrCat(
          "machine ", m, " (host ", node.info.hostname, ") ", node.lost_reason,
          " and did not rejoin within ",
          settings_.rejoin_timeout.count() / 1000.0, " s",
          settings_.Elastic() ? absl::StrCat(" (", CountReady(),
                                             " machines left; the job needs at "
                                             "least ",
                                             settings_.MinMachines(), ")")
                              : "");
      FailureRecord failure;
      failure.generation = generation_;
      failure.machine_rank = m;
      failure.hostname = node.info.hostname;
      failure.reason = why;
      failures_.push_back(failure);
      Finish(JobOutcome{JobPhase::kFailed, 1, why}, decision);
      return decision;
    }
  }
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
    UpdateElasticHold(now);
    Decision rescale = MaybeRescale(now);
    if (rescale.stop_generation) {
      decision.stop_generation = rescale.stop_generation;
    }
  }
  decision.start_generation = ReadyToStart(now);
  return decision;
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
    if (elastic_hold_until_) consider(*elastic_hold_until_);
    consider(restart_not_before_);      // a resumed job's backoff
    consider(ReplacementsAllowedAt());  // ... and its old agents' leases
  }
  if (!awaiting_reports_.empty()) consider(report_deadline_ + kPast);
  if (phase_ == JobPhase::kRestarting) {
    consider(restart_not_before_);
    consider(rejoin_deadline_ + kPast);
    consider(ReplacementsAllowedAt());
  }
  const auto timeout = settings_.agent_heartbeat_timeout;
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents &&
      !IsFinished(phase_) && !by_heartbeat_.empty()) {
    // Silence of exactly the timeout is allowed.
    consider(nodes_.at(by_heartbeat_.front()).last_heartbeat + timeout + kPast);
  }
  if (timeout.count() > 0 && !IsFinished(phase_)) {
    for (const auto& [key, spare] : spares_.all()) {
      consider(spare.last_heartbeat + timeout + kPast);
    }
  }
  return next;
}

TimePoint JobStateMachine::ReplacementsAllowedAt() const {
  if (replacements_allowed_at_) return *replacements_allowed_at_;
  TimePoint latest;
  for (const auto& [m, node] : nodes_) {
    latest = std::max(latest, node.old_agent_may_run_until);
  }
  replacements_allowed_at_ = latest;
  return latest;
}

GenerationStart JobStateMachine::StartGeneration(TimePoint now) {
  // The members: every machine of a fixed-size job (ReadyToStart waited
  // for all); those ready of an elastic one. In machine_rank order, so
  // ranks stay contiguous per machine and keyed by machine_rank.
  members_ = NextMembers();
  std::vector<int> local_world_sizes;
  for (auto& [m, node] : nodes_) node.group_rank = -1;
  std::vector<int> cordoned_members;
  for (int m : members_) {
    NodeRecord& node = nodes_.at(m);
    node.group_rank = static_cast<int>(local_world_sizes.size());
    local_world_sizes.push_back(node.info.local_world_size);
    if (Cordoned(node)) cordoned_members.push_back(m);
  }
  const RankLayout layout = ComputeRankLayout(local_world_sizes);
  joiners_.clear();
  elastic_hold_until_.reset();
  rescaling_ = false;

  ++generation_;
  phase_ = JobPhase::kRunning;
  pending_outcome_.reset();
  ranks_.clear();
  GenerationStart start;
  start.generation = generation_;
  start.world_size = layout.world_size;
  start.num_machines = static_cast<int>(members_.size());
  start.master_addr =
      members_.empty() ? "" : nodes_.at(members_[0]).info.advertise_addr;
  start.cordoned_members = std::move(cordoned_members);
  int index = 0;
  for (int m : members_) {
    NodeRecord& node = nodes_.at(m);
    node.rank_offset = layout.rank_offsets[index++];
    start.nodes.push_back(
        {m, node.rank_offset, node.info.local_world_size, node.group_rank});
    for (int local = 0; local < node.info.local_world_size; ++local) {
      RankRecord rank;
      rank.rank = node.rank_offset + local;
      rank.local_rank = local;
      rank.machine_rank = m;
      ranks_.push_back(rank);
    }
  }
  live_ranks_ = static_cast<int>(ranks_.size());
  started_ranks_ = 0;
  GenerationTimes times;
  times.generation = generation_;
  times.assigned_at = now;
  timeline_.push_back(times);
  return start;
}

RankRecord* JobStateMachine::FindRank(int machine_rank, int64_t generation,
                                      int local_rank) {
  // Fencing: events of any other generation are ignored.
  if (generation != generation_) return nullptr;
  auto node = nodes_.find(machine_rank);
  if (node == nodes_.end()) return nullptr;
  if (local_rank < 0 || local_rank >= node->second.info.local_world_size) {
    return nullptr;
  }
  const size_t index = node->second.rank_offset + local_rank;
  if (index >= ranks_.size()) return nullptr;
  // Only this machine's own ranks: a report may never touch another's.
  if (ranks_[index].machine_rank != machine_rank) return nullptr;
  return &ranks_[index];
}

void JobStateMachine::WorkerStarted(int machine_rank, int64_t generation,
                                    int local_rank, int pid, TimePoint now) {
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr || rank->state != RankState::kPending) return;
  rank->pid = pid;
  rank->state = RankState::kRunning;
  // Every rank of the generation started: whatever shortage there was has
  // passed, and the free restarts count from zero again.
  if (++started_ranks_ == static_cast<int>(ranks_.size())) {
    free_restarts_in_a_row_ = 0;
    if (!timeline_.empty() && !timeline_.back().running_at) {
      timeline_.back().running_at = now;
    }
  }
}

}  // namespace trl

#include "coordinator/job_state_machine.h"

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
    : settings_(std::move(settings)), created_at_(now) {}

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
    if (!existing->second.info.host().SameHostAs(agent.host())) {
      node.old_agent_may_run_until = existing->second.old_agent_may_run_until;
    }
  } else if (resumed_) {
    // The old coordinator's agent of this machine heard from it last
    // before we started: its lease ends before then + lease.
    auto previous = previous_hosts_.find(m);
    if (previous == previous_hosts_.end() ||
        !previous->second.SameHostAs(agent.host())) {
      node.old_agent_may_run_until = created_at_ + agent.lease +
                                     settings_.stop_grace +
                                     std::chrono::seconds(2);
    }
  }
  node.by_heartbeat = by_heartbeat_.insert(by_heartbeat_.end(), m);
  const bool member = node.group_rank >= 0;
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
    auto spare = spares_.find(machine_rank);
    if (spare != spares_.end()) spare->second.last_heartbeat = now;
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
  for (const auto& [m, node] : nodes_) {
    if (!node.command_checked) return false;
  }
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
  for (auto& [key, spare] : spares_) {
    spare.last_heartbeat = std::min(spare.last_heartbeat + late, now);
  }
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
    for (const auto& [key, spare] : spares_) {
      consider(spare.last_heartbeat + timeout + kPast);
    }
  }
  return next;
}

TimePoint JobStateMachine::ReplacementsAllowedAt() const {
  TimePoint latest;
  for (const auto& [m, node] : nodes_) {
    latest = std::max(latest, node.old_agent_may_run_until);
  }
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

Decision JobStateMachine::WorkerExited(int machine_rank, int64_t generation,
                                       int local_rank, const WorkerExit& exit,
                                       TimePoint now) {
  Decision decision;
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr) return decision;
  if (rank->state != RankState::kPending &&
      rank->state != RankState::kRunning) {
    return decision;
  }
  rank->exit = exit;
  --live_ranks_;
  if (exit.Succeeded()) {
    rank->state = RankState::kSucceeded;
  } else if (phase_ == JobPhase::kStopping) {
    // Exits caused by our own stop order are not failures.
    rank->state = RankState::kStopped;
  } else {
    rank->state = RankState::kFailed;
    if (phase_ == JobPhase::kRunning) {
      FailureRecord failure;
      failure.generation = generation_;
      failure.rank = rank->rank;
      failure.machine_rank = machine_rank;
      failure.hostname = nodes_.at(machine_rank).info.hostname;
      failure.exit = exit;
      failure.reason = absl::StrCat(
          "rank ", rank->rank, " (local rank ", local_rank, " on machine ",
          machine_rank, ", host ", failure.hostname, ") ", exit.Describe());
      return Fail(std::move(failure), exit.LauncherExitCode(), now);
    }
  }
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::AgentDisconnected(int machine_rank, TimePoint now) {
  if (machine_rank < 0) {
    spares_.erase(machine_rank);  // a spare leaves nothing behind
    return Decision();
  }
  return LoseAgent(machine_rank, "disconnected", now);
}

Decision JobStateMachine::LoseAgent(int machine_rank, const std::string& why,
                                    TimePoint now) {
  auto it = nodes_.find(machine_rank);
  if (it == nodes_.end() || !it->second.connected) return Decision();
  return AfterLosses({{machine_rank, MarkLost(machine_rank, why, now)}}, now);
}

int JobStateMachine::MarkLost(int machine_rank, const std::string& why,
                              TimePoint now) {
  auto it = nodes_.find(machine_rank);
  if (it == nodes_.end() || !it->second.connected) return 0;
  --connected_nodes_;
  by_heartbeat_.erase(it->second.by_heartbeat);
  joiners_.erase(machine_rank);
  if (phase_ == JobPhase::kWaitingForAgents) {
    nodes_.erase(it);  // It may register again.
    return 0;
  }
  it->second.connected = false;
  it->second.lost_reason = why;
  vacant_.insert(machine_rank);
  // It heard from us at the latest now: its lease ends before now + lease,
  // and its workers are gone a stop grace after that.
  // (+2 s: the agent's own allowance for SIGKILLed processes to go.)
  // (An elastic job's machine outside the generation ran none of its
  // workers: nothing to wait for.)
  if (!settings_.Elastic() || it->second.group_rank >= 0) {
    it->second.old_agent_may_run_until = now + it->second.info.lease +
                                         settings_.stop_grace +
                                         std::chrono::seconds(2);
  }
  if (IsFinished(phase_)) return 0;
  // A machine's ranks are contiguous from its rank offset.
  const size_t first = it->second.rank_offset;
  const size_t end =
      std::min(ranks_.size(),
               first + static_cast<size_t>(it->second.info.local_world_size));
  int lost = 0;
  for (size_t i = first; i < end; ++i) {
    RankRecord& rank = ranks_[i];
    if (rank.machine_rank == machine_rank &&
        (rank.state == RankState::kPending ||
         rank.state == RankState::kRunning)) {
      rank.state = RankState::kLost;
      --live_ranks_;
      ++lost;
    }
  }
  return lost;
}

Decision JobStateMachine::AfterLosses(
    const std::vector<std::pair<int, int>>& lost, TimePoint now) {
  Decision decision;
  if (IsFinished(phase_) || phase_ == JobPhase::kWaitingForAgents) {
    return decision;
  }
  if (phase_ == JobPhase::kRunning) {
    std::vector<int> with_live_ranks;
    for (const auto& [m, ranks] : lost) {
      if (ranks > 0) with_live_ranks.push_back(m);
    }
    // A machine whose ranks had all exited 0 took nothing with it.
    if (!with_live_ranks.empty()) {
      if (live_ranks_ > 0) {
        const int m = with_live_ranks.front();
        return FailForLoss(m, nodes_.at(m).lost_reason, now);
      }
      // Every other rank has exited 0: these machines' workers may have
      // too, and only their exits were lost with the connection. Wait
      // (bounded) for their agents to come back and say.
      if (awaiting_reports_.empty()) {
        report_deadline_ = now + settings_.rejoin_timeout;
      }
      awaiting_reports_.insert(with_live_ranks.begin(), with_live_ranks.end());
      return decision;
    }
  }
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::FailForLoss(int machine_rank, const std::string& why,
                                      TimePoint now) {
  FailureRecord failure;
  failure.generation = generation_;
  failure.machine_rank = machine_rank;
  failure.hostname = nodes_.at(machine_rank).info.hostname;
  failure.reason = absl::StrCat("the agent of machine ", machine_rank,
                                " (host ", failure.hostname, ") ", why);
  return Fail(std::move(failure), 1, now);
}

Decision JobStateMachine::SettleAwaitedReport(TimePoint now) {
  Decision decision;
  if (awaiting_reports_.empty() || phase_ != JobPhase::kRunning) {
    return decision;
  }
  for (auto it = awaiting_reports_.begin(); it != awaiting_reports_.end();) {
    const int m = *it;
    NodeRecord& node = nodes_.at(m);
    if (!node.connected) {
      ++it;
      continue;
    }
    it = awaiting_reports_.erase(it);
    const AgentInfo& report = node.info;
    const bool complete = report.report_generation == generation_ &&
                          static_cast<int>(report.reported_exits.size()) ==
                              node.info.local_world_size;
    if (!complete) {
      return FailForLoss(m,
                         "lost its connection and came back without the "
                         "outcome of every worker",
                         now);
    }
    for (const auto& [local, exit] : report.reported_exits) {
      RankRecord* found = FindRank(m, generation_, local);
      if (found == nullptr) continue;
      RankRecord& rank = *found;
      rank.exit = exit;
      if (exit.Succeeded()) {
        rank.state = RankState::kSucceeded;
        continue;
      }
      rank.state = RankState::kFailed;
      FailureRecord failure;
      failure.generation = generation_;
      failure.rank = rank.rank;
      failure.machine_rank = m;
      failure.hostname = node.info.hostname;
      failure.exit = exit;
      failure.reason = absl::StrCat("rank ", rank.rank, " (local rank ", local,
                                    " on machine ", m, ", host ",
                                    failure.hostname, ") ", exit.Describe());
      return Fail(std::move(failure), exit.LauncherExitCode(), now);
    }
  }
  if (!awaiting_reports_.empty()) {
    if (now <= report_deadline_) return decision;
    const int m = *awaiting_reports_.begin();
    return FailForLoss(
        m,
        absl::StrCat(nodes_.at(m).lost_reason, " and did not come back within ",
                     settings_.rejoin_timeout.count() / 1000.0,
                     " s to report its workers"),
        now);
  }
  MaybeFinish(decision, now);  // every rank exited 0: the job succeeded
  return decision;
}

Decision JobStateMachine::CommandChecked(int m, const std::string& problem,
                                         TimePoint now) {
  Decision decision;
  if (auto spare = spares_.find(m); spare != spares_.end()) {
    // A spare that cannot run the command takes no place; the job goes on.
    spare->second.command_checked = true;
    spare->second.unusable = problem;
    return decision;
  }
  auto it = nodes_.find(m);
  if (it == nodes_.end() || IsFinished(phase_)) return decision;
  if (problem.empty()) {
    it->second.command_checked = true;
    return decision;
  }
  const std::string why =
      absl::StrCat("machine ", m, " (host ", it->second.info.hostname,
                   ") cannot run the command: ", problem);
  FailureRecord failure;
  failure.generation = generation_;
  failure.machine_rank = m;
  failure.hostname = it->second.info.hostname;
  failure.reason = why;
  failures_.push_back(failure);
  awaiting_reports_.clear();
  if (phase_ == JobPhase::kWaitingForAgents ||
      phase_ == JobPhase::kRestarting) {
    // No worker runs anywhere.
    Finish(JobOutcome{JobPhase::kFailed, 2,
                      absl::StrCat(why, "; nothing was started")},
           decision);
    return decision;
  }
  // Joined while a generation runs elsewhere: it is stopped, then the job
  // ends the same way.
  pending_outcome_ = JobOutcome{JobPhase::kFailed, 2, why};
  if (phase_ != JobPhase::kStopping) {
    phase_ = JobPhase::kStopping;
    NoteStopping(now);
    decision.stop_generation = why;
  }
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::StopRequested(const std::string& reason,
                                        int exit_code, TimePoint now) {
  Decision decision;
  if (IsFinished(phase_)) return decision;
  if (phase_ == JobPhase::kStopping && pending_outcome_ &&
      pending_outcome_->phase == JobPhase::kStopped) {
    return decision;  // already stopping for a stop request
  }
  FailureRecord record;
  record.generation = generation_;
  record.reason = reason;
  failures_.push_back(record);
  pending_outcome_ = JobOutcome{JobPhase::kStopped, exit_code, reason};
  awaiting_reports_.clear();
  if (phase_ == JobPhase::kWaitingForAgents ||
      phase_ == JobPhase::kRestarting) {
    Finish(*pending_outcome_, decision);  // no worker runs
    return decision;
  }
  const bool already_stopping = phase_ == JobPhase::kStopping;
  phase_ = JobPhase::kStopping;
  NoteStopping(now);
  if (!already_stopping) decision.stop_generation = reason;
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::Fail(FailureRecord failure, int exit_code,
                               TimePoint now) {
  Decision decision;
  const RestartPolicy& policy = settings_.restart;
  const bool excluded =
      failure.rank >= 0 && failure.exit.signal == 0 &&
      failure.exit.start_error.empty() &&
      policy.no_restart_exit_codes.count(failure.exit.exit_code) > 0;
  std::string summary = failure.reason;
  if (excluded) {
    pending_outcome_ =
        JobOutcome{JobPhase::kFailed, exit_code,
                   absl::StrCat(summary, " (exit code ", failure.exit.exit_code,
                                " is marked as not worth a restart)")};
  } else if (failure.exit.out_of_resources &&
             free_restarts_in_a_row_ < kFreeRestarts) {
    // Out of descriptors or memory for a moment (a flood, a neighbour):
    // try again after the backoff without spending the budget.
    pending_outcome_.reset();
    next_restart_is_free_ = true;
  } else if (restarts_used_ >= policy.max_restarts) {
    pending_outcome_ =
        JobOutcome{JobPhase::kFailed, exit_code,
                   policy.max_restarts == 0
                       ? summary
                       : absl::StrCat(summary, " (all ", policy.max_restarts,
                                      " restarts used)")};
  } else {
    pending_outcome_.reset();  // restart once the generation is gone
  }
  NoteHostFailure(failure, now);
  failures_.push_back(std::move(failure));
  awaiting_reports_.clear();  // the generation fails whatever they report
  phase_ = JobPhase::kStopping;
  NoteStopping(now);
  decision.stop_generation = summary;
  MaybeFinish(decision, now);
  return decision;
}

void JobStateMachine::Finish(JobOutcome outcome, Decision& decision) {
  phase_ = outcome.phase;
  outcome_ = std::move(outcome);
  decision.finished = outcome_;
}

void JobStateMachine::NoteStopping(TimePoint at) {
  if (!timeline_.empty() && timeline_.back().generation == generation_ &&
      !timeline_.back().stopping_at) {
    timeline_.back().stopping_at = at;
  }
}

void JobStateMachine::NoteEnded(TimePoint at) {
  if (!timeline_.empty() && timeline_.back().generation == generation_ &&
      !timeline_.back().ended_at) {
    timeline_.back().ended_at = at;
  }
}

void JobStateMachine::MaybeFinish(Decision& decision, TimePoint now) {
  if (phase_ != JobPhase::kRunning && phase_ != JobPhase::kStopping) return;
  if (live_ranks_ > 0) return;
  if (phase_ == JobPhase::kRunning && !awaiting_reports_.empty()) return;
  NoteEnded(now);
  if (phase_ == JobPhase::kRunning) {
    // Every rank exited on its own, and none failed (a failure would have
    // moved the job to kStopping).
    Finish(JobOutcome{JobPhase::kSucceeded, 0,
                      absl::StrCat("all ", ranks_.size(),
                                   " ranks exited with code 0")},
           decision);
    return;
  }
  if (pending_outcome_) {
    Finish(*pending_outcome_, decision);
    return;
  }
  if (rescaling_) {
    // Stopped to take a joiner in: no failure, so no restart spent and no
    // backoff.
    rescaling_ = false;
    phase_ = JobPhase::kRestarting;
    restart_not_before_ = now;
    rejoin_deadline_ = now + settings_.rejoin_timeout;
    return;
  }
  if (next_restart_is_free_) {
    next_restart_is_free_ = false;
    ++free_restarts_in_a_row_;
    phase_ = JobPhase::kRestarting;
    restart_not_before_ = now + settings_.restart.BackoffBefore(
                                    restarts_used_ + free_restarts_in_a_row_);
    rejoin_deadline_ = now + settings_.rejoin_timeout;
    return;
  }
  free_restarts_in_a_row_ = 0;
  ++restarts_used_;
  phase_ = JobPhase::kRestarting;
  restart_not_before_ = now + settings_.restart.BackoffBefore(restarts_used_);
  rejoin_deadline_ = now + settings_.rejoin_timeout;
}

}  // namespace trl

#include "coordinator/job_state_machine.h"

#include <string.h>

#include <utility>

#include "absl/strings/str_cat.h"
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
  if (auto it = nodes_.find(m); it != nodes_.end() && it->second.connected) {
    return absl::AlreadyExistsError(absl::StrCat(
        "machine_rank ", m, " is already registered by host ",
        it->second.info.hostname, " (", it->second.info.advertise_addr, ")"));
  }
  std::vector<std::string> differences;
  for (const auto& [key, expected] : settings_.config_fingerprint) {
    auto found = agent.config_fingerprint.find(key);
    const std::string actual =
        found == agent.config_fingerprint.end() ? "<unset>" : found->second;
    if (actual != expected) {
      differences.push_back(absl::StrCat(key, " is ", actual,
                                         " on the agent but ", expected,
                                         " on the coordinator"));
    }
  }
  if (!differences.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the agent's config differs from the coordinator's: ",
                     absl::StrJoin(differences, "; ")));
  }
  if (agent.local_world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local_world_size ", agent.local_world_size, " must be at least 1"));
  }
  if (phase_ != JobPhase::kWaitingForAgents) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job is ", JobPhaseName(phase_), " and takes no new agents"));
  }
  NodeRecord node;
  node.info = agent;
  node.last_heartbeat = now;
  nodes_[m] = std::move(node);
  return absl::OkStatus();
}

void JobStateMachine::Heartbeat(int machine_rank, TimePoint now) {
  auto it = nodes_.find(machine_rank);
  if (it != nodes_.end()) it->second.last_heartbeat = now;
}

bool JobStateMachine::ReadyToStart() const {
  if (phase_ != JobPhase::kWaitingForAgents) return false;
  if (static_cast<int>(nodes_.size()) != settings_.num_machines) return false;
  for (const auto& [m, node] : nodes_) {
    if (!node.connected) return false;
  }
  return true;
}

GenerationStart JobStateMachine::StartGeneration(TimePoint now) {
  (void)now;
  std::vector<int> local_world_sizes;
  for (const auto& [m, node] : nodes_) {
    local_world_sizes.push_back(node.info.local_world_size);
  }
  const RankLayout layout = ComputeRankLayout(local_world_sizes);

  ++generation_;
  phase_ = JobPhase::kRunning;
  ranks_.clear();
  GenerationStart start;
  start.generation = generation_;
  start.world_size = layout.world_size;
  start.master_addr = nodes_.at(0).info.advertise_addr;
  int index = 0;
  for (auto& [m, node] : nodes_) {
    node.rank_offset = layout.rank_offsets[index++];
    start.nodes.push_back({m, node.rank_offset, node.info.local_world_size});
    for (int local = 0; local < node.info.local_world_size; ++local) {
      RankRecord rank;
      rank.rank = node.rank_offset + local;
      rank.local_rank = local;
      rank.machine_rank = m;
      ranks_.push_back(rank);
    }
  }
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
  return &ranks_[index];
}

void JobStateMachine::WorkerStarted(int machine_rank, int64_t generation,
                                    int local_rank, int pid, TimePoint now) {
  (void)now;
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr || rank->state != RankState::kPending) return;
  rank->pid = pid;
  rank->state = RankState::kRunning;
}

Decision JobStateMachine::WorkerExited(int machine_rank, int64_t generation,
                                       int local_rank, const WorkerExit& exit,
                                       TimePoint now) {
  (void)now;
  Decision decision;
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr) return decision;
  if (rank->state != RankState::kPending &&
      rank->state != RankState::kRunning) {
    return decision;
  }
  rank->exit = exit;
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
      return Fail(std::move(failure), exit.LauncherExitCode());
    }
  }
  MaybeFinish(decision);
  return decision;
}

Decision JobStateMachine::AgentDisconnected(int machine_rank, TimePoint now) {
  (void)now;
  Decision decision;
  auto it = nodes_.find(machine_rank);
  if (it == nodes_.end() || !it->second.connected) return decision;
  if (phase_ == JobPhase::kWaitingForAgents) {
    nodes_.erase(it);  // It may register again.
    return decision;
  }
  it->second.connected = false;
  if (IsFinished(phase_)) return decision;
  for (auto& rank : ranks_) {
    if (rank.machine_rank == machine_rank &&
        (rank.state == RankState::kPending ||
         rank.state == RankState::kRunning)) {
      rank.state = RankState::kLost;
    }
  }
  if (phase_ == JobPhase::kRunning) {
    FailureRecord failure;
    failure.generation = generation_;
    failure.machine_rank = machine_rank;
    failure.hostname = it->second.info.hostname;
    failure.reason =
        absl::StrCat("the agent of machine ", machine_rank, " (host ",
                     failure.hostname, ") disconnected");
    return Fail(std::move(failure), 1);
  }
  MaybeFinish(decision);
  return decision;
}

Decision JobStateMachine::StopRequested(const std::string& reason,
                                        int exit_code, TimePoint now) {
  (void)now;
  Decision decision;
  if (IsFinished(phase_) || phase_ == JobPhase::kStopping) return decision;
  FailureRecord record;
  record.generation = generation_;
  record.reason = reason;
  failures_.push_back(record);
  pending_outcome_ = JobOutcome{JobPhase::kStopped, exit_code, reason};
  if (phase_ == JobPhase::kWaitingForAgents) {
    phase_ = JobPhase::kStopped;
    outcome_ = pending_outcome_;
    decision.finished = outcome_;
    return decision;
  }
  phase_ = JobPhase::kStopping;
  decision.stop_generation = reason;
  MaybeFinish(decision);
  return decision;
}

Decision JobStateMachine::Fail(FailureRecord failure, int exit_code) {
  Decision decision;
  pending_outcome_ = JobOutcome{JobPhase::kFailed, exit_code, failure.reason};
  failures_.push_back(std::move(failure));
  phase_ = JobPhase::kStopping;
  decision.stop_generation = pending_outcome_->summary;
  MaybeFinish(decision);
  return decision;
}

void JobStateMachine::MaybeFinish(Decision& decision) {
  if (phase_ != JobPhase::kRunning && phase_ != JobPhase::kStopping) return;
  for (const auto& rank : ranks_) {
    if (rank.state == RankState::kPending ||
        rank.state == RankState::kRunning) {
      return;
    }
  }
  if (phase_ == JobPhase::kRunning) {
    // Every rank exited on its own, and none failed (a failure would have
    // moved the job to kStopping).
    pending_outcome_ = JobOutcome{
        JobPhase::kSucceeded, 0,
        absl::StrCat("all ", ranks_.size(), " ranks exited with code 0")};
  }
  phase_ = pending_outcome_->phase;
  outcome_ = pending_outcome_;
  decision.finished = outcome_;
}

}  // namespace trl

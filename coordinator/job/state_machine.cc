#include "coordinator/job/state_machine.h"

#include <utility>

namespace trl {
namespace {

// What a judgement within a tick said: stop the generation, the job ended.
void Take(Decision& decision, const Decision& judged) {
  if (judged.stop_generation) {
    decision.stop_generation = judged.stop_generation;
    decision.capture_stacks = judged.capture_stacks;
  }
  if (judged.finished) decision.finished = judged.finished;
}

}  // namespace

JobStateMachine::JobStateMachine(JobSettings settings, TimePoint now)
    : settings_(std::move(settings)),
      created_at_(now),
      membership_(settings_, now),
      timeouts_(settings_, now),
      budget_(settings_.restart) {}

absl::Status JobStateMachine::Register(const AgentInfo& agent, TimePoint now) {
  return membership_.Register(agent, phase_, now);
}

absl::StatusOr<int> JobStateMachine::Admit(const AgentInfo& agent,
                                           TimePoint now) {
  return membership_.Admit(agent, phase_, now);
}

absl::Status JobStateMachine::Uncordon(const std::string& hostname) {
  return membership_.Uncordon(hostname);
}

void JobStateMachine::ResumeAfter(
    int64_t generation, int restarts_used, std::vector<FailureRecord> failures,
    TimePoint not_before, std::map<int, HostIdentity> previous_hosts,
    std::map<int, std::chrono::milliseconds> previous_run_on) {
  if (phase_ != JobPhase::kWaitingForAgents || generation_ >= 0) return;
  membership_.Resume(std::move(previous_hosts), std::move(previous_run_on));
  generation_ = generation;
  budget_.Resume(restarts_used, not_before);
  failures_ = std::move(failures);
}

void JobStateMachine::Heartbeat(int machine_rank, TimePoint now) {
  membership_.Heard(machine_rank, now);
}

bool JobStateMachine::ReadyToStart(TimePoint now) const {
  if (phase_ != JobPhase::kWaitingForAgents &&
      phase_ != JobPhase::kRestarting) {
    return false;
  }
  // A backoff holds also for a resumed job (kWaitingForAgents).
  if (now < budget_.not_before()) return false;
  return membership_.ReadyToStart(phase_, now);
}

Decision JobStateMachine::Tick(TimePoint now) {
  Decision decision;
  if (IsFinished(phase_)) return decision;
  // The coordinator's own stall is nobody's silence.
  if (const auto late = timeouts_.OwnStall(now)) {
    membership_.ExcuseStall(*late, now);
  }
  const auto timeout = settings_.agent_heartbeat_timeout;
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents) {
    // Marked lost together, then judged together: machines cut off at
    // once after the others' ranks exited 0 are all awaited.
    std::vector<std::pair<int, int>> lost;
    for (const auto& [m, why] : timeouts_.Silent(membership_.machines(), now)) {
      lost.emplace_back(m, MarkLost(m, why, now));
      decision.drop_agents.push_back(m);
    }
    if (!lost.empty()) Take(decision, AfterLosses(lost, now));
    if (IsFinished(phase_)) return decision;
  }
  membership_.DropSilentSpares(decision, now);
  membership_.FillFromSpares(phase_, awaited_.machines(), decision, now);
  // A machine that did not register or rejoin in time ends the job.
  if (auto failure = timeouts_.Overdue(membership_, phase_, generation_, now)) {
    failures_.push_back(*failure);
    Finish(JobOutcome{JobPhase::kFailed, 1, failure->reason}, decision);
    return decision;
  }
  if (!awaited_.empty()) {
    const Decision settled = SettleAwaitedReport(now);
    Take(decision, settled);
    if (settled.finished) return decision;
  }
  if (settings_.Elastic()) {
    if (phase_ == JobPhase::kWaitingForAgents) {
      membership_.elastic().UpdateHold(membership_.CountReady(), now);
    }
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
  std::optional<TimePoint> next = timeouts_.Next(membership_, phase_, now);
  auto consider = [&](TimePoint at) {
    if (at > now && (!next || at < *next)) next = at;
  };
  // A restart's backoff, or a resumed job's.
  if (phase_ == JobPhase::kWaitingForAgents ||
      phase_ == JobPhase::kRestarting) {
    consider(budget_.not_before());
  }
  if (!awaited_.empty()) {
    consider(awaited_.deadline() + MembershipTimeouts::kPast);
  }
  return next;
}

std::string JobStateMachine::NextMasterAddr() const {
  return membership_.NextMasterAddr();
}

GenerationStart JobStateMachine::StartGeneration(TimePoint now) {
  GenerationStart start = membership_.Place();
  members_.clear();
  for (const NodeAssignment& node : start.nodes) {
    members_.push_back(node.machine_rank);
  }
  ++generation_;
  phase_ = JobPhase::kRunning;
  pending_outcome_.reset();
  start.generation = generation_;
  ranks_.Assign(start.nodes);
  timeline_.Assigned(generation_, now);
  return start;
}

RankRecord* JobStateMachine::FindRank(int machine_rank, int64_t generation,
                                      int local_rank) {
  // Fencing: events of any other generation are ignored.
  if (generation != generation_) return nullptr;
  const NodeRecord* node = membership_.machines().Find(machine_rank);
  if (node == nullptr) return nullptr;
  return ranks_.Find(machine_rank, node->rank_offset,
                     node->info.local_world_size, local_rank);
}

void JobStateMachine::RankPrinted(int machine_rank, int64_t generation,
                                  int rank, const std::string& line,
                                  TimePoint at) {
  NodeRecord* node = membership_.machines().Find(machine_rank);
  if (node == nullptr || rank < 0) return;
  RankRecord* record =
      FindRank(machine_rank, generation, rank - node->rank_offset);
  if (record == nullptr || record->rank != rank) return;
  record->last_line = std::make_shared<const std::string>(line);
  record->last_line_at = at;
  if (!node->last_output_at || *node->last_output_at < at) {
    node->last_output_at = at;
  }
}

void JobStateMachine::WorkerStarted(int machine_rank, int64_t generation,
                                    int local_rank, int pid, TimePoint now) {
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr || rank->state != RankState::kPending) return;
  if (const NodeRecord* node = membership_.machines().Find(machine_rank)) {
    rank->hostname = node->info.hostname;
  }
  // Every rank of the generation started: whatever shortage there was has
  // passed, and the free restarts count from zero again.
  if (ranks_.Started(*rank, pid)) {
    budget_.GenerationStarted();
    timeline_.Running(generation_, now);
  }
}

}  // namespace trl

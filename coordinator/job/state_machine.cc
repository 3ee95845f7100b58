#include "coordinator/job/state_machine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace trl {

JobStateMachine::JobStateMachine(JobSettings settings, TimePoint now)
    : settings_(std::move(settings)),
      created_at_(now),
      membership_(settings_, now),
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
  membership_.ExcuseStall(late, now);
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
    const MachineTable& machines = membership_.machines();
    for (int m : machines.SilentFor(timeout, now)) {
      const double seconds =
          std::chrono::duration<double>(now - machines.at(m).last_heartbeat)
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
  membership_.DropSilentSpares(decision, now);
  membership_.FillFromSpares(phase_, awaited_.machines(), decision, now);
  CheckRegistrationTimeout(decision, now);
  if (IsFinished(phase_)) return decision;
  CheckRejoinTimeout(decision, now);
  if (IsFinished(phase_)) return decision;
  if (!awaited_.empty()) {
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
      membership_.elastic().UpdateHold(membership_.machines().CountReady(),
                                       now);
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
    if (!membership_.machines().contains(m)) {
      missing.push_back(std::to_string(m));
    }
  }
  // An elastic job needs only MIN of them.
  if (missing.empty() ||
      membership_.machines().size() >= settings_.MinMachines()) {
    return;
  }
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
  const MachineTable& machines = membership_.machines();
  if (phase_ != JobPhase::kRestarting || now <= rejoin_deadline_ ||
      (settings_.Elastic() &&
       machines.CountReady() >= settings_.MinMachines())) {
    return;
  }
  for (const auto& [m, node] : machines.all()) {
    if (node.connected) continue;
    const std::string why = absl::StrCat(
        "machine ", m, " (host ", node.info.hostname, ") ", node.lost_reason,
        " and did not rejoin within ",
        settings_.rejoin_timeout.count() / 1000.0, " s",
        settings_.Elastic()
            ? absl::StrCat(" (", machines.CountReady(),
                           " machines left; the job needs at least ",
                           settings_.MinMachines(), ")")
            : "");
    failures_.push_back(MachineFailure(m, why));
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
  const MachineTable& machines = membership_.machines();
  if (phase_ == JobPhase::kWaitingForAgents) {
    consider(created_at_ + settings_.registration_timeout + kPast);
    const auto& hold = membership_.elastic().hold_until();
    if (hold) consider(*hold);
    consider(budget_.not_before());              // a resumed job's backoff
    consider(machines.ReplacementsAllowedAt());  // ... its old agents' leases
  }
  if (!awaited_.empty()) consider(awaited_.deadline() + kPast);
  if (phase_ == JobPhase::kRestarting) {
    consider(budget_.not_before());
    consider(rejoin_deadline_ + kPast);
    consider(machines.ReplacementsAllowedAt());
  }
  const auto timeout = settings_.agent_heartbeat_timeout;
  const std::optional<TimePoint> earliest = machines.EarliestHeartbeat();
  if (timeout.count() > 0 && phase_ != JobPhase::kWaitingForAgents &&
      !IsFinished(phase_) && earliest) {
    consider(*earliest + timeout + kPast);  // silence of the timeout is OK
  }
  if (timeout.count() > 0 && !IsFinished(phase_)) {
    for (const auto& [key, spare] : membership_.spares().all()) {
      consider(spare.last_heartbeat + timeout + kPast);
    }
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

// How a generation ends (job/state_machine.h): a worker's exit, a lost
// machine (and the report its agent may still bring), a command that cannot
// run, a stop request, a failure; and what comes after once no rank of it
// lives: the next generation (after the backoff) or the job's end.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/job/state_machine.h"

namespace trl {

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
  // Exits caused by our own stop order are not failures.
  const RankState state = exit.Succeeded() ? RankState::kSucceeded
                          : phase_ == JobPhase::kStopping ? RankState::kStopped
                                                          : RankState::kFailed;
  ranks_.Ended(*rank, state, exit);
  if (state == RankState::kFailed) {
    if (phase_ == JobPhase::kRunning) {
      FailureRecord failure;
      failure.generation = generation_;
      failure.rank = rank->rank;
      failure.machine_rank = machine_rank;
      failure.hostname = machines_.at(machine_rank).info.hostname;
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
    spares_.Erase(machine_rank);  // a spare leaves nothing behind
    return Decision();
  }
  return LoseAgent(machine_rank, "disconnected", now);
}

Decision JobStateMachine::LoseAgent(int machine_rank, const std::string& why,
                                    TimePoint now) {
  const NodeRecord* node = machines_.Find(machine_rank);
  if (node == nullptr || !node->connected) return Decision();
  return AfterLosses({{machine_rank, MarkLost(machine_rank, why, now)}}, now);
}

int JobStateMachine::MarkLost(int machine_rank, const std::string& why,
                              TimePoint now) {
  NodeRecord* node = machines_.Find(machine_rank);
  if (node == nullptr || !node->connected) return 0;
  elastic_.Left(machine_rank);
  if (phase_ == JobPhase::kWaitingForAgents) {
    machines_.Erase(machine_rank);  // It may register again.
    return 0;
  }
  machines_.Disconnect(machine_rank, /*vacant=*/true);
  node->lost_reason = why;
  // It heard from us at the latest now: its lease ends before now + lease,
  // and its workers are gone a stop grace after that.
  // (+2 s: the agent's own allowance for SIGKILLed processes to go.)
  // (An elastic job's machine outside the generation ran none of its
  // workers: nothing to wait for.)
  if (!settings_.Elastic() || node->group_rank >= 0) {
    machines_.OldAgentMayRunUntil(machine_rank, now + node->info.lease +
                                                    settings_.stop_grace +
                                                    std::chrono::seconds(2));
  }
  if (IsFinished(phase_)) return 0;
  // A machine's ranks are contiguous from its rank offset.
  return ranks_.LoseMachine(machine_rank, node->rank_offset,
                            node->info.local_world_size);
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
      if (ranks_.live() > 0) {
        const int m = with_live_ranks.front();
        return FailForLoss(m, machines_.at(m).lost_reason, now);
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
  failure.hostname = machines_.at(machine_rank).info.hostname;
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
    const NodeRecord& node = machines_.at(m);
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
    return FailForLoss(m,
                       absl::StrCat(machines_.at(m).lost_reason,
                                    " and did not come back within ",
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
  if (SpareRecord* spare = spares_.Find(m)) {
    // A spare that cannot run the command takes no place; the job goes on.
    spare->command_checked = true;
    spare->unusable = problem;
    return decision;
  }
  NodeRecord* node = machines_.Find(m);
  if (node == nullptr || IsFinished(phase_)) return decision;
  if (problem.empty()) {
    node->command_checked = true;
    return decision;
  }
  const std::string why =
      absl::StrCat("machine ", m, " (host ", node->info.hostname,
                   ") cannot run the command: ", problem);
  FailureRecord failure;
  failure.generation = generation_;
  failure.machine_rank = m;
  failure.hostname = node->info.hostname;
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
    EnterStopping(now);
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
  EnterStopping(now);
  if (!already_stopping) decision.stop_generation = reason;
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::Fail(FailureRecord failure, int exit_code,
                               TimePoint now) {
  Decision decision;
  // The job's end, or a restart once the generation is gone.
  pending_outcome_ = budget_.Judge(failure, exit_code);
  decision.stop_generation = failure.reason;
  NoteHostFailure(failure, now);
  failures_.push_back(std::move(failure));
  awaiting_reports_.clear();  // the generation fails whatever they report
  EnterStopping(now);
  MaybeFinish(decision, now);
  return decision;
}

void JobStateMachine::Finish(JobOutcome outcome, Decision& decision) {
  phase_ = outcome.phase;
  outcome_ = std::move(outcome);
  decision.finished = outcome_;
}

void JobStateMachine::EnterStopping(TimePoint now) {
  phase_ = JobPhase::kStopping;
  timeline_.Stopping(generation_, now);
}

void JobStateMachine::MaybeFinish(Decision& decision, TimePoint now) {
  if (phase_ != JobPhase::kRunning && phase_ != JobPhase::kStopping) return;
  if (ranks_.live() > 0) return;
  if (phase_ == JobPhase::kRunning && !awaiting_reports_.empty()) return;
  timeline_.Ended(generation_, now);
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
  phase_ = JobPhase::kRestarting;
  rejoin_deadline_ = now + settings_.rejoin_timeout;
  if (elastic_.TakeRescale()) {
    // Stopped to take a joiner in: no failure, so no restart spent and no
    // backoff.
    budget_.StartAgainAt(now);
  } else {
    budget_.Restart(now);
  }
}

Decision JobStateMachine::MaybeRescale(TimePoint now) {
  Decision decision;
  // Only while every rank of the generation still runs: one that has
  // exited 0 means the job is ending, and a rescale would run it again.
  if (!settings_.rescale_on_join || phase_ != JobPhase::kRunning ||
      ranks_.live() != ranks_.size() || !awaiting_reports_.empty()) {
    return decision;
  }
  const std::optional<int> m =
      elastic_.JoinerToTakeIn(machines_, cordons_, now);
  if (!m) return decision;
  elastic_.StartRescale();
  pending_outcome_.reset();
  EnterStopping(now);
  decision.stop_generation =
      absl::StrCat("machine ", *m, " (host ", machines_.at(*m).info.hostname,
                   ") joined: generation ", generation_,
                   " stops to take it in (--rescale_on_join)");
  MaybeFinish(decision, now);
  return decision;
}

}  // namespace trl

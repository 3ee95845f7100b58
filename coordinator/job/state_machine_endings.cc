// How a generation ends (job/state_machine.h): a worker's exit, a lost
// machine (and the report its agent may still bring), a command that cannot
// run, a stop request, a failure; and what comes after once no rank of it
// lives: the next generation (after the backoff) or the job's end.
#include <signal.h>

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
  // Exits caused by our own stop order are not failures; a hung rank's
  // is, whatever ended it.
  const bool hung = !rank->hung.empty();
  const RankState state = hung               ? RankState::kFailed
                          : exit.Succeeded() ? RankState::kSucceeded
                          : phase_ == JobPhase::kStopping ? RankState::kStopped
                                                          : RankState::kFailed;
  WorkerExit ended = exit;
  if (hung && ended.reason.empty()) ended.reason = rank->hung;
  ranks_.Ended(*rank, state, ended);
  if (state == RankState::kFailed) {
    if (phase_ == JobPhase::kRunning) {
      return Fail(membership_.RankFailure(generation_, *rank),
                  exit.LauncherExitCode(), now);
    }
  }
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::WorkerHung(int machine_rank, int64_t generation,
                                     int local_rank, const std::string& reason,
                                     TimePoint now) {
  RankRecord* rank = FindRank(machine_rank, generation, local_rank);
  if (rank == nullptr || rank->state != RankState::kRunning || reason.empty()) {
    return Decision();
  }
  if (phase_ == JobPhase::kStopping) {
    // Found hung while the generation stops (another rank of the machine,
    // a rank blocked on the first one): its exit is a hang's all the
    // same, though the job's failure is the first.
    rank->hung = reason;
    return Decision();
  }
  if (phase_ != JobPhase::kRunning) return Decision();
  rank->hung = reason;
  FailureRecord failure = membership_.RankFailure(generation_, *rank);
  failure.reason = absl::StrCat("rank ", rank->rank, " (local rank ",
                                rank->local_rank, " on machine ", machine_rank,
                                ", host ", failure.hostname, ") ", reason);
  // As a rank killed for its hang was (SIGKILL): the job's code when no
  // restart is left.
  failure.exit.signal = SIGKILL;
  failure.exit.reason = reason;
  return Fail(std::move(failure), 128 + SIGKILL, now);
}

Decision JobStateMachine::AgentDisconnected(int machine_rank, TimePoint now) {
  if (machine_rank < 0) {
    membership_.Lose(machine_rank, "", phase_, now);  // a spare: no trace
    return Decision();
  }
  return LoseAgent(machine_rank, "disconnected", now);
}

void JobStateMachine::LostAgentGone(int machine_rank, TimePoint now) {
  membership_.LostAgentGone(machine_rank, now);
}

Decision JobStateMachine::LoseAgent(int machine_rank, const std::string& why,
                                    TimePoint now) {
  const NodeRecord* node = membership_.machines().Find(machine_rank);
  if (node == nullptr || !node->connected) return Decision();
  return AfterLosses({{machine_rank, MarkLost(machine_rank, why, now)}}, now);
}

int JobStateMachine::MarkLost(int machine_rank, const std::string& why,
                              TimePoint now) {
  const NodeRecord* node = membership_.Lose(machine_rank, why, phase_, now);
  if (node == nullptr || IsFinished(phase_)) return 0;
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
        return FailForLoss(m, membership_.machines().at(m).lost_reason, now);
      }
      // Every other rank has exited 0: these machines' workers may have
      // too, and only their exits were lost with the connection. Wait
      // (bounded) for their agents to come back and say.
      awaited_.Await(with_live_ranks, now + settings_.rejoin_timeout);
      return decision;
    }
  }
  MaybeFinish(decision, now);
  return decision;
}

Decision JobStateMachine::FailForLoss(int machine_rank, const std::string& why,
                                      TimePoint now) {
  FailureRecord failure =
      membership_.MachineFailure(generation_, machine_rank, "");
  failure.reason = absl::StrCat("the agent of machine ", machine_rank,
                                " (host ", failure.hostname, ") ", why);
  // Only a machine whose place is vacant: one that came back without
  // every outcome is still connected, and no spare takes it.
  const NodeRecord* node = membership_.machines().Find(machine_rank);
  failure.spare_takes_over = !settings_.Elastic() && node != nullptr &&
                             !node->connected && membership_.SpareStandsReady();
  return Fail(std::move(failure), 1, now);
}

Decision JobStateMachine::SettleAwaitedReport(TimePoint now) {
  Decision decision;
  if (awaited_.empty() || phase_ != JobPhase::kRunning) return decision;
  using Kind = AwaitedReports::Verdict::Kind;
  const AwaitedReports::Verdict verdict =
      awaited_.Settle(membership_.machines(), ranks_, generation_,
                      settings_.rejoin_timeout, now);
  switch (verdict.kind) {
    case Kind::kWaiting:
      return decision;
    case Kind::kMachineFailed:
      return FailForLoss(verdict.machine_rank, verdict.why, now);
    case Kind::kRankFailed:
      return Fail(membership_.RankFailure(generation_, *verdict.rank),
                  verdict.rank->exit.LauncherExitCode(), now);
    case Kind::kAllSucceeded:
      break;
  }
  MaybeFinish(decision, now);  // every rank exited 0: the job succeeded
  return decision;
}

Decision JobStateMachine::CommandChecked(int m, const std::string& problem,
                                         TimePoint now) {
  Decision decision;
  const std::optional<std::string> cannot =
      membership_.CommandChecked(m, problem, phase_);
  if (!cannot) return decision;
  const std::string& why = *cannot;
  failures_.push_back(membership_.MachineFailure(generation_, m, why));
  awaited_.Clear();
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
  awaited_.Clear();
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
  decision.capture_stacks = true;
  membership_.NoteHostFailure(failure, now);
  failures_.push_back(std::move(failure));
  awaited_.Clear();  // the generation fails whatever they report
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
  if (phase_ == JobPhase::kRunning && !awaited_.empty()) return;
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
  timeouts_.AwaitRejoins(now);
  if (membership_.elastic().TakeRescale()) {
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
      ranks_.live() != ranks_.size() || !awaited_.empty()) {
    return decision;
  }
  decision.stop_generation = membership_.StartRescale(generation_, now);
  if (!decision.stop_generation) return decision;
  pending_outcome_.reset();
  EnterStopping(now);
  MaybeFinish(decision, now);
  return decision;
}

}  // namespace trl

// Hot spares and cordons (docs/elastic.md). A spare (trl-agent --spare)
// registers under a key below zero and holds no ranks; when a machine loses
// its agent, a ready spare takes its machine_rank at once (a Handover), so
// the next generation does not wait for the lost one to rejoin. A host
// that fails cordon_after times within cordon_window is cordoned: none of
// its agents is given ranks (a spare takes its place, or an elastic job
// runs smaller) until an operator clears it.
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/job/state_machine.h"

namespace trl {

absl::StatusOr<int> JobStateMachine::Admit(const AgentInfo& agent,
                                           TimePoint now) {
  const int m = agent.machine_rank;
  const bool in_range = m >= 0 && m < settings_.num_machines;
  const NodeRecord* existing = in_range ? machines_.Find(m) : nullptr;
  const bool taken = existing != nullptr && existing->connected;
  if (agent.spare) {
    if (IsFinished(phase_)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the job is ", JobPhaseName(phase_), " and takes no new agents"));
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
                            : in_range && phase_ == JobPhase::kWaitingForAgents;
    if (vacant) {
      AgentInfo machine = agent;
      machine.spare = false;
      if (absl::Status ok = Register(machine, now); !ok.ok()) return ok;
      machines_.at(m).from_spare = true;
      return m;
    }
    return spares_.Admit(agent, now);
  }
  // A machine's own agent back while a spare holds its place: a spare now.
  if (taken && existing->from_spare && !IsFinished(phase_)) {
    if (absl::Status ok = CheckAgentFitsJob(agent, settings_); !ok.ok()) {
      return ok;
    }
    return spares_.Admit(agent, now);
  }
  if (absl::Status ok = Register(agent, now); !ok.ok()) return ok;
  return m;
}

absl::Status JobStateMachine::Uncordon(const std::string& hostname) {
  return cordons_.Uncordon(hostname);
}

void JobStateMachine::NoteHostFailure(const FailureRecord& failure,
                                      TimePoint now) {
  // A start that failed for want of resources is a shortage, bounded by
  // its own free restarts, not a fault of the host; a spare's failure is
  // not a machine's.
  if (failure.machine_rank < 0 || failure.exit.out_of_resources) return;
  cordons_.NoteFailure(failure.hostname, failure.reason, now);
}

void JobStateMachine::TakePlace(int key, int m, const std::string& why,
                                Decision& decision) {
  SpareRecord spare = spares_.Take(key);
  NodeRecord& node = machines_.at(m);
  AgentInfo info = std::move(spare.info);
  info.machine_rank = m;
  info.spare = false;
  info.report_generation = -1;
  info.reported_exits.clear();
  node.info = std::move(info);
  node.last_heartbeat = spare.last_heartbeat;
  node.command_checked = spare.command_checked;
  node.from_spare = true;
  // Its ranks are handed over only once the lost agent's lease and stop
  // grace are over (I1): old_agent_may_run_until stays as it was, and
  // all of it is other hosts' (should this agent register again).
  node.others_may_run_until = node.old_agent_may_run_until;
  machines_.Reconnect(m);
  if (node.group_rank < 0 && phase_ == JobPhase::kRunning) elastic_.Joined(m);
  decision.handovers.push_back(
      {key, m,
       absl::StrCat("the spare on host ", node.info.hostname,
                    " takes the place of machine ", m, ": ", why)});
}

void JobStateMachine::FillFromSpares(Decision& decision, TimePoint now) {
  if (spares_.empty() || IsFinished(phase_)) return;
  for (auto it = machines_.vacant().begin(); it != machines_.vacant().end();) {
    const int m = *it++;                       // TakePlace erases m
    if (awaiting_reports_.count(m)) continue;  // its report decides
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string why = machines_.at(m).lost_reason;
    TakePlace(*spare, m, why, decision);
  }
  // A machine that has not registered (a node that did not come up, or one
  // lost while a restarted coordinator was away) once any earlier agent of
  // it has surely stopped: the job does not wait for the registration
  // timeout with a spare at hand.
  if (phase_ == JobPhase::kWaitingForAgents &&
      machines_.size() < settings_.num_machines) {
    for (int m = 0; m < settings_.num_machines; ++m) {
      if (machines_.contains(m)) continue;
      const std::optional<int> spare = spares_.NextReady(cordons_);
      if (!spare) break;
      const SpareRecord& ready = *spares_.Find(*spare);
      const TimePoint old_may_run_until = created_at_ + ready.info.lease +
                                          settings_.stop_grace +
                                          std::chrono::seconds(2);
      if (now < old_may_run_until) break;
      NodeRecord& node = machines_.AddUnregistered(m, old_may_run_until);
      node.lost_reason = "has not registered";
      TakePlace(*spare, m, node.lost_reason, decision);
    }
  }
  // A cordoned machine's agent gives its place to a spare and becomes one,
  // while none of its ranks lives.
  if (cordons_.empty() || (phase_ != JobPhase::kRestarting &&
                           phase_ != JobPhase::kWaitingForAgents)) {
    return;
  }
  for (const auto& [m, node] : machines_.all()) {
    if (!node.connected || !Cordoned(node)) continue;
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string host = node.info.hostname;
    const std::string why = absl::StrCat("host ", host, " is cordoned (",
                                         cordons_.At(host).reason, ")");
    // Out of the machines first: the spare's record takes its place.
    machines_.Disconnect(m, /*vacant=*/false);
    elastic_.Left(m);
    const int demoted_key = spares_.Add(node.info, now);
    SpareRecord* made_spare = spares_.Find(demoted_key);
    made_spare->last_heartbeat = node.last_heartbeat;
    made_spare->command_checked = node.command_checked;
    TakePlace(*spare, m, why, decision);
    decision.handovers.push_back(
        {m, demoted_key,
         absl::StrCat("machine ", m, "'s agent on host ", host,
                      " is a spare now: ", why)});
  }
}

void JobStateMachine::DropSilentSpares(Decision& decision, TimePoint now) {
  for (int key : spares_.DropSilent(settings_.agent_heartbeat_timeout, now)) {
    decision.drop_spares.push_back(key);
  }
}

}  // namespace trl

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

absl::Status JobStateMachine::CheckAgent(const AgentInfo& agent) const {
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
  if (agent.local_world_size < 1 ||
      (settings_.local_world_size > 0 &&
       agent.local_world_size != settings_.local_world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local_world_size ", agent.local_world_size, " must be ",
                     settings_.local_world_size > 0
                         ? std::to_string(settings_.local_world_size)
                         : std::string("at least 1"),
                     " (num_processes / num_machines)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> JobStateMachine::Admit(const AgentInfo& agent,
                                           TimePoint now) {
  const int m = agent.machine_rank;
  const bool in_range = m >= 0 && m < settings_.num_machines;
  auto existing = in_range ? nodes_.find(m) : nodes_.end();
  const bool taken = existing != nodes_.end() && existing->second.connected;
  if (agent.spare) {
    if (IsFinished(phase_)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the job is ", JobPhaseName(phase_), " and takes no new agents"));
    }
    if (absl::Status ok = CheckAgent(agent); !ok.ok()) return ok;
    // A spare that stood for a machine before its connection was lost
    // takes it back if it is still vacant, or not registered yet (a
    // restarted coordinator).
    // (An awaited machine too: the stand-in that ran it brings the report.)
    const bool vacant = existing != nodes_.end()
                            ? !taken && vacant_.count(m) > 0
                            : in_range && phase_ == JobPhase::kWaitingForAgents;
    if (vacant) {
      AgentInfo machine = agent;
      machine.spare = false;
      if (absl::Status ok = Register(machine, now); !ok.ok()) return ok;
      nodes_.at(m).from_spare = true;
      return m;
    }
    return spares_.Admit(agent, now);
  }
  // A machine's own agent back while a spare holds its place: a spare now.
  if (taken && existing->second.from_spare && !IsFinished(phase_)) {
    if (absl::Status ok = CheckAgent(agent); !ok.ok()) return ok;
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

void JobStateMachine::FillFromSpares(Decision& decision, TimePoint now) {
  if (spares_.empty() || IsFinished(phase_)) return;
  auto take_place = [&](int key, int m, const std::string& why) {
    SpareRecord spare = spares_.Take(key);
    NodeRecord& node = nodes_.at(m);
    AgentInfo info = std::move(spare.info);
    info.machine_rank = m;
    info.spare = false;
    info.report_generation = -1;
    info.reported_exits.clear();
    node.info = std::move(info);
    node.connected = true;
    node.last_heartbeat = spare.last_heartbeat;
    node.command_checked = spare.command_checked;
    if (!node.command_checked) NoteCommandUnchecked(m);
    node.from_spare = true;
    // Its ranks are handed over only once the lost agent's lease and stop
    // grace are over (I1): old_agent_may_run_until stays as it was, and
    // all of it is other hosts' (should this agent register again).
    node.others_may_run_until = node.old_agent_may_run_until;
    auto before = std::find_if(
        by_heartbeat_.begin(), by_heartbeat_.end(), [&](int other) {
          return nodes_.at(other).last_heartbeat > node.last_heartbeat;
        });
    node.by_heartbeat = by_heartbeat_.insert(before, m);
    ++connected_nodes_;
    vacant_.erase(m);
    if (node.group_rank < 0 && phase_ == JobPhase::kRunning) joiners_.insert(m);
    decision.handovers.push_back(
        {key, m,
         absl::StrCat("the spare on host ", node.info.hostname,
                      " takes the place of machine ", m, ": ", why)});
  };
  for (auto it = vacant_.begin(); it != vacant_.end();) {
    const int m = *it++;                       // take_place erases m
    if (awaiting_reports_.count(m)) continue;  // its report decides
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string why = nodes_.at(m).lost_reason;
    take_place(*spare, m, why);
  }
  // A machine that has not registered (a node that did not come up, or one
  // lost while a restarted coordinator was away) once any earlier agent of
  // it has surely stopped: the job does not wait for the registration
  // timeout with a spare at hand.
  if (phase_ == JobPhase::kWaitingForAgents &&
      static_cast<int>(nodes_.size()) < settings_.num_machines) {
    for (int m = 0; m < settings_.num_machines; ++m) {
      if (nodes_.count(m)) continue;
      const std::optional<int> spare = spares_.NextReady(cordons_);
      if (!spare) break;
      const SpareRecord& ready = *spares_.Find(*spare);
      const TimePoint old_may_run_until = created_at_ + ready.info.lease +
                                          settings_.stop_grace +
                                          std::chrono::seconds(2);
      if (now < old_may_run_until) break;
      NodeRecord& node = nodes_[m];
      node.info = ready.info;  // take_place moves it in
      node.connected = false;
      node.old_agent_may_run_until = old_may_run_until;
      NoteRunUntilChanged();
      node.lost_reason = "has not registered";
      take_place(*spare, m, node.lost_reason);
    }
  }
  // A cordoned machine's agent gives its place to a spare and becomes one,
  // while none of its ranks lives.
  if (cordons_.empty() || (phase_ != JobPhase::kRestarting &&
                           phase_ != JobPhase::kWaitingForAgents)) {
    return;
  }
  for (auto& [m, node] : nodes_) {
    if (!node.connected || !Cordoned(node)) continue;
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string host = node.info.hostname;
    const std::string why = absl::StrCat("host ", host, " is cordoned (",
                                         cordons_.At(host).reason, ")");
    // Out of the machines first: the spare's record takes its place.
    AgentInfo demoted = node.info;
    const TimePoint heard = node.last_heartbeat;
    const bool checked = node.command_checked;
    by_heartbeat_.erase(node.by_heartbeat);
    --connected_nodes_;
    node.connected = false;
    joiners_.erase(m);
    const int demoted_key = spares_.Add(demoted, now);
    SpareRecord* made_spare = spares_.Find(demoted_key);
    made_spare->last_heartbeat = heard;
    made_spare->command_checked = checked;
    take_place(*spare, m, why);
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

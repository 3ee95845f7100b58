// Hot spares and cordons (docs/elastic.md). A spare (trl-agent --spare)
// registers under a key below zero and holds no ranks; when a machine loses
// its agent, a ready spare takes its machine_rank at once (a Handover), so
// the next generation does not wait for the lost one to rejoin. A host
// that fails cordon_after times within cordon_window is cordoned: none of
// its agents is given ranks (a spare takes its place, or an elastic job
// runs smaller) until an operator clears it.
#include <iterator>

#include "absl/strings/str_cat.h"
#include "coordinator/job/membership.h"

namespace trl {

void JobMembership::NoteHostFailure(const FailureRecord& failure,
                                    TimePoint now) {
  // A start that failed for want of resources is a shortage, bounded by
  // its own free restarts, not a fault of the host; a spare's failure is
  // not a machine's.
  if (failure.machine_rank < 0 || failure.exit.out_of_resources) return;
  cordons_.NoteFailure(failure.hostname, failure.reason, now);
}

void JobMembership::TakePlace(int key, int m, const std::string& why,
                              JobPhase phase, Decision& decision) {
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
  if (node.group_rank < 0 && phase == JobPhase::kRunning) elastic_.Joined(m);
  decision.handovers.push_back(
      {key, m,
       absl::StrCat("the spare on host ", node.info.hostname,
                    " takes the place of machine ", m, ": ", why)});
}

void JobMembership::FillFromSpares(JobPhase phase, const std::set<int>& awaited,
                                   Decision& decision, TimePoint now) {
  if (spares_.empty() || IsFinished(phase)) return;
  for (auto it = machines_.vacant().begin(); it != machines_.vacant().end();) {
    const int m = *it++;             // TakePlace erases m
    if (awaited.count(m)) continue;  // its report decides
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string why = machines_.at(m).lost_reason;
    TakePlace(*spare, m, why, phase, decision);
  }
  // A machine that has not registered (a node that did not come up, or one
  // lost while a restarted coordinator was away) once any earlier agent of
  // it has surely stopped: the job does not wait for the registration
  // timeout with a spare at hand.
  if (phase == JobPhase::kWaitingForAgents &&
      machines_.size() < settings_.num_machines) {
    for (int m = 0; m < settings_.num_machines; ++m) {
      if (machines_.contains(m)) continue;
      const std::optional<int> spare = spares_.NextReady(cordons_);
      if (!spare) break;
      const SpareRecord& ready = *spares_.Find(*spare);
      const TimePoint old_may_run_until =
          created_at_ + PreviousRunOn(m, ready.info);
      if (now < old_may_run_until) break;
      NodeRecord& node = machines_.AddUnregistered(m, old_may_run_until);
      node.lost_reason = "has not registered";
      TakePlace(*spare, m, node.lost_reason, phase, decision);
    }
  }
  SwapOutCordoned(phase, decision, now);
}

void JobMembership::SwapOutCordoned(JobPhase phase, Decision& decision,
                                    TimePoint now) {
  // Only while none of a cordoned machine's ranks lives.
  if (cordons_.empty() || (phase != JobPhase::kRestarting &&
                           phase != JobPhase::kWaitingForAgents)) {
    return;
  }
  for (const auto& [m, node] : machines_.all()) {
    if (!node.connected || !Cordoned(node)) continue;
    const std::optional<int> spare = spares_.NextReady(cordons_);
    if (!spare) return;
    const std::string host = node.info.hostname;
    const std::string why = absl::StrCat("host ", host, " is cordoned (",
                                         cordons_.At(host).Why(), ")");
    // Out of the machines first: the spare's record takes its place.
    machines_.Disconnect(m, /*vacant=*/false);
    elastic_.Left(m);
    const int demoted_key = spares_.Add(node.info, now);
    SpareRecord* made_spare = spares_.Find(demoted_key);
    made_spare->last_heartbeat = node.last_heartbeat;
    made_spare->command_checked = node.command_checked;
    TakePlace(*spare, m, why, phase, decision);
    decision.handovers.push_back(
        {m, demoted_key,
         absl::StrCat("machine ", m, "'s agent on host ", host,
                      " is a spare now: ", why)});
  }
}

void JobMembership::DropSilentSpares(Decision& decision, TimePoint now) {
  std::vector<std::string> unhealthy_hosts;
  if (cordons_.AnyUnhealthy()) {
    for (const auto& [key, spare] : spares_.all()) {
      if (!spare.info.health_problem.empty()) {
        unhealthy_hosts.push_back(spare.info.hostname);
      }
    }
  }
  for (int key : spares_.DropSilent(settings_.agent_heartbeat_timeout, now)) {
    decision.drop_spares.push_back(key);
  }
  for (const std::string& host : unhealthy_hosts) RecheckHostHealth(host);
}

}  // namespace trl

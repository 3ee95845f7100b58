// Elastic membership (--num_machines MIN:MAX, docs/elastic.md): which
// machines a generation takes, when it may start with fewer than MAX, and
// the rescale that takes a joiner in at once (--rescale_on_join). The rest
// of the state machine is the fixed-size job's, with every machine a
// member of every generation.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job/state_machine.h"

namespace trl {

std::string ElasticShape(const GenerationStart& start,
                         const JobSettings& settings) {
  std::vector<std::string> members;
  for (const auto& node : start.nodes) {
    members.push_back(std::to_string(node.machine_rank));
  }
  return absl::StrCat(
      start.num_machines, " of ", settings.MinMachines(), ":",
      settings.num_machines, " machines (", absl::StrJoin(members, ", "),
      "), world size ", start.world_size,
      ", effective batch size = per-device batch x ", start.world_size);
}

bool JobStateMachine::IsReady(const NodeRecord& node) const {
  return node.connected && node.command_checked;
}

int JobStateMachine::CountReady() const {
  int ready = 0;
  for (const auto& [m, node] : nodes_) ready += IsReady(node) ? 1 : 0;
  return ready;
}

std::vector<int> JobStateMachine::NextMembers() const {
  std::vector<int> members;
  std::vector<int> without_cordoned;
  for (const auto& [m, node] : nodes_) {
    if (settings_.Elastic() && !IsReady(node)) continue;
    members.push_back(m);
    if (!Cordoned(node)) without_cordoned.push_back(m);
  }
  // A cordoned machine is left out when the job can start without it (a
  // spare has taken a fixed-size job's cordoned machine's place already).
  if (settings_.Elastic() &&
      static_cast<int>(without_cordoned.size()) >= settings_.MinMachines()) {
    return without_cordoned;
  }
  return members;
}

std::string JobStateMachine::NextMasterAddr() const {
  const std::vector<int> members = NextMembers();
  return members.empty() ? "" : nodes_.at(members[0]).info.advertise_addr;
}

bool JobStateMachine::ElasticReadyToStart(TimePoint now) const {
  // I1: a machine lost from the last generation may still run its workers
  // (cut off, not dead) until its lease and stop grace are over; the next
  // generation, with it or without, starts after that. (A machine back on
  // its host has stopped them: it waits for nothing.)
  if (now < ReplacementsAllowedAt()) return false;
  const int ready = CountReady();
  if (ready == settings_.num_machines) return true;  // all MAX: at once
  if (ready < settings_.MinMachines()) return false;
  // A restart goes on with the machines it has; the first generation waits
  // a little for more.
  if (phase_ == JobPhase::kRestarting) return true;
  return elastic_hold_until_.has_value() && now >= *elastic_hold_until_;
}

void JobStateMachine::UpdateElasticHold(TimePoint now) {
  if (phase_ != JobPhase::kWaitingForAgents) return;
  if (CountReady() < settings_.MinMachines()) {
    elastic_hold_until_.reset();  // one left again: wait for MIN anew
  } else if (!elastic_hold_until_) {
    elastic_hold_until_ = now + settings_.elastic_wait;
  }
}

Decision JobStateMachine::MaybeRescale(TimePoint now) {
  Decision decision;
  // Only while every rank of the generation still runs: one that has
  // exited 0 means the job is ending, and a rescale would run it again.
  if (!settings_.rescale_on_join || phase_ != JobPhase::kRunning ||
      joiners_.empty() || live_ranks_ != static_cast<int>(ranks_.size()) ||
      !awaiting_reports_.empty()) {
    return decision;
  }
  for (int m : joiners_) {
    const NodeRecord& node = nodes_.at(m);
    // (A cordoned joiner would be left out again: no rescale for it.)
    if (!IsReady(node) || Cordoned(node) ||
        now < node.old_agent_may_run_until) {
      continue;
    }
    rescaling_ = true;
    pending_outcome_.reset();
    phase_ = JobPhase::kStopping;
    NoteStopping(now);
    decision.stop_generation = absl::StrCat(
        "machine ", m, " (host ", node.info.hostname, ") joined: generation ",
        generation_, " stops to take it in (--rescale_on_join)");
    MaybeFinish(decision, now);
    return decision;
  }
  return decision;
}

}  // namespace trl

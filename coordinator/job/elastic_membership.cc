#include "coordinator/job/elastic_membership.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::vector<int> ElasticMembership::NextMembers(
    const MachineTable& machines, const CordonList& cordons) const {
  std::vector<int> members;
  std::vector<int> without_cordoned;
  for (const auto& [m, node] : machines.all()) {
    // An unhealthy one never (JobMembership::CountReady leaves it out).
    if (elastic_ && (!MachineTable::IsReady(node) ||
                     cordons.Unhealthy(node.info.hostname))) {
      continue;
    }
    members.push_back(m);
    if (!cordons.Cordoned(node.info.hostname)) without_cordoned.push_back(m);
  }
  // A cordoned machine is left out when the job can start without it (a
  // spare has taken a fixed-size job's cordoned machine's place already).
  if (elastic_ && static_cast<int>(without_cordoned.size()) >= min_) {
    return without_cordoned;
  }
  return members;
}

bool ElasticMembership::ReadyToStart(int ready, bool restarting,
                                     TimePoint now) const {
  if (ready == max_) return true;  // all MAX: at once
  if (ready < min_) return false;
  // A restart goes on with the machines it has; the first generation waits
  // a little for more.
  if (restarting) return true;
  return hold_until_.has_value() && now >= *hold_until_;
}

void ElasticMembership::UpdateHold(int ready, TimePoint now) {
  if (ready < min_) {
    hold_until_.reset();  // one left again: wait for MIN anew
  } else if (!hold_until_) {
    hold_until_ = now + wait_;
  }
}

std::optional<int> ElasticMembership::JoinerToTakeIn(
    const MachineTable& machines, const CordonList& cordons,
    TimePoint now) const {
  for (int m : joiners_) {
    const NodeRecord& node = machines.at(m);
    // (A cordoned joiner would be left out again: no rescale for it.)
    if (!MachineTable::IsReady(node) || cordons.Cordoned(node.info.hostname) ||
        now < node.old_agent_may_run_until) {
      continue;
    }
    return m;
  }
  return std::nullopt;
}

void ElasticMembership::NewGeneration() {
  joiners_.clear();
  hold_until_.reset();
  rescaling_ = false;
}

}  // namespace trl

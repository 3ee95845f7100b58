#include "coordinator/job/machine_table.h"

#include <algorithm>
#include <utility>

namespace trl {

NodeRecord* MachineTable::Find(int m) {
  auto it = nodes_.find(m);
  return it == nodes_.end() ? nullptr : &it->second;
}

const NodeRecord* MachineTable::Find(int m) const {
  auto it = nodes_.find(m);
  return it == nodes_.end() ? nullptr : &it->second;
}

void MachineTable::Add(int m, NodeRecord node) {
  auto existing = nodes_.find(m);
  if (existing != nodes_.end()) {
    if (existing->second.connected) Disconnect(m, /*vacant=*/false);
    replacements_allowed_at_.reset();
  } else if (node.old_agent_may_run_until != TimePoint()) {
    replacements_allowed_at_.reset();
  }
  node.connected = true;
  node.by_heartbeat = by_heartbeat_.insert(by_heartbeat_.end(), m);
  NoteCommand(m, node);
  nodes_[m] = std::move(node);
  vacant_.erase(m);
  ++connected_;
}

void MachineTable::NoteCommand(int m, const NodeRecord& node) {
  if (!node.command_checked) {
    commands_checked_below_ = std::min(commands_checked_below_, m);
  }
}

NodeRecord& MachineTable::AddUnregistered(int m,
                                          TimePoint old_agent_may_run_until) {
  NodeRecord& node = nodes_[m];
  node.connected = false;
  node.old_agent_may_run_until = old_agent_may_run_until;
  replacements_allowed_at_.reset();
  return node;
}

void MachineTable::Reconnect(int m) {
  NodeRecord& node = nodes_.at(m);
  if (node.connected) return;
  node.connected = true;
  auto before =
      std::find_if(by_heartbeat_.begin(), by_heartbeat_.end(), [&](int other) {
        return nodes_.at(other).last_heartbeat > node.last_heartbeat;
      });
  node.by_heartbeat = by_heartbeat_.insert(before, m);
  NoteCommand(m, node);
  vacant_.erase(m);
  ++connected_;
}

void MachineTable::Disconnect(int m, bool vacant) {
  NodeRecord& node = nodes_.at(m);
  if (!node.connected) return;
  node.connected = false;
  by_heartbeat_.erase(node.by_heartbeat);
  --connected_;
  if (vacant) vacant_.insert(m);
}

void MachineTable::Erase(int m) {
  auto it = nodes_.find(m);
  if (it == nodes_.end()) return;
  Disconnect(m, /*vacant=*/false);
  if (it->second.old_agent_may_run_until != TimePoint()) {
    replacements_allowed_at_.reset();
  }
  vacant_.erase(m);
  nodes_.erase(it);
}

void MachineTable::Heard(int m, TimePoint now) {
  auto it = nodes_.find(m);
  if (it == nodes_.end() || !it->second.connected) return;
  it->second.last_heartbeat = now;
  by_heartbeat_.splice(by_heartbeat_.end(), by_heartbeat_,
                       it->second.by_heartbeat);
}

void MachineTable::OldAgentMayRunUntil(int m, TimePoint until) {
  NodeRecord& node = nodes_.at(m);
  node.old_agent_may_run_until = std::max(node.old_agent_may_run_until, until);
  replacements_allowed_at_.reset();
}

void MachineTable::OldAgentRanUntil(int m, TimePoint until) {
  NodeRecord& node = nodes_.at(m);
  node.old_agent_may_run_until = std::min(node.old_agent_may_run_until, until);
  node.others_may_run_until = std::min(node.others_may_run_until, until);
  replacements_allowed_at_.reset();
}

std::vector<int> MachineTable::SilentFor(
    std::chrono::steady_clock::duration timeout, TimePoint now) const {
  std::vector<int> silent;
  for (int m : by_heartbeat_) {
    if (now - nodes_.at(m).last_heartbeat <= timeout) break;
    silent.push_back(m);
  }
  return silent;
}

std::optional<TimePoint> MachineTable::EarliestHeartbeat() const {
  if (by_heartbeat_.empty()) return std::nullopt;
  return nodes_.at(by_heartbeat_.front()).last_heartbeat;
}

void MachineTable::ExcuseStall(std::chrono::steady_clock::duration late,
                               TimePoint now) {
  for (int m : by_heartbeat_) {
    auto& heard = nodes_.at(m).last_heartbeat;
    heard = std::min(heard + late, now);
  }
}

TimePoint MachineTable::ReplacementsAllowedAt() const {
  if (replacements_allowed_at_) return *replacements_allowed_at_;
  TimePoint latest;
  for (const auto& [m, node] : nodes_) {
    latest = std::max(latest, node.old_agent_may_run_until);
  }
  replacements_allowed_at_ = latest;
  return latest;
}

bool MachineTable::AllCommandsChecked(int num_machines) const {
  // From where the last look stopped: the machines below it are checked.
  for (auto it = nodes_.lower_bound(commands_checked_below_);
       it != nodes_.end(); ++it) {
    if (!it->second.command_checked) {
      commands_checked_below_ = it->first;
      return false;
    }
  }
  commands_checked_below_ = num_machines;
  return true;
}

int MachineTable::CountReady() const {
  int ready = 0;
  for (const auto& [m, node] : nodes_) ready += IsReady(node) ? 1 : 0;
  return ready;
}

}  // namespace trl

#include "coordinator/job/spare_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace trl {

absl::StatusOr<int> SparePool::Admit(AgentInfo agent, TimePoint now) {
  if (static_cast<int>(spares_.size()) >= max_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this job takes at most ", max_,
                     " spares (--max_spares), and has as many"));
  }
  return Add(std::move(agent), now);
}

int SparePool::Add(AgentInfo agent, TimePoint now) {
  const int key = next_key_--;
  agent.spare = true;
  agent.machine_rank = -1;
  agent.reported_exits.clear();
  agent.config_fingerprint.clear();  // checked; nothing of it is kept
  SpareRecord spare;
  spare.command_checked = !agent.checks_command;
  spare.info = std::move(agent);
  spare.last_heartbeat = now;
  spares_[key] = std::move(spare);
  return key;
}

SpareRecord* SparePool::Find(int key) {
  auto found = spares_.find(key);
  return found == spares_.end() ? nullptr : &found->second;
}

void SparePool::Heard(int key, TimePoint now) {
  if (SpareRecord* spare = Find(key)) spare->last_heartbeat = now;
}

std::optional<int> SparePool::NextReady(const CordonList& cordons) const {
  // Keys count down from -1: the first that came has the highest.
  for (auto it = spares_.rbegin(); it != spares_.rend(); ++it) {
    const SpareRecord& spare = it->second;
    if (spare.command_checked && spare.unusable.empty() &&
        !cordons.Cordoned(spare.info.hostname)) {
      return it->first;
    }
  }
  return std::nullopt;
}

SpareRecord SparePool::Take(int key) {
  auto found = spares_.find(key);
  SpareRecord spare = std::move(found->second);
  spares_.erase(found);
  return spare;
}

void SparePool::ExcuseStall(TimePoint::duration late, TimePoint now) {
  for (auto& [key, spare] : spares_) {
    spare.last_heartbeat = std::min(spare.last_heartbeat + late, now);
  }
}

std::vector<int> SparePool::DropSilent(std::chrono::milliseconds timeout,
                                       TimePoint now) {
  std::vector<int> dropped;
  if (timeout.count() <= 0) return dropped;
  for (auto it = spares_.begin(); it != spares_.end();) {
    if (now - it->second.last_heartbeat > timeout) {
      dropped.push_back(it->first);
      it = spares_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

}  // namespace trl

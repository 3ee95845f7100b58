#include "coordinator/owner/agent_table.h"

#include "coordinator/access/connection_limits.h"

namespace trl {

namespace pb = trl::launch::v1;

void AgentTable::Ended(AgentLink* stream) {
  open_.erase(stream);
  fenced_.erase(stream);
}

std::optional<int> AgentTable::KeyOf(const AgentLink* stream) const {
  const auto found = registered_.find(const_cast<AgentLink*>(stream));
  if (found == registered_.end()) return std::nullopt;
  return found->second;
}

std::vector<AgentLink*> AgentTable::StreamsOf(int key) const {
  std::vector<AgentLink*> streams;
  for (const auto& [stream, registered_key] : registered_) {
    if (registered_key == key) streams.push_back(stream);
  }
  return streams;
}

std::vector<std::pair<AgentLink*, const Handover*>> AgentTable::Rekey(
    const std::vector<Handover>& handovers) {
  std::vector<std::pair<AgentLink*, const Handover*>> moves;
  for (const Handover& handover : handovers) {
    for (const auto& [stream, key] : registered_) {
      if (key == handover.from) {
        moves.emplace_back(stream, &handover);
        break;
      }
    }
  }
  for (const auto& [stream, handover] : moves) {
    registered_.at(stream) = handover->to;
  }
  return moves;
}

int AgentTable::SendTo(const std::set<int>& keys,
                       const pb::CoordinatorMessage& message) {
  int sent = 0;
  for (const auto& [stream, key] : registered_) {
    if (!keys.empty() && keys.count(key) == 0) continue;
    stream->Send(message);
    ++sent;
  }
  return sent;
}

std::set<std::string> AgentTable::Peers() const {
  std::set<std::string> peers;
  for (const auto& [stream, key] : registered_) {
    peers.insert(PeerFromGrpc(stream->Peer()));
  }
  return peers;
}

void AgentTable::CloseFenced() {
  for (AgentLink* stream : fenced_) stream->Close();
  fenced_.clear();
}

}  // namespace trl

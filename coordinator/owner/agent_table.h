// Which agent stream stands for which machine or spare: the open streams
// (each that sent anything, until it ends), the registered ones with their
// key (a machine's rank; a spare's key, negative), re-keyed when a spare
// takes a machine's place or a cordoned machine's agent becomes a spare,
// and the fenced ones: streams of machines declared lost, kept open until
// their generation has stopped.
//
// It sends and closes on the streams it is asked to, nothing more; what a
// stream's heartbeats are is heartbeat_sessions.h's. Not thread-safe: the
// owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_AGENT_TABLE_H_
#define TRL_COORDINATOR_OWNER_AGENT_TABLE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job/records.h"
#include "coordinator/owner/agent_link.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class AgentTable {
 public:
  // A message came on `stream`: it is open.
  void Heard(AgentLink* stream) { open_.insert(stream); }
  // `stream` has ended: neither open nor fenced any more (still registered
  // until Unregister).
  void Ended(AgentLink* stream);
  const std::set<AgentLink*>& open() const { return open_; }

  // `stream` stands for `key` now.
  void Register(AgentLink* stream, int key) { registered_[stream] = key; }
  void Unregister(AgentLink* stream) { registered_.erase(stream); }
  // The key `stream` is registered under; none if it is not.
  std::optional<int> KeyOf(const AgentLink* stream) const;
  // The streams registered under `key`, in the table's order.
  std::vector<AgentLink*> StreamsOf(int key) const;
  // Every registered stream and its key.
  const std::map<AgentLink*, int>& registered() const { return registered_; }

  // Moves each handover's stream (the first registered under its `from`)
  // to its `to`; every stream is found before any moves (a swap moves a
  // spare to a machine and the machine's agent to a new spare key).
  // Returns the streams moved, each with its handover.
  std::vector<std::pair<AgentLink*, const Handover*>> Rekey(
      const std::vector<Handover>& handovers);

  // Queues `message` on each registered stream whose key is in `keys`
  // (every one when empty); returns on how many.
  int SendTo(const std::set<int>& keys,
             const trl::launch::v1::CoordinatorMessage& message);
  // Where the registered streams come from, "ADDRESS:PORT".
  std::set<std::string> Peers() const;

  // `stream`, of a machine declared lost, stays open until its generation
  // has stopped.
  void Fence(AgentLink* stream) { fenced_.insert(stream); }
  bool AnyFenced() const { return !fenced_.empty(); }
  // Closes every fenced stream, and forgets them.
  void CloseFenced();
  // Forgets the fenced streams, open (they hear how the job ended).
  void ForgetFenced() { fenced_.clear(); }

 private:
  std::set<AgentLink*> open_;
  std::map<AgentLink*, int> registered_;
  std::set<AgentLink*> fenced_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_AGENT_TABLE_H_

// Once the job has ended, who is still to say they heard how: the machines
// not yet known to have heard it, each until when it is awaited (one told
// on its stream: as long as the caller waits; one cut off before the end:
// its lease and 2 s, time to notice and register again), the old agents of
// machines a spare took over just before the end, and the streams that
// told them.
//
// Pure: the time comes in as an argument; streams are only keys here.
// Not thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_FAREWELLS_H_
#define TRL_COORDINATOR_OWNER_FAREWELLS_H_

#include <map>

#include "coordinator/job/records.h"
#include "coordinator/owner/agent_link.h"

namespace trl {

// The machine a spare registers as (AgentRegistration.machine_rank -1):
// the key under which a spare cut off before the job's end is awaited.
inline constexpr int kSpareCutOff = -1;

class Farewells {
 public:
  // `stream`, registered as `key`, was told of the end as the job ended:
  // a machine's agent is awaited until it says it heard; a spare held
  // nothing (its key, below zero, is the spare pool's), so only its stream
  // waits for its word.
  void ToldAtTheEnd(AgentLink* stream, int key);
  // `machine` is awaited until `until`, unless it is awaited already
  // (kSpareCutOff: a spare cut off before the end).
  void AwaitUntil(int machine, TimePoint until);
  // The old agent of `machine`, whose place a spare took, is awaited until
  // `until`: it does not know, and registers again as `machine`.
  void AwaitOldAgentUntil(int machine, TimePoint until);
  // An agent that registered after the end as `machine` (a spare: as
  // `spare`, with the machine it stood for, or kSpareCutOff) was told on
  // `stream`: whether it is awaited (then `stream` waits for its word; if
  // not, the caller closes it). A machine's own agent is taken for the old
  // agent of a machine a spare took over, where one is awaited; a spare for
  // the holder of the machine it names.
  bool ToldOnReturn(AgentLink* stream, int machine, bool spare);
  // `stream` said it heard: whether it had been told (whoever it stood for
  // is no longer awaited; the caller closes it).
  bool Heard(AgentLink* stream);
  // `stream` ended: whoever it stood for is still awaited.
  void StreamEnded(AgentLink* stream) { told_.erase(stream); }
  // Whether nobody is awaited any more at `now`.
  bool AllHeard(TimePoint now);

 private:
  // Who a told stream stands for.
  struct Told {
    enum Kind { kMachine, kOldAgent, kSpare } kind;
    int machine;  // kMachine: a machine or kSpareCutOff; kOldAgent: whose
  };
  std::map<int, TimePoint> awaiting_;    // machines, and kSpareCutOff
  std::map<int, TimePoint> old_agents_;  // by the machine they ran
  std::map<AgentLink*, Told> told_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_FAREWELLS_H_

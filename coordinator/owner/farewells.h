// Once the job has ended, who is still to say they heard how: the machines
// not yet known to have heard it, each until when it is awaited (one told
// on its stream: as long as the caller waits; one cut off before the end:
// its lease and 2 s, time to notice and register again), and the streams
// that told them.
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
// The key under which the old agent of `machine`, whose place a spare took,
// is awaited: it registers again as `machine` (it does not know), and is
// told under this key rather than the machine's, which waits for the spare.
inline constexpr int OldAgentOf(int machine) {
  return kSpareCutOff - 1 - machine;
}

class Farewells {
 public:
  // `stream`, registered as `key`, was told of the end as the job ended:
  // a machine's agent is awaited until it says it heard; a spare held
  // nothing, so only its stream waits for its word.
  void ToldAtTheEnd(AgentLink* stream, int key);
  // `machine` is awaited until `until`, unless it is awaited already
  // (kSpareCutOff: a spare cut off before the end).
  void AwaitUntil(int machine, TimePoint until);
  // An agent of `machine` that registered after the end was told on
  // `stream`: whether it is awaited, as the machine's old agent (first) or
  // as the machine (then `stream` waits for its word; if not, the caller
  // closes it).
  bool ToldOnReturn(AgentLink* stream, int machine);
  // `stream` said it heard: whether it had been told (its machine is no
  // longer awaited; the caller closes it).
  bool Heard(AgentLink* stream);
  // `stream` ended: its machine is still awaited.
  void StreamEnded(AgentLink* stream) { told_.erase(stream); }
  // Whether no machine is awaited any more at `now`.
  bool AllHeard(TimePoint now);

 private:
  std::map<int, TimePoint> awaiting_;
  std::map<AgentLink*, int> told_;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_FAREWELLS_H_

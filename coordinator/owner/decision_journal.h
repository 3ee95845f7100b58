// What the state machine's decisions say to the operator: the
// coordinator's log lines and the job's history (record/events.h) for
// agents registered or refused, streams handed over to another machine or
// spare, the coordinator's own stalls, machines lost, hosts newly cordoned
// or uncordoned, a generation started or stopping, the job's end; and any
// other event the core notes, stamped with the current generation and the
// wall clock. Reads the state machine it is given; changes nothing in it.
//
// Not thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_DECISION_JOURNAL_H_
#define TRL_COORDINATOR_OWNER_DECISION_JOURNAL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "coordinator/job/state_machine.h"
#include "coordinator/record/events.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class DecisionJournal {
 public:
  // Unix time in milliseconds: an event's time.
  using WallClock = std::function<int64_t()>;

  // Events go beside `state_file` ("": memory only); a `resume`d job keeps
  // the history already there. `machine` must outlive the journal.
  DecisionJournal(const JobStateMachine& machine, const std::string& state_file,
                  bool resume, WallClock wall_clock);

  // Adds to the job's history, at the current generation. Registrations
  // ("registered", "rejoined") come in storms: written with the next Flush.
  void Note(const char* kind, int machine_rank, std::string text);
  void Flush() { events_.Flush(); }
  trl::launch::v1::JobEvents Events() const { return events_.All(); }

  // The agent of `info`, connected from `peer`, was refused (`status`).
  void TellRefused(const std::string& peer, const AgentInfo& info,
                   const absl::Status& status);
  // The agent of `info` registered at `now`: as a spare (`spare`: it came
  // as one, or its machine's place was taken by one) or as its machine,
  // again if `rejoin`; one that takes a machine over from an old agent is
  // told when the machine's ranks are handed over.
  void TellRegistered(const AgentInfo& info, bool spare, bool rejoin,
                      TimePoint now);
  // A stream stands for another machine or spare now.
  void TellHandover(const Handover& handover);
  // A heartbeat datagram was dropped (`why`): said once, so that a flood of
  // bad datagrams does not flood the log.
  void TellDroppedDatagram(const char* why);
  // The coordinator's own stalls (JobStateMachine::own_stalls) since the
  // last told, if any.
  void TellStalls();
  // `machine` is lost (its reason is the state machine's).
  void TellLost(int machine);
  // `machine`'s agent died and its workers ended, its guardian says.
  void TellAgentGone(int machine);
  // Hosts cordoned since the last told.
  void TellNewCordons();
  // `host` is uncordoned: should it be cordoned again, that is told.
  void TellUncordoned(const std::string& host);
  // What `key`'s agent on `host` found in its health checks (empty: they
  // pass again), at its registration or later.
  void TellHealth(int key, const std::string& host, const std::string& problem);
  void TellStopping(const std::string& reason);
  // The generation that just ended: where its ranks stood, grouped (the
  // odd one out named), from what the agents captured before the stop;
  // nothing if none was captured.
  void TellWhereRanksStood();
  void TellFinished(const JobOutcome& outcome);
  // `start` began, meeting at `master_port`; the job may restart
  // `max_restarts` times in all.
  void TellGenerationStarted(const GenerationStart& start, int master_port,
                             int max_restarts);

 private:
  const JobStateMachine& machine_;
  const WallClock wall_clock_;
  JobEventLog events_;
  std::chrono::steady_clock::duration stalls_told_{};
  std::set<std::string> cordons_told_;
  bool told_of_dropped_datagram_ = false;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_DECISION_JOURNAL_H_

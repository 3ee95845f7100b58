// A generation's start, in two halves: prepared off the owner's thread
// (the rendezvous: MASTER_PORT and the NCCL id; the generation's number
// kept in the state file before anything of it exists), then, back on the
// owner's thread, started if the job is still ready for it, with an
// assignment to each member machine's agent. A start prepared for a state
// that is gone does not happen (the next tick prepares again); one whose
// rendezvous or record failed stops the job.
//
// Not thread-safe: it lives on the owner's thread, with the core that
// composes it. Only the work it hands to the Offload runs elsewhere, and
// that touches nothing of it.
#ifndef TRL_COORDINATOR_OWNER_GENERATION_PREPARER_H_
#define TRL_COORDINATOR_OWNER_GENERATION_PREPARER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job/state_machine.h"
#include "coordinator/owner/agent_table.h"
#include "coordinator/owner/coordinator_options.h"
#include "coordinator/owner/decision_journal.h"
#include "coordinator/owner/job_record_keeper.h"

namespace trl {

class GenerationPreparer {
 public:
  using Clock = std::function<TimePoint()>;
  // Runs `work` where slow work may run, then `done` on the owner's thread.
  using Offload = std::function<void(std::function<void()> work,
                                     std::function<void()> done)>;
  // Carries out a decision of the state machine (the core's Execute).
  using Execute = std::function<void(const Decision&)>;

  // Everything it is given must outlive it.
  GenerationPreparer(const CoordinatorOptions& options,
                     RendezvousSource rendezvous, Clock clock,
                     JobStateMachine& machine, const AgentTable& agents,
                     JobRecordKeeper& record, DecisionJournal& journal,
                     Offload offload, Execute execute);

  // Prepares the next generation's start, unless one is being prepared:
  // more ticks that find the job ready to start do not prepare another.
  void Prepare();

 private:
  // The prepared generation starts if the job is still ready for it and
  // machine 0 still has the address it was prepared for.
  struct PreparedGeneration {
    int64_t generation = 0;
    std::string master_addr;
    absl::StatusOr<RendezvousData> rendezvous;
    absl::Status kept;  // the state file saying it may have run
    // Where each machine's agent was when the record was made: a spare
    // that took a place meanwhile is not in the kept record (a restarted
    // coordinator would trust the wrong host), so the start is prepared
    // again.
    std::map<int, HostIdentity> hosts;
  };
  void StartPreparedGeneration(const PreparedGeneration& prepared);
  // Whether every machine's agent is where `hosts` says.
  bool SameHosts(const std::map<int, HostIdentity>& hosts) const;

  const CoordinatorOptions& options_;
  const RendezvousSource rendezvous_;
  const Clock clock_;
  JobStateMachine& machine_;
  const AgentTable& agents_;
  JobRecordKeeper& record_;
  DecisionJournal& journal_;
  const Offload offload_;
  const Execute execute_;
  bool preparing_generation_ = false;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_GENERATION_PREPARER_H_

// What each member machine's agent is told when a generation starts: the
// job's id, the generation, the command, the stop grace and the job's
// environment (MASTER_ADDR and MASTER_PORT, the NCCL id, the store's
// token), with the machine's own ranks (and, in an elastic job, its
// GROUP_RANK). One message, made once and changed for each machine.
//
// Not thread-safe: the owner serialises calls.
#ifndef TRL_COORDINATOR_OWNER_GENERATION_ASSIGNMENT_H_
#define TRL_COORDINATOR_OWNER_GENERATION_ASSIGNMENT_H_

#include "coordinator/job/records.h"
#include "coordinator/owner/coordinator_options.h"
#include "proto/trl_launch.pb.h"

namespace trl {

class GenerationAssignment {
 public:
  // Opens the generation's store namespace (options.open_store_generation)
  // when the job has a store.
  GenerationAssignment(const CoordinatorOptions& options,
                       const GenerationStart& start,
                       const RendezvousData& rendezvous, bool elastic);

  // The message for `node`'s machine: valid until the next call.
  const trl::launch::v1::CoordinatorMessage& For(const NodeAssignment& node);

 private:
  trl::launch::v1::CoordinatorMessage message_;
  // An elastic generation of a distributed job: each machine learns its
  // place among the members.
  bool with_group_rank_ = false;
};

}  // namespace trl

#endif  // TRL_COORDINATOR_OWNER_GENERATION_ASSIGNMENT_H_

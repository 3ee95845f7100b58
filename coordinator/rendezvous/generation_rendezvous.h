// The per-generation rendezvous data that needs the outside world: a
// MASTER_PORT free on machine 0 right now and, for GPU jobs when
// trl-nccl-root was built, a fresh NCCL unique id.
#ifndef TRL_COORDINATOR_RENDEZVOUS_GENERATION_RENDEZVOUS_H_
#define TRL_COORDINATOR_RENDEZVOUS_GENERATION_RENDEZVOUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/owner/coordinator.h"
#include "coordinator/rendezvous/nccl_id_source.h"

namespace trl {

// Picks a port free on `master_addr` (or on any address, when machine 0 is
// another host than the coordinator's). With `nccl` (may be null), also a
// new NCCL unique id whose root listens on the interface of `master_addr`;
// failing that, the job goes on without TRL_NCCL_UNIQUE_ID, with a warning.
absl::StatusOr<RendezvousData> PrepareRendezvous(const std::string& master_addr,
                                                 NcclIdSource* nccl);

}  // namespace trl

#endif  // TRL_COORDINATOR_RENDEZVOUS_GENERATION_RENDEZVOUS_H_

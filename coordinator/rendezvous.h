// The per-generation rendezvous data that needs the outside world: a
// MASTER_PORT free on machine 0 right now and, when built with NCCL, a fresh
// NCCL unique id.
#ifndef TRL_COORDINATOR_RENDEZVOUS_H_
#define TRL_COORDINATOR_RENDEZVOUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/coordinator.h"

namespace trl {

// Picks a port free on `master_addr` (or on any address, when machine 0 is
// another host than the coordinator's).
absl::StatusOr<RendezvousData> PrepareRendezvous(
    const std::string& master_addr);

}  // namespace trl

#endif  // TRL_COORDINATOR_RENDEZVOUS_H_

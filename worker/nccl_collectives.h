// GPU collectives: an NCCL communicator from the coordinator's unique id
// for this generation (TRL_NCCL_UNIQUE_ID), on the GPU of LOCAL_RANK.
// Initialised non-blocking and watched against a deadline: when a peer
// never arrives (or a collective never completes) the communicator is
// aborted and an error comes back, instead of a hang. Built only when CUDA
// and NCCL were found.
#ifndef TRL_WORKER_NCCL_COLLECTIVES_H_
#define TRL_WORKER_NCCL_COLLECTIVES_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/collectives.h"
#include "worker/launch_env.h"

namespace trl::worker {

// GPUs this process can see (0 without a driver or a device).
int GpuCount();

absl::StatusOr<std::unique_ptr<Collectives>> ConnectNccl(
    const LaunchEnv& env, std::chrono::milliseconds timeout);

}  // namespace trl::worker

#endif  // TRL_WORKER_NCCL_COLLECTIVES_H_

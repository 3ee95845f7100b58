// CPU collectives: a Gloo context over TCP whose rendezvous goes through the
// coordinator's store (no TCPStore, no port of our own), in this worker's
// generation's namespace.
#ifndef TRL_WORKER_GLOO_COLLECTIVES_H_
#define TRL_WORKER_GLOO_COLLECTIVES_H_

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/collectives.h"
#include "worker/launch_env.h"

namespace trl::worker {

// Joins every rank of `env`'s generation; fails (naming what is missing)
// when they have not all arrived within `timeout`, which also bounds each
// later collective.
absl::StatusOr<std::unique_ptr<Collectives>> ConnectGloo(
    const LaunchEnv& env, std::chrono::milliseconds timeout);

}  // namespace trl::worker

#endif  // TRL_WORKER_GLOO_COLLECTIVES_H_

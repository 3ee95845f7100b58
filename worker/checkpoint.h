// The demo trainer's checkpoint: the step reached and the weights, with
// what must match to resume (seed, effective batch size, parameter count).
// Written atomically (temporary file, fsync, rename), so a worker killed
// while saving leaves the previous checkpoint whole.
#ifndef TRL_WORKER_CHECKPOINT_H_
#define TRL_WORKER_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trl::worker {

struct Checkpoint {
  int64_t step = 0;  // steps completed
  uint64_t seed = 0;
  int64_t effective_batch_size = 0;
  std::vector<float> params;
};

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& state);
// nullopt when there is no file; an error naming the file when it is
// truncated, corrupt or not a checkpoint.
absl::StatusOr<std::optional<Checkpoint>> LoadCheckpoint(
    const std::string& path);

}  // namespace trl::worker

#endif  // TRL_WORKER_CHECKPOINT_H_

// Data-parallel training of the demo model. Every step's global batch is
// per_device_train_batch_size x world size x gradient_accumulation_steps
// samples; each rank takes its own shard of it, sums its samples'
// gradients, the sums are all-reduced, and every rank applies the same SGD
// update with the mean. So configurations with the same effective batch
// size train the same model, up to the order of float additions.
#ifndef TRL_WORKER_DEMO_TRAINER_H_
#define TRL_WORKER_DEMO_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/collectives.h"
#include "worker/demo_model.h"

namespace trl::worker {

struct TrainOptions {
  ModelShape shape;
  int per_device_train_batch_size = 4;
  int gradient_accumulation_steps = 1;
  int64_t max_steps = 100;
  float learning_rate = 0.1f;
  uint64_t seed = 42;
  // Where rank 0 keeps the checkpoint; empty: no checkpoint.
  std::string checkpoint_path;
  int64_t save_steps = 10;
};

struct TrainHooks {
  // After every step, on every rank: the step number (1-based) and the
  // global batch's mean loss.
  std::function<void(int64_t step, double loss)> on_step;
};

struct TrainResult {
  std::vector<float> params;
  int64_t resumed_from = 0;  // steps the checkpoint had done already
  double last_loss = 0;
};

int64_t EffectiveBatchSize(const TrainOptions& options, int world_size);

// The indices of the samples rank `rank` takes in `step` (0-based) and
// micro-step `micro` (0-based).
std::vector<uint64_t> ShardOf(const TrainOptions& options, int world_size,
                              int rank, int64_t step, int micro);

// Trains from the checkpoint if there is one (rank 0 reads it and sends it
// to every rank), else from the seed's initial weights.
absl::StatusOr<TrainResult> Train(const TrainOptions& options,
                                  Collectives& collectives,
                                  const TrainHooks& hooks);

}  // namespace trl::worker

#endif  // TRL_WORKER_DEMO_TRAINER_H_

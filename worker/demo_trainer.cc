#include "worker/demo_trainer.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/checkpoint.h"

namespace trl::worker {

int64_t EffectiveBatchSize(const TrainOptions& o, int world_size) {
  return static_cast<int64_t>(o.per_device_train_batch_size) * world_size *
         o.gradient_accumulation_steps;
}

std::vector<uint64_t> ShardOf(const TrainOptions& o, int world_size, int rank,
                              int64_t step, int micro) {
  const uint64_t per_micro =
      static_cast<uint64_t>(o.per_device_train_batch_size) * world_size;
  const uint64_t first =
      static_cast<uint64_t>(step) * EffectiveBatchSize(o, world_size) +
      micro * per_micro +
      static_cast<uint64_t>(rank) * o.per_device_train_batch_size;
  std::vector<uint64_t> indices(o.per_device_train_batch_size);
  for (int b = 0; b < o.per_device_train_batch_size; ++b) {
    indices[b] = first + b;
  }
  return indices;
}

namespace {

// What rank 0 sends every rank before training: where to start, or that
// it could not (so no rank waits for a rank 0 that gave up).
struct ResumeHeader {
  int64_t step = 0;
  int64_t failed = 0;
};

absl::StatusOr<TrainResult> Resume(const TrainOptions& o, Collectives& c,
                                   std::vector<float>* params) {
  ResumeHeader header;
  absl::Status problem;
  if (c.rank() == 0 && !o.checkpoint_path.empty()) {
    auto loaded = LoadCheckpoint(o.checkpoint_path);
    if (!loaded.ok()) {
      problem = loaded.status();
    } else if (loaded->has_value()) {
      const Checkpoint& saved = **loaded;
      const int64_t batch = EffectiveBatchSize(o, c.size());
      if (saved.seed != o.seed || saved.effective_batch_size != batch ||
          saved.params.size() != params->size()) {
        problem = absl::FailedPreconditionError(absl::StrCat(
            "the checkpoint ", o.checkpoint_path, " is of another run (seed ",
            saved.seed, ", effective batch size ", saved.effective_batch_size,
            ", ", saved.params.size(), " parameters; this run: seed ", o.seed,
            ", ", batch, ", ", params->size(), ")"));
      } else {
        header.step = saved.step;
        *params = saved.params;
      }
    }
    header.failed = problem.ok() ? 0 : 1;
  }
  if (absl::Status sent = c.Broadcast(&header, sizeof(header), 0); !sent.ok()) {
    return sent;
  }
  if (header.failed) {
    if (!problem.ok()) return problem;
    return absl::AbortedError("rank 0 could not read the checkpoint");
  }
  if (header.step > 0) {
    absl::Status sent =
        c.Broadcast(params->data(), params->size() * sizeof(float), 0);
    if (!sent.ok()) return sent;
  }
  TrainResult result;
  result.resumed_from = header.step;
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainOptions& o, Collectives& c,
                                  const TrainHooks& hooks) {
  std::vector<float> params = InitialParameters(o.shape, o.seed);
  auto resumed = Resume(o, c, &params);
  if (!resumed.ok()) return resumed.status();
  TrainResult result = std::move(*resumed);

  const int64_t batch = EffectiveBatchSize(o, c.size());
  const size_t count = params.size();
  // The gradient sums, then the loss sum, all-reduced together.
  std::vector<float> reduced(count + 1);
  for (int64_t step = result.resumed_from; step < o.max_steps; ++step) {
    std::vector<float> gradient(count, 0.0f);
    double loss = 0;
    for (int micro = 0; micro < o.gradient_accumulation_steps; ++micro) {
      for (uint64_t index : ShardOf(o, c.size(), c.rank(), step, micro)) {
        loss += AccumulateGradient(
            o.shape, params, MakeSample(o.shape, o.seed, index), &gradient);
      }
    }
    std::memcpy(reduced.data(), gradient.data(), count * sizeof(float));
    reduced[count] = static_cast<float>(loss);
    if (absl::Status status = c.AllReduceSum(reduced.data(), reduced.size());
        !status.ok()) {
      return status;
    }
    const float scale = o.learning_rate / static_cast<float>(batch);
    for (size_t i = 0; i < count; ++i) params[i] -= scale * reduced[i];
    result.last_loss = reduced[count] / static_cast<double>(batch);

    const int64_t done = step + 1;
    if (c.rank() == 0 && !o.checkpoint_path.empty() &&
        (done % o.save_steps == 0 || done == o.max_steps)) {
      absl::Status saved = SaveCheckpoint(
          o.checkpoint_path, Checkpoint{done, o.seed, batch, params});
      if (!saved.ok()) return saved;
    }
    if (hooks.on_step) hooks.on_step(done, result.last_loss);
  }
  result.params = std::move(params);
  return result;
}

}  // namespace trl::worker

// The demo trainer's model and data: a one-hidden-layer MLP regressing a
// fixed nonlinear target on synthetic inputs. Every sample is a pure
// function of (seed, index), so any rank can make any sample of any step
// without reading data, and configurations that cut the same global batch
// differently see exactly the same samples.
#ifndef TRL_WORKER_DEMO_MODEL_H_
#define TRL_WORKER_DEMO_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trl::worker {

struct ModelShape {
  int inputs = 32;
  int hidden = 256;
};

// W1 [hidden x inputs], b1 [hidden], w2 [hidden], b2 [1], in that order.
size_t ParameterCount(const ModelShape& shape);
std::vector<float> InitialParameters(const ModelShape& shape, uint64_t seed);

struct Sample {
  std::vector<float> x;
  float y = 0;
};
Sample MakeSample(const ModelShape& shape, uint64_t seed, uint64_t index);

// The model's output for `x`.
float Predict(const ModelShape& shape, const std::vector<float>& params,
              const std::vector<float>& x);

// Adds the gradient of 0.5 * (prediction - y)^2 to `gradient` (same layout
// as the parameters) and returns that loss.
double AccumulateGradient(const ModelShape& shape,
                          const std::vector<float>& params,
                          const Sample& sample, std::vector<float>* gradient);

// A short fingerprint of the weights: their sum, printed by rank 0 at the
// end (equal runs give equal checksums up to float summation order).
double Checksum(const std::vector<float>& params);

}  // namespace trl::worker

#endif  // TRL_WORKER_DEMO_MODEL_H_

#include "worker/demo_model.h"

#include <cmath>

namespace trl::worker {
namespace {

// splitmix64: a counter-based generator, so sample i needs no samples
// before it.
uint64_t Mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// Uniform in [-1, 1), from (seed, stream, index).
float Uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t bits = Mix(Mix(seed ^ Mix(stream)) ^ index);
  return static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0);
}

constexpr uint64_t kInitStream = 1;
constexpr uint64_t kInputStream = 2;
constexpr uint64_t kTargetStream = 3;
constexpr uint64_t kNoiseStream = 4;

}  // namespace

size_t ParameterCount(const ModelShape& s) {
  return static_cast<size_t>(s.hidden) * s.inputs + 2 * s.hidden + 1;
}

std::vector<float> InitialParameters(const ModelShape& s, uint64_t seed) {
  std::vector<float> params(ParameterCount(s), 0.0f);
  const float scale1 = 1.0f / std::sqrt(static_cast<float>(s.inputs));
  const float scale2 = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  const size_t w1 = static_cast<size_t>(s.hidden) * s.inputs;
  for (size_t i = 0; i < w1; ++i) {
    params[i] = scale1 * Uniform(seed, kInitStream, i);
  }
  // b1 starts at zero; w2 random; b2 zero.
  for (int j = 0; j < s.hidden; ++j) {
    params[w1 + s.hidden + j] = scale2 * Uniform(seed, kInitStream, w1 + j);
  }
  return params;
}

Sample MakeSample(const ModelShape& s, uint64_t seed, uint64_t index) {
  Sample sample;
  sample.x.resize(s.inputs);
  const uint64_t base = index * static_cast<uint64_t>(s.inputs);
  for (int i = 0; i < s.inputs; ++i) {
    sample.x[i] = Uniform(seed, kInputStream, base + i);
  }
  // The target: a fixed smooth function of x (its coefficients depend on
  // the seed only), plus a little noise.
  double projection = 0;
  for (int i = 0; i < s.inputs; ++i) {
    projection += Uniform(seed, kTargetStream, i) * sample.x[i];
  }
  projection /= std::sqrt(static_cast<double>(s.inputs));
  const double target =
      std::sin(3.0 * projection) + 0.5 * sample.x[0] * sample.x[1];
  sample.y =
      static_cast<float>(target + 0.01 * Uniform(seed, kNoiseStream, index));
  return sample;
}

namespace {

// The hidden layer's activations for x.
void Hidden(const ModelShape& s, const std::vector<float>& p,
            const std::vector<float>& x, std::vector<float>* h) {
  h->assign(s.hidden, 0.0f);
  const float* w1 = p.data();
  const float* b1 = w1 + static_cast<size_t>(s.hidden) * s.inputs;
  for (int j = 0; j < s.hidden; ++j) {
    float sum = b1[j];
    const float* row = w1 + static_cast<size_t>(j) * s.inputs;
    for (int i = 0; i < s.inputs; ++i) sum += row[i] * x[i];
    (*h)[j] = std::tanh(sum);
  }
}

float Output(const ModelShape& s, const std::vector<float>& p,
             const std::vector<float>& h) {
  const float* w2 =
      p.data() + static_cast<size_t>(s.hidden) * s.inputs + s.hidden;
  float out = w2[s.hidden];  // b2
  for (int j = 0; j < s.hidden; ++j) out += w2[j] * h[j];
  return out;
}

}  // namespace

float Predict(const ModelShape& s, const std::vector<float>& params,
              const std::vector<float>& x) {
  std::vector<float> h;
  Hidden(s, params, x, &h);
  return Output(s, params, h);
}

double AccumulateGradient(const ModelShape& s, const std::vector<float>& p,
                          const Sample& sample, std::vector<float>* gradient) {
  std::vector<float> h;
  Hidden(s, p, sample.x, &h);
  const float error = Output(s, p, h) - sample.y;
  const size_t w1_size = static_cast<size_t>(s.hidden) * s.inputs;
  const float* w2 = p.data() + w1_size + s.hidden;
  float* g_w1 = gradient->data();
  float* g_b1 = g_w1 + w1_size;
  float* g_w2 = g_b1 + s.hidden;
  g_w2[s.hidden] += error;  // b2
  for (int j = 0; j < s.hidden; ++j) {
    g_w2[j] += error * h[j];
    const float back = error * w2[j] * (1.0f - h[j] * h[j]);
    g_b1[j] += back;
    float* row = g_w1 + static_cast<size_t>(j) * s.inputs;
    for (int i = 0; i < s.inputs; ++i) row[i] += back * sample.x[i];
  }
  return 0.5 * static_cast<double>(error) * error;
}

double Checksum(const std::vector<float>& params) {
  double sum = 0;
  for (float value : params) sum += value;
  return sum;
}

}  // namespace trl::worker

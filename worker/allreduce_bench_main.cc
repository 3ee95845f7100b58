// trl-allreduce-bench: times the all-reduce of the demo trainer's gradient
// (by default) through the worker library, to compare with
// torch.distributed under torchrun (bench/allreduce_gloo.sh). Every
// iteration's result is checked, so a fast wrong answer is not a result.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "worker/demo_model.h"
#include "worker/gloo_collectives.h"
#include "worker/launch_env.h"

int main(int argc, char** argv) {
  CLI::App app{"trl-allreduce-bench: all-reduce timing over the launcher"};
  size_t floats = trl::worker::ParameterCount(trl::worker::ModelShape{}) + 1;
  int iterations = 200;
  int warmup = 20;
  app.add_option("--floats", floats,
                 "Floats per all-reduce (default: the "
                 "demo trainer's gradient and loss)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--iterations", iterations, "Timed all-reduces")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--warmup", warmup, "Untimed all-reduces first")
      ->check(CLI::Range(0, 1 << 24));
  CLI11_PARSE(app, argc, argv);

  auto env = trl::worker::ReadLaunchEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "trl-allreduce-bench: error: %s\n",
                 std::string(env.status().message()).c_str());
    return 1;
  }
  auto group = trl::worker::ConnectGloo(*env, std::chrono::seconds(60));
  if (!group.ok()) {
    std::fprintf(stderr, "trl-allreduce-bench: error: %s\n",
                 std::string(group.status().message()).c_str());
    return 1;
  }
  auto& collectives = **group;
  const int world = collectives.size();
  // Rank r contributes r+1 everywhere: the sum is world*(world+1)/2.
  const float expected = world * (world + 1) / 2.0f;
  std::vector<float> buffer(floats);
  std::vector<double> micros;
  for (int i = 0; i < warmup + iterations; ++i) {
    std::fill(buffer.begin(), buffer.end(), collectives.rank() + 1.0f);
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = collectives.AllReduceSum(buffer.data(), floats);
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) {
      std::fprintf(stderr, "trl-allreduce-bench: error: %s\n",
                   std::string(status.message()).c_str());
      return 1;
    }
    if (buffer.front() != expected || buffer.back() != expected) {
      std::fprintf(stderr, "trl-allreduce-bench: wrong sum %f (want %f)\n",
                   buffer.front(), expected);
      return 1;
    }
    if (i >= warmup) {
      micros.push_back(
          std::chrono::duration<double, std::micro>(end - start).count());
    }
  }
  if (collectives.rank() == 0) {
    std::sort(micros.begin(), micros.end());
    const double median = micros[micros.size() / 2];
    std::printf(
        "RESULT allreduce impl=trl-launch/gloo world=%d floats=%zu "
        "iterations=%d median_us=%.1f min_us=%.1f max_us=%.1f "
        "algbw_MBps=%.1f\n",
        world, floats, iterations, median, micros.front(), micros.back(),
        floats * sizeof(float) / median);
  }
  return 0;
}

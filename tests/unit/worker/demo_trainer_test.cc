#include "worker/demo_trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "worker/checkpoint.h"

namespace trl::worker {
namespace {

TrainOptions SmallRun(int per_device, int accumulation) {
  TrainOptions o;
  o.shape = ModelShape{8, 16};
  o.per_device_train_batch_size = per_device;
  o.gradient_accumulation_steps = accumulation;
  o.max_steps = 25;
  o.learning_rate = 0.1f;
  o.seed = 7;
  return o;
}

// Plain full-batch SGD written out directly: the reference every
// data-parallel configuration must match.
std::vector<float> ReferenceTraining(const TrainOptions& o,
                                     int64_t effective_batch) {
  std::vector<float> params = InitialParameters(o.shape, o.seed);
  for (int64_t step = 0; step < o.max_steps; ++step) {
    std::vector<float> gradient(params.size(), 0.0f);
    for (int64_t i = 0; i < effective_batch; ++i) {
      AccumulateGradient(
          o.shape, params,
          MakeSample(o.shape, o.seed, step * effective_batch + i), &gradient);
    }
    for (size_t p = 0; p < params.size(); ++p) {
      params[p] -= o.learning_rate * gradient[p] / effective_batch;
    }
  }
  return params;
}

// A reusable barrier for `count` threads (std::barrier is C++20).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t phase = phase_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++phase_;
      all_.notify_all();
      return;
    }
    all_.wait(lock, [&] { return phase_ != phase; });
  }

 private:
  const int count_;
  std::mutex mutex_;
  std::condition_variable all_;
  int arrived_ = 0;
  int64_t phase_ = 0;
};

// Ranks as threads of one process, summing through shared memory: the
// trainer's own arithmetic under a world of `size`, without a network.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), sync_(size) {}

  class Member : public Collectives {
   public:
    Member(ThreadGroup* group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_->size_; }
    std::string name() const override { return "threads"; }
    absl::Status AllReduceSum(float* data, size_t count) override {
      {
        std::lock_guard<std::mutex> lock(group_->mutex_);
        if (group_->sum_.size() != count) group_->sum_.assign(count, 0.0f);
        // Always in rank order, so every run adds in the same order.
        group_->parts_.resize(group_->size_);
        group_->parts_[rank_].assign(data, data + count);
      }
      group_->sync_.arrive_and_wait();
      if (rank_ == 0) {
        std::fill(group_->sum_.begin(), group_->sum_.end(), 0.0f);
        for (const auto& part : group_->parts_) {
          for (size_t i = 0; i < count; ++i) group_->sum_[i] += part[i];
        }
      }
      group_->sync_.arrive_and_wait();
      std::memcpy(data, group_->sum_.data(), count * sizeof(float));
      group_->sync_.arrive_and_wait();
      return absl::OkStatus();
    }
    absl::Status Broadcast(void* data, size_t bytes, int root) override {
      if (rank_ == root)
        group_->bytes_.assign(static_cast<char*>(data),
                              static_cast<char*>(data) + bytes);
      group_->sync_.arrive_and_wait();
      if (rank_ != root) std::memcpy(data, group_->bytes_.data(), bytes);
      group_->sync_.arrive_and_wait();
      return absl::OkStatus();
    }

   private:
    ThreadGroup* group_;
    int rank_;
  };

  // Trains on every rank; returns each rank's weights.
  std::vector<std::vector<float>> Train(const TrainOptions& o) {
    std::vector<std::vector<float>> weights(size_);
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r) {
      threads.emplace_back([&, r] {
        Member member(this, r);
        auto result = worker::Train(o, member, {});
        EXPECT_TRUE(result.ok()) << result.status();
        if (result.ok()) weights[r] = result->params;
      });
    }
    for (auto& thread : threads) thread.join();
    return weights;
  }

 private:
  const int size_;
  Barrier sync_;
  std::mutex mutex_;
  std::vector<std::vector<float>> parts_;
  std::vector<float> sum_;
  std::vector<char> bytes_;
};

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b,
                 float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(worst, tolerance);
}

TEST(DemoModel, GradientMatchesFiniteDifferences) {
  const ModelShape shape{5, 7};
  std::vector<float> params = InitialParameters(shape, 3);
  const Sample sample = MakeSample(shape, 3, 11);
  std::vector<float> gradient(params.size(), 0.0f);
  AccumulateGradient(shape, params, sample, &gradient);
  auto loss = [&](const std::vector<float>& p) {
    const double error = Predict(shape, p, sample.x) - sample.y;
    return 0.5 * error * error;
  };
  for (size_t i = 0; i < params.size(); ++i) {
    const float h = 1e-3f;
    std::vector<float> up = params, down = params;
    up[i] += h;
    down[i] -= h;
    const double numeric = (loss(up) - loss(down)) / (2 * h);
    EXPECT_NEAR(gradient[i], numeric, 2e-3 + 1e-2 * std::fabs(numeric))
        << "parameter " << i;
  }
}

TEST(DemoModel, SamplesArePureFunctionsOfSeedAndIndex) {
  const ModelShape shape{4, 3};
  EXPECT_EQ(MakeSample(shape, 1, 5).x, MakeSample(shape, 1, 5).x);
  EXPECT_NE(MakeSample(shape, 1, 5).x, MakeSample(shape, 1, 6).x);
  EXPECT_NE(MakeSample(shape, 2, 5).x, MakeSample(shape, 1, 5).x);
}

TEST(DemoTrainer, ShardsCoverTheGlobalBatchOnceForAnyLayout) {
  for (auto [per_device, world, accumulation] :
       {std::tuple{32, 1, 1}, {4, 1, 8}, {4, 8, 1}, {2, 4, 4}}) {
    TrainOptions o = SmallRun(per_device, accumulation);
    std::vector<int> seen(32, 0);
    for (int r = 0; r < world; ++r) {
      for (int m = 0; m < accumulation; ++m) {
        for (uint64_t index : ShardOf(o, world, r, /*step=*/3, m)) {
          ASSERT_GE(index, 96u);
          ASSERT_LT(index, 128u);
          ++seen[index - 96];
        }
      }
    }
    EXPECT_EQ(seen, std::vector<int>(32, 1))
        << per_device << " x " << world << " x " << accumulation;
  }
}

TEST(DemoTrainer, EqualEffectiveBatchesTrainTheSameModelAsTheReference) {
  const std::vector<float> reference = ReferenceTraining(SmallRun(32, 1), 32);
  SingleProcessCollectives single;
  auto one_by_32 = Train(SmallRun(32, 1), single, {});
  auto one_by_4x8 = Train(SmallRun(4, 8), single, {});
  ASSERT_TRUE(one_by_32.ok() && one_by_4x8.ok());
  ExpectClose(one_by_32->params, reference, 5e-8f);
  ExpectClose(one_by_4x8->params, reference, 5e-8f);
  // 8 ranks x 4 x 1: every rank ends with the same weights.
  ThreadGroup eight(8);
  auto ranks = eight.Train(SmallRun(4, 1));
  for (const auto& weights : ranks) ExpectClose(weights, reference, 5e-8f);
  EXPECT_EQ(ranks[0], ranks[7]);  // one all-reduce result, bit for bit
  // And training did something: the weights moved.
  float moved = 0;
  const auto initial = InitialParameters(SmallRun(32, 1).shape, 7);
  for (size_t i = 0; i < initial.size(); ++i) {
    moved = std::max(moved, std::fabs(initial[i] - reference[i]));
  }
  EXPECT_GT(moved, 1e-2f);
}

TEST(DemoTrainer, ADifferentEffectiveBatchTrainsDifferently) {
  SingleProcessCollectives single;
  auto a = Train(SmallRun(32, 1), single, {});
  auto b = Train(SmallRun(16, 1), single, {});
  ASSERT_TRUE(a.ok() && b.ok());
  float differs = 0;
  for (size_t i = 0; i < a->params.size(); ++i) {
    differs = std::max(differs, std::fabs(a->params[i] - b->params[i]));
  }
  EXPECT_GT(differs, 1e-3f);
}

TEST(DemoTrainer, LossFalls) {
  SingleProcessCollectives single;
  TrainOptions o = SmallRun(32, 1);
  o.max_steps = 60;
  std::vector<double> losses;
  TrainHooks hooks;
  hooks.on_step = [&](int64_t, double loss) { losses.push_back(loss); };
  ASSERT_TRUE(Train(o, single, hooks).ok());
  ASSERT_EQ(losses.size(), 60u);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += losses[i], last += losses[50 + i];
  EXPECT_LT(last, 0.7 * first);
}

class DemoCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("trl-ckpt-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DemoCheckpoint, AResumedRunEndsWhereAnUninterruptedOneDoes) {
  SingleProcessCollectives single;
  TrainOptions o = SmallRun(8, 2);
  o.checkpoint_path = dir_ / "checkpoint.bin";
  o.save_steps = 5;
  const auto uninterrupted = Train(SmallRun(8, 2), single, {});
  ASSERT_TRUE(uninterrupted.ok());

  TrainOptions first_part = o;
  first_part.max_steps = 12;  // saved at 5 and 10 and 12
  ASSERT_TRUE(Train(first_part, single, {}).ok());
  auto saved = LoadCheckpoint(o.checkpoint_path);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->step, 12);

  auto resumed = Train(o, single, {});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->resumed_from, 12);
  EXPECT_EQ(resumed->params, uninterrupted->params);  // bit for bit
}

TEST_F(DemoCheckpoint, ACheckpointOfAnotherRunIsRefusedByName) {
  SingleProcessCollectives single;
  TrainOptions o = SmallRun(8, 1);
  o.checkpoint_path = dir_ / "checkpoint.bin";
  ASSERT_TRUE(Train(o, single, {}).ok());
  o.per_device_train_batch_size = 16;  // another effective batch size
  auto refused = Train(o, single, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("effective batch size 8"),
            std::string::npos)
      << refused.status();
}

TEST_F(DemoCheckpoint, CorruptOrTruncatedFilesAreErrorsNotZeros) {
  const std::string path = dir_ / "checkpoint.bin";
  EXPECT_FALSE(LoadCheckpoint(path)->has_value());  // absent: start over
  ASSERT_TRUE(SaveCheckpoint(path, Checkpoint{3, 1, 32, {1.5f, -2.0f}}).ok());
  auto loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->params, (std::vector<float>{1.5f, -2.0f}));

  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_EQ(LoadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
  {
    std::ofstream garbage(path, std::ios::trunc);
    garbage << "not a checkpoint at all";
  }
  EXPECT_EQ(LoadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace trl::worker

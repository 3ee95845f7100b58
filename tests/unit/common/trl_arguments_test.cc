#include "common/trl_arguments.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(TrlArguments, EffectiveBatchFromBothSpellings) {
  auto batch = EffectiveBatchFromArguments(
      {"train.py", "--per_device_train_batch_size", "4",
       "--gradient_accumulation_steps=8", "--lr", "1e-4"},
      16);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->total(), 4 * 16 * 8);
  EXPECT_EQ(batch->Describe(),
            "effective batch size 512 = 4 per device x 16 processes x 8 "
            "gradient accumulation steps");
}

TEST(TrlArguments, AccumulationDefaultsToOneAndTheLastValueWins) {
  auto batch = EffectiveBatchFromArguments(
      {"--per_device_train_batch_size=2", "--per_device_train_batch_size", "3"},
      2);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->total(), 6);
  EXPECT_NE(batch->Describe().find("1 gradient accumulation step"),
            std::string::npos);
}

TEST(TrlArguments, NothingToSayWithoutAUsableBatchSize) {
  EXPECT_FALSE(EffectiveBatchFromArguments({"train.py"}, 2).has_value());
  EXPECT_FALSE(
      EffectiveBatchFromArguments({"--per_device_train_batch_size", "four"}, 2)
          .has_value());
  EXPECT_FALSE(EffectiveBatchFromArguments({"--per_device_train_batch_size"}, 2)
                   .has_value());
  EXPECT_FALSE(
      EffectiveBatchFromArguments({"--per_device_train_batch_size", "4",
                                   "--gradient_accumulation_steps", "0"},
                                  2)
          .has_value());
}

}  // namespace
}  // namespace trl

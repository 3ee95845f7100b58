#include "common/secret_redaction.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(SecretRedactionTest, HidesValuesOfSecretLookingArguments) {
  const std::vector<std::string> argv = {
      "train.py",         "--hub_token", "hf_abc",
      "--api-key=sk-1",   "--lr",        "1e-4",
      "HF_TOKEN=hf_def",  "--PASSWORD",  "p",
      "--secret_file=/x", "--keyboard",  "qwerty",
      "--push_to_hub"};
  const std::vector<std::string> expected = {"train.py",
                                             "--hub_token",
                                             "<redacted>",
                                             "--api-key=<redacted>",
                                             "--lr",
                                             "1e-4",
                                             "HF_TOKEN=<redacted>",
                                             "--PASSWORD",
                                             "<redacted>",
                                             "--secret_file=<redacted>",
                                             "--keyboard",
                                             "<redacted>",
                                             "--push_to_hub"};
  EXPECT_EQ(RedactSecrets(argv), expected);
}

TEST(SecretRedactionTest, AFlagWithoutAValueHidesNothingAfterIt) {
  // `--use_auth_token` as a boolean flag: the next flag stays.
  const std::vector<std::string> argv = {"--use_auth_token", "--lr", "1"};
  EXPECT_EQ(RedactSecrets(argv), argv);
  EXPECT_EQ(RedactSecrets({"--token"}), std::vector<std::string>{"--token"});
}

TEST(SecretRedactionTest, OrdinaryCommandsAreUnchanged) {
  const std::vector<std::string> argv = {"python3",      "-u",  "train.py",
                                         "--output_dir", "out", "--bf16"};
  EXPECT_EQ(RedactSecrets(argv), argv);
}

}  // namespace
}  // namespace trl

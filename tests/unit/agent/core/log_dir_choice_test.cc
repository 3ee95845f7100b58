#include "agent/core/log_dir_choice.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(LogDirChoiceTest, TheAgentsOwnDirectoryWins) {
  const LogDirChoice choice = ChooseLogDir("/mine", "/coordinators");
  EXPECT_EQ(choice.dir, "/mine");
  EXPECT_FALSE(choice.from_coordinator);
  EXPECT_EQ(choice.refused, "");
}

TEST(LogDirChoiceTest, AnAgentWithoutOneTakesTheCoordinators) {
  const LogDirChoice choice = ChooseLogDir("", "/shared/logs");
  EXPECT_EQ(choice.dir, "/shared/logs");
  EXPECT_TRUE(choice.from_coordinator);
  EXPECT_EQ(ChooseLogDir("", "").dir, "");
}

TEST(LogDirChoiceTest, ARelativeOrClimbingPathIsRefusedAndSaidWhy) {
  for (const char* path : {"logs", "/shared/../etc"}) {
    const LogDirChoice choice = ChooseLogDir("", path);
    EXPECT_EQ(choice.dir, "") << path;
    EXPECT_NE(choice.refused.find(path), std::string::npos) << choice.refused;
  }
}

}  // namespace
}  // namespace trl

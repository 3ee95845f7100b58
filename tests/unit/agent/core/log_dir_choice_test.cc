#include "agent/core/log_dir_choice.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(LogDirChoiceTest, TheAgentsOwnDirectoryWins) {
  const LogDirChoice choice = ChooseLogDir("/mine", "/coordinators", false);
  EXPECT_EQ(choice.dir, "/mine");
  EXPECT_FALSE(choice.from_coordinator);
  EXPECT_EQ(choice.refused, "");
}

TEST(LogDirChoiceTest, AnAgentWithoutOneTakesTheCoordinators) {
  const LogDirChoice choice = ChooseLogDir("", "/shared/logs", false);
  EXPECT_EQ(choice.dir, "/shared/logs");
  EXPECT_TRUE(choice.from_coordinator);
  EXPECT_EQ(ChooseLogDir("", "", false).dir, "");
}

TEST(LogDirChoiceTest, ARelativeOrClimbingPathIsRefusedAndSaidWhy) {
  for (const char* path : {"logs", "/shared/../etc"}) {
    const LogDirChoice choice = ChooseLogDir("", path, false);
    EXPECT_EQ(choice.dir, "") << path;
    EXPECT_NE(choice.refused.find(path), std::string::npos) << choice.refused;
  }
}

// Under --worker_user the agent is root: it takes only a directory it was
// given itself (and checked at its start), never one another machine names.
TEST(LogDirChoiceTest, AnAgentOfAnotherUsersWorkersNeverTakesTheCoordinators) {
  const LogDirChoice choice = ChooseLogDir("", "/shared/logs", true);
  EXPECT_EQ(choice.dir, "");
  EXPECT_FALSE(choice.from_coordinator);
  EXPECT_NE(choice.refused.find("not used under --worker_user"),
            std::string::npos)
      << choice.refused;
  EXPECT_EQ(ChooseLogDir("/mine", "/shared/logs", true).dir, "/mine");
}

}  // namespace
}  // namespace trl

#include "common/auth_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace trl {
namespace {

std::string TempDir() {
  const std::string dir =
      testing::TempDir() + "/trl-token-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(AuthTokenTest, ComparesWholeTokens) {
  const std::string token = "0123456789abcdef";
  EXPECT_TRUE(TokensEqual(token, "0123456789abcdef"));
  EXPECT_FALSE(TokensEqual(token, "0123456789abcdee"));  // one byte off
  EXPECT_FALSE(TokensEqual(token, "1123456789abcdef"));
  EXPECT_FALSE(TokensEqual(token, "0123456789abcde"));    // shorter
  EXPECT_FALSE(TokensEqual(token, "0123456789abcdef0"));  // longer
  EXPECT_FALSE(TokensEqual(token, ""));
  EXPECT_FALSE(TokensEqual("", ""));  // an empty token never matches
}

TEST(AuthTokenTest, EnvironmentWinsWithoutAFile) {
  auto token = LoadToken({"", " secret\n", false});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret");
}

TEST(AuthTokenTest, AnEmptyOrWhitespaceTokenIsAnErrorNeverAuthenticationOff) {
  for (const char* value : {" ", "", "\t\n"}) {
    TokenSource source;
    source.environment = value;
    source.environment_set = true;
    auto token = LoadToken(source);
    ASSERT_FALSE(token.ok()) << "TRL_AUTH_TOKEN='" << value << "'";
    EXPECT_NE(token.status().message().find("TRL_AUTH_TOKEN is set but empty"),
              std::string::npos);
  }
  const std::string path = TempDir() + "/blank";
  std::ofstream(path) << "  \n";
  chmod(path.c_str(), 0600);
  auto token = LoadToken({path, "", false});
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("is empty"), std::string::npos);
}

TEST(AuthTokenTest, MissingFileSaysWhatToDo) {
  auto token = LoadToken({TempDir() + "/none", "", false});
  ASSERT_FALSE(token.ok());
  EXPECT_TRUE(absl::IsNotFound(token.status()));
  EXPECT_NE(token.status().message().find("does not exist"), std::string::npos);
}

TEST(AuthTokenTest, FileReadableByOthersIsRefused) {
  const std::string path = TempDir() + "/open";
  std::ofstream(path) << "secret\n";
  chmod(path.c_str(), 0644);
  auto token = LoadToken({path, "", false});
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("readable by others"),
            std::string::npos);
  chmod(path.c_str(), 0600);
  token = LoadToken({path, "", false});
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret");
}

TEST(AuthTokenTest, DefaultFileIsCreatedOnceWithMode0600) {
  const std::string home = TempDir() + "/home";
  std::filesystem::create_directories(home);
  const char* saved = std::getenv("HOME");
  setenv("HOME", home.c_str(), 1);
  auto first = LoadToken({"", "", true});
  auto second = LoadToken({"", "", true});  // does not overwrite
  auto reader = LoadToken({"", "", false});
  if (saved) setenv("HOME", saved, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(*first, *reader);
  struct stat info;
  ASSERT_EQ(stat((home + "/.trl/token").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace trl

// Files another local user may have planted are never trusted or written
// through: links, files of other users or writable by others, job ids that
// are paths in disguise.
#include "common/private_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "coordinator/record/state_file.h"

namespace trl {
namespace {

class PrivateFilesTest : public ::testing::Test {
 protected:
  PrivateFilesTest()
      : dir_(::testing::TempDir() + "/trl-private-" + std::to_string(getpid()) +
             "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~PrivateFilesTest() override { std::filesystem::remove_all(dir_); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  const std::string dir_;
};

TEST_F(PrivateFilesTest, AWriteReplacesAPlantedLinkInsteadOfFollowingIt) {
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious";
  symlink(victim.c_str(), (dir_ + "/state").c_str());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/state", "new").ok());
  EXPECT_EQ(Read(victim), "precious");
  struct stat info;
  ASSERT_EQ(lstat((dir_ + "/state").c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(Read(dir_ + "/state"), "new");
}

TEST_F(PrivateFilesTest, LinksAndFilesOthersMayWriteAreNotTrusted) {
  std::ofstream(dir_ + "/real") << "job_id x\n";
  chmod((dir_ + "/real").c_str(), 0600);
  symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str());
  auto read = ReadPrivateFile(dir_ + "/link", 1024);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("symbolic link"), std::string::npos);

  chmod((dir_ + "/real").c_str(), 0666);
  read = ReadPrivateFile(dir_ + "/real", 1024);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("others may write it"),
            std::string::npos);

  chmod((dir_ + "/real").c_str(), 0600);
  EXPECT_TRUE(ReadPrivateFile(dir_ + "/real", 1024).ok());
  EXPECT_FALSE(ReadPrivateFile(dir_ + "/real", 4).ok());  // too long
  EXPECT_TRUE(absl::IsNotFound(ReadPrivateFile(dir_ + "/none", 9).status()));
}

TEST_F(PrivateFilesTest, AFileOfAnotherUserIsNotTrusted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file away";
  std::ofstream(dir_ + "/theirs") << "job_id x\n";
  chmod((dir_ + "/theirs").c_str(), 0600);
  ASSERT_EQ(chown((dir_ + "/theirs").c_str(), 65534, 65534), 0);
  auto read = ReadPrivateFile(dir_ + "/theirs", 1024);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("belongs to user 65534"),
            std::string::npos)
      << read.status();
}

TEST_F(PrivateFilesTest, APrivateDirectoryOfAnotherUserIsRefused) {
  const std::string open_dir = dir_ + "/open";
  mkdir(open_dir.c_str(), 0777);
  chmod(open_dir.c_str(), 0777);
  auto made = EnsurePrivateDirectory(open_dir);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("chmod 700"), std::string::npos);
  const std::string link = dir_ + "/linked";
  symlink(dir_.c_str(), link.c_str());
  EXPECT_FALSE(EnsurePrivateDirectory(link).ok());
  EXPECT_TRUE(EnsurePrivateDirectory(dir_ + "/fresh").ok());
  struct stat info;
  ASSERT_EQ(stat((dir_ + "/fresh").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
}

TEST(JobIdTest, PathsInDisguiseAreNotJobIds) {
  for (const char* good : {"trl-1a2b3c4d", "job_1.2", "A-Z"}) {
    EXPECT_TRUE(IsValidJobId(good)) << good;
  }
  for (const char* bad :
       {"", ".", "..", "../../../tmp/x", "a/b", "a b", "job\n", "x;rm"}) {
    EXPECT_FALSE(IsValidJobId(bad)) << bad;
  }
  EXPECT_FALSE(IsValidJobId(std::string(129, 'a')));
}

TEST_F(PrivateFilesTest, AStateFileWithAPathForAJobIdIsRefused) {
  const std::string path = dir_ + "/planted.state";
  std::ofstream(path) << "job_id ../../../tmp/attacker\ngeneration 3\n"
                         "restarts_used 0\nidentity abc\n";
  chmod(path.c_str(), 0600);
  auto loaded = LoadJobRecord(path);
  EXPECT_FALSE(loaded.ok());
}

}  // namespace
}  // namespace trl

#include "worker/heartbeat.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace trl::worker {
namespace {

// The file's modification time, in nanoseconds (0 when it is missing).
int64_t Touched(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return 0;
  return int64_t{info.st_mtim.tv_sec} * 1000000000 + info.st_mtim.tv_nsec;
}

class HeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("trl-heartbeat-test-" + std::to_string(getpid())))
                .string();
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(HeartbeatTest, BeatCreatesTheFileThenMovesItsTimeForward) {
  const Heartbeat heartbeat(path_);
  ASSERT_EQ(Touched(path_), 0);
  ASSERT_TRUE(heartbeat.Beat());
  const int64_t first = Touched(path_);
  EXPECT_GT(first, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(heartbeat.Beat());
  EXPECT_GT(Touched(path_), first);
}

TEST_F(HeartbeatTest, WithoutAFileBeatDoesNothingAndAnUnwritableOneFails) {
  EXPECT_TRUE(Heartbeat("").Beat());
  EXPECT_FALSE(Heartbeat("/nonexistent-dir/heartbeat").Beat());
}

TEST_F(HeartbeatTest, TheThreadKeepsTheFileFreshUntilItEnds) {
  int64_t last = 0;
  {
    HeartbeatThread thread(path_, std::chrono::milliseconds(20));
    // A beat at once (allow a loaded machine a second to run the thread).
    for (int i = 0; i < 100 && Touched(path_) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int64_t early = Touched(path_);
    EXPECT_GT(early, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    last = Touched(path_);
    EXPECT_GT(last, early);  // and more since
  }
  // Joined: no beat after its end.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_LE(Touched(path_) - last, int64_t{30} * 1000000);
}

}  // namespace
}  // namespace trl::worker

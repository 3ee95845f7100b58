// The disk check's verdict (agent/health/node_health.h), as the operator
// reads it in ps, the page and the events, and its bound in time.
#include "agent/health/node_health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace trl {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

TEST(DiskSpaceProblemTest, EnoughSpaceIsNoProblem) {
  EXPECT_EQ(DiskSpaceProblem("/logs", 64 * kMiB, 64 * kMiB), "");
}

TEST(DiskSpaceProblemTest, SaysTheFlagAsGiven) {
  EXPECT_EQ(DiskSpaceProblem("/logs", 10 * kMiB + 5, 64 * kMiB),
            "disk: /logs has 10 MiB free, less than --min_free_disk_mb 64");
  EXPECT_EQ(DiskSpaceProblem("/logs", 1024, MinFreeBytes(0.03)),
            "disk: /logs has 0 MiB free, less than --min_free_disk_mb 0.03");
  EXPECT_EQ(DiskSpaceProblem("/logs", 0, uint64_t{1} << 60),
            "disk: /logs has 0 MiB free, less than --min_free_disk_mb "
            "1099511627776");
}

TEST(DiskSpaceProblemTest, TheFlagReadsBackAsGiven) {
  for (const double mb : {0.03, 0.5, 1.25, 64.0, 0.001, 123.456}) {
    const std::string said = MinFreeDiskMbFlag(MinFreeBytes(mb));
    EXPECT_EQ(std::strtod(said.c_str(), nullptr), mb) << said;
  }
  EXPECT_EQ(MinFreeDiskMbFlag(MinFreeBytes(2000000)), "2000000");
}

// A statvfs that does not return until the test lets it (a hung NFS mount).
std::atomic<bool> stat_released{false};
std::atomic<int> stat_calls{0};
int HungStat(const char*, struct statvfs* fs) {
  ++stat_calls;
  while (!stat_released) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *fs = {};
  fs->f_bavail = 1000;
  fs->f_frsize = 1024 * 1024;
  return 0;
}

TEST(DiskCheckTest, AStatvfsThatHangsIsUnhealthyWithinTheBoundAndStartedOnce) {
  HealthCheckOptions options;
  options.directories = {"/hung-nfs/logs"};
  options.min_free_bytes = 64 * kMiB;
  options.disk_timeout = std::chrono::milliseconds(100);
  options.statvfs_function = &HungStat;
  for (int check = 0; check < 3; ++check) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(CheckNodeHealth(options),
              "disk: the free space of /hung-nfs/logs did not come within "
              "0.1 s (statvfs is stuck: a hung network file system?)");
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(2));
  }
  EXPECT_EQ(stat_calls, 1);  // one stuck helper, not one per check
  // The mount comes back: the stuck read ends and a later check reads again.
  stat_released = true;
  std::string verdict = "not read";
  for (int check = 0; check < 100 && !verdict.empty(); ++check) {
    verdict = CheckNodeHealth(options);
  }
  EXPECT_EQ(verdict, "");
}

}  // namespace
}  // namespace trl

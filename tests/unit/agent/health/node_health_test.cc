// The disk check's verdict (agent/health/node_health.h), as the operator
// reads it in ps, the page and the events.
#include "agent/health/node_health.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

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

}  // namespace
}  // namespace trl

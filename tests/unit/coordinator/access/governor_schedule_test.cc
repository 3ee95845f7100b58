// When the connection governor looks at the sockets: only when the
// namespace accepted a connection, a port was over a cap, or the idle
// interval passed. Fake time.
#include "coordinator/access/governor_schedule.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;

class GovernorScheduleTest : public ::testing::Test {
 protected:
  GovernorSchedule schedule_{milliseconds(2000)};
  GovernorSchedule::Clock::time_point t0_{};
};

TEST_F(GovernorScheduleTest, TheFirstLookIsDue) {
  EXPECT_TRUE(schedule_.Due(t0_, 7));
}

TEST_F(GovernorScheduleTest, NothingAcceptedMeansNoLookUntilTheIdleInterval) {
  schedule_.Looked(t0_, 7, false);
  EXPECT_FALSE(schedule_.Due(t0_ + milliseconds(200), 7));
  EXPECT_FALSE(schedule_.Due(t0_ + milliseconds(1999), 7));
  EXPECT_TRUE(schedule_.Due(t0_ + milliseconds(2000), 7));
}

TEST_F(GovernorScheduleTest, AnAcceptedConnectionMakesALookDue) {
  schedule_.Looked(t0_, 7, false);
  EXPECT_TRUE(schedule_.Due(t0_ + milliseconds(200), 8));
  schedule_.Looked(t0_ + milliseconds(200), 8, false);
  EXPECT_FALSE(schedule_.Due(t0_ + milliseconds(400), 8));
}

TEST_F(GovernorScheduleTest, APortOverACapIsLookedAtEveryTime) {
  // Its protected connections may stop being protected (an agent left)
  // without any new connection.
  schedule_.Looked(t0_, 7, true);
  EXPECT_TRUE(schedule_.Due(t0_ + milliseconds(20), 7));
  schedule_.Looked(t0_ + milliseconds(20), 7, false);
  EXPECT_FALSE(schedule_.Due(t0_ + milliseconds(40), 7));
}

TEST_F(GovernorScheduleTest, AnUnreadableCounterMeansLookEveryTime) {
  schedule_.Looked(t0_, std::nullopt, false);
  EXPECT_TRUE(schedule_.Due(t0_ + milliseconds(200), std::nullopt));
  // And once it reads again, a change from "unknown" is a reason too.
  EXPECT_TRUE(schedule_.Due(t0_ + milliseconds(200), 7));
}

}  // namespace
}  // namespace trl

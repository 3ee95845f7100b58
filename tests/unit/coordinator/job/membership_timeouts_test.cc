// MembershipTimeouts (job/membership_timeouts.h) on a made-up clock: the
// owner's own stalls, silent machines, a registration or rejoin that came
// too late, and when the next of these falls due.
#include "coordinator/job/membership_timeouts.h"

#include <gtest/gtest.h>

#include "tests/lib/job_fixtures.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MembershipTimeoutsTest : public testing::Test {
 protected:
  const TimePoint start_ = TimePoint() + seconds(1000);

  // 2 machines of 1 worker, which must register within 30 s, ticked
  // every 100 ms.
  static JobSettings Settings() {
    JobSettings settings = TestJobSettings(2);
    settings.local_world_size = 1;
    settings.registration_timeout = seconds(30);
    settings.tick_interval = milliseconds(100);
    return settings;
  }
  static AgentInfo Agent(int m) { return TestAgent(m, /*workers=*/1); }
};

TEST_F(MembershipTimeoutsTest, ATickLateByMoreThanTheSlackIsTheOwnersStall) {
  MembershipTimeouts timeouts(Settings(), start_);
  EXPECT_FALSE(timeouts.OwnStall(start_));  // the first tick: nothing before
  EXPECT_FALSE(timeouts.OwnStall(start_ + milliseconds(100)));
  // 250 ms late at most is a loaded machine, not a stall.
  EXPECT_FALSE(timeouts.OwnStall(start_ + milliseconds(450)));
  const auto late = timeouts.OwnStall(start_ + milliseconds(1450));
  ASSERT_TRUE(late);
  EXPECT_EQ(*late, milliseconds(900));
  EXPECT_EQ(timeouts.OwnStall(start_ + milliseconds(2550)), milliseconds(1000));
  EXPECT_EQ(timeouts.stalls_excused(), milliseconds(1900));
}

TEST_F(MembershipTimeoutsTest, AMachineSilentForLongerThanTheTimeoutIsNamed) {
  JobMembership membership(Settings(), start_);
  MembershipTimeouts timeouts(Settings(), start_);
  ASSERT_TRUE(
      membership.Register(Agent(0), JobPhase::kWaitingForAgents, start_).ok());
  ASSERT_TRUE(
      membership
          .Register(Agent(1), JobPhase::kWaitingForAgents, start_ + seconds(1))
          .ok());
  EXPECT_TRUE(timeouts.Silent(membership.machines(), start_ + seconds(3))
                  .empty());  // silence of the timeout is allowed
  const auto silent =
      timeouts.Silent(membership.machines(), start_ + milliseconds(3500));
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, 0);
  EXPECT_EQ(silent[0].second, "sent no heartbeat for 3.5 s");
}

TEST_F(MembershipTimeoutsTest, AMachineThatDidNotRegisterInTimeFailsTheJob) {
  JobMembership membership(Settings(), start_);
  MembershipTimeouts timeouts(Settings(), start_);
  ASSERT_TRUE(
      membership.Register(Agent(0), JobPhase::kWaitingForAgents, start_).ok());
  const JobPhase waiting = JobPhase::kWaitingForAgents;
  EXPECT_EQ(timeouts.Next(membership, waiting, start_),
            start_ + seconds(30) + MembershipTimeouts::kPast);
  EXPECT_FALSE(timeouts.Overdue(membership, waiting, -1, start_ + seconds(30)));
  const auto failure =
      timeouts.Overdue(membership, waiting, -1, start_ + seconds(31));
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->reason, "machine(s) 1 did not register within 30 s");
  EXPECT_EQ(failure->machine_rank, -1);
  // Only while the job waits for its agents.
  EXPECT_FALSE(timeouts.Overdue(membership, JobPhase::kRunning, -1,
                                start_ + seconds(31)));
}

TEST_F(MembershipTimeoutsTest, ALostMachineHasTheRejoinTimeoutFromTheRestart) {
  JobMembership membership(Settings(), start_);
  MembershipTimeouts timeouts(Settings(), start_);
  const JobPhase waiting = JobPhase::kWaitingForAgents;
  ASSERT_TRUE(membership.Register(Agent(0), waiting, start_).ok());
  ASSERT_TRUE(membership.Register(Agent(1), waiting, start_).ok());
  membership.Place();
  const TimePoint lost = start_ + seconds(10);
  ASSERT_NE(membership.Lose(1, "disconnected", JobPhase::kRunning, lost),
            nullptr);
  timeouts.AwaitRejoins(lost);
  const JobPhase restarting = JobPhase::kRestarting;
  EXPECT_FALSE(timeouts.Overdue(membership, restarting, 0, lost + seconds(60)));
  const auto failure =
      timeouts.Overdue(membership, restarting, 0, lost + seconds(61));
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->machine_rank, 1);
  EXPECT_EQ(failure->hostname, "node1");
  EXPECT_EQ(failure->reason,
            "machine 1 (host node1) disconnected and did not rejoin within "
            "60 s");
  // The rejoin deadline is among those Next considers while restarting.
  EXPECT_EQ(timeouts.Next(membership, restarting, lost + seconds(59)),
            lost + seconds(60) + MembershipTimeouts::kPast);
}

}  // namespace
}  // namespace trl

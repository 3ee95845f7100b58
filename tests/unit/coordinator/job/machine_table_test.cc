// MachineTable alone: heartbeat order and silence, the coordinator's own
// stalls, the lease-end and command-check caches kept true as machines come
// and go, vacancies.
#include "coordinator/job/machine_table.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
const TimePoint kStart = TimePoint{} + seconds(1000);

NodeRecord Node(TimePoint heard, bool command_checked = true) {
  NodeRecord node;
  node.info.hostname = "h";
  node.last_heartbeat = heard;
  node.command_checked = command_checked;
  return node;
}

TEST(MachineTableTest, TheSilentAreFoundMostSilentFirstAndAHeartbeatMovesOne) {
  MachineTable machines;
  machines.Add(0, Node(kStart));
  machines.Add(1, Node(kStart + seconds(1)));
  machines.Add(2, Node(kStart + seconds(2)));
  machines.Heard(0, kStart + seconds(3));
  const TimePoint now = kStart + seconds(5);
  EXPECT_EQ(machines.SilentFor(seconds(3), now), (std::vector<int>{1}));
  EXPECT_EQ(machines.SilentFor(seconds(2), now), (std::vector<int>{1, 2}));
  // Silence of exactly the timeout is allowed.
  EXPECT_EQ(machines.SilentFor(seconds(4), now), (std::vector<int>{}));
  EXPECT_EQ(*machines.EarliestHeartbeat(), kStart + seconds(1));
  machines.Disconnect(1, /*vacant=*/true);
  EXPECT_EQ(machines.connected(), 2);
  EXPECT_EQ(machines.vacant(), (std::set<int>{1}));
  EXPECT_EQ(machines.SilentFor(seconds(2), now), (std::vector<int>{2}));
  machines.Heard(1, now);  // a disconnected machine is not heard
  EXPECT_EQ(machines.at(1).last_heartbeat, kStart + seconds(1));
}

TEST(MachineTableTest, AReconnectedMachineTakesItsPlaceByItsLastHeartbeat) {
  MachineTable machines;
  machines.Add(0, Node(kStart));
  machines.Add(1, Node(kStart + seconds(4)));
  machines.AddUnregistered(2, TimePoint()).last_heartbeat = kStart + seconds(2);
  machines.Reconnect(2);
  EXPECT_EQ(machines.connected(), 3);
  EXPECT_EQ(machines.SilentFor(seconds(1), kStart + seconds(5)),
            (std::vector<int>{0, 2}));
}

TEST(MachineTableTest, AStallIsExcusedUpToNowAndTheOrderHolds) {
  MachineTable machines;
  machines.Add(0, Node(kStart));
  machines.Add(1, Node(kStart + seconds(2)));
  machines.ExcuseStall(seconds(3), kStart + seconds(4));
  EXPECT_EQ(machines.at(0).last_heartbeat, kStart + seconds(3));
  EXPECT_EQ(machines.at(1).last_heartbeat, kStart + seconds(4));  // capped
  EXPECT_EQ(*machines.EarliestHeartbeat(), kStart + seconds(3));
}

TEST(MachineTableTest, TheLatestLeaseEndIsFoundAgainWhenOneChangesOrGoes) {
  MachineTable machines;
  machines.Add(0, Node(kStart));
  machines.Add(1, Node(kStart));
  EXPECT_EQ(machines.ReplacementsAllowedAt(), TimePoint());
  machines.OldAgentMayRunUntil(1, kStart + seconds(10));
  EXPECT_EQ(machines.ReplacementsAllowedAt(), kStart + seconds(10));
  machines.OldAgentMayRunUntil(1, kStart + seconds(5));  // never earlier
  EXPECT_EQ(machines.ReplacementsAllowedAt(), kStart + seconds(10));
  machines.Erase(1);
  EXPECT_EQ(machines.ReplacementsAllowedAt(), TimePoint());
  machines.AddUnregistered(3, kStart + seconds(7));
  EXPECT_EQ(machines.ReplacementsAllowedAt(), kStart + seconds(7));
  machines.Add(3, Node(kStart));  // a record in its place
  EXPECT_EQ(machines.ReplacementsAllowedAt(), TimePoint());
}

TEST(MachineTableTest, ACommandToCheckAnywhereHoldsAllCommandsChecked) {
  MachineTable machines;
  machines.Add(0, Node(kStart));
  machines.Add(1, Node(kStart));
  EXPECT_TRUE(machines.AllCommandsChecked(2));
  machines.Disconnect(0, /*vacant=*/true);
  machines.at(0).command_checked = false;  // a new agent, not checked yet
  machines.Reconnect(0);
  EXPECT_FALSE(machines.AllCommandsChecked(2));
  EXPECT_EQ(machines.CountReady(), 1);
  machines.at(0).command_checked = true;
  EXPECT_TRUE(machines.AllCommandsChecked(2));
  machines.Add(1, Node(kStart, /*command_checked=*/false));
  EXPECT_FALSE(machines.AllCommandsChecked(2));
}

}  // namespace
}  // namespace trl

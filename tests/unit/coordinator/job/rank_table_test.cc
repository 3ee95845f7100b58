// RankTable alone: ranks assigned per machine, a report only for its own
// machine's ranks, live and started counts kept as ranks start, end and are
// lost.
#include "coordinator/job/rank_table.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

TEST(RankTableTest, AReportFindsOnlyItsOwnMachinesRanks) {
  RankTable ranks;
  ranks.Assign({{0, 0, 2, 0}, {3, 2, 2, 1}});
  ASSERT_EQ(ranks.size(), 4);
  EXPECT_EQ(ranks.Find(3, 2, 2, 1)->rank, 3);
  EXPECT_EQ(ranks.Find(3, 2, 2, 2), nullptr);  // past its local ranks
  EXPECT_EQ(ranks.Find(3, 0, 2, 0), nullptr);  // machine 0's rank 0
  EXPECT_EQ(ranks.Find(0, 0, 2, -1), nullptr);
}

TEST(RankTableTest, LiveAndStartedCountsFollowTheRanks) {
  RankTable ranks;
  ranks.Assign({{0, 0, 2, 0}, {1, 2, 2, 1}});
  EXPECT_EQ(ranks.live(), 4);
  EXPECT_FALSE(ranks.Started(*ranks.Find(0, 0, 2, 0), 100));
  EXPECT_FALSE(ranks.Started(*ranks.Find(0, 0, 2, 1), 101));
  EXPECT_FALSE(ranks.Started(*ranks.Find(1, 2, 2, 0), 102));
  EXPECT_TRUE(ranks.Started(*ranks.Find(1, 2, 2, 1), 103));
  ranks.Ended(*ranks.Find(0, 0, 2, 0), RankState::kSucceeded, WorkerExit{});
  EXPECT_EQ(ranks.live(), 3);
  // Machine 0's one live rank is lost with it; the one that ended is not.
  EXPECT_EQ(ranks.LoseMachine(0, 0, 2), 1);
  EXPECT_EQ(ranks.all()[0].state, RankState::kSucceeded);
  EXPECT_EQ(ranks.all()[1].state, RankState::kLost);
  EXPECT_EQ(ranks.live(), 2);
  EXPECT_EQ(ranks.LoseMachine(0, 0, 2), 0);
  ranks.Assign({{0, 0, 1, 0}});
  EXPECT_EQ(ranks.live(), 1);
  EXPECT_TRUE(ranks.Started(*ranks.Find(0, 0, 1, 0), 200));
}

}  // namespace
}  // namespace trl

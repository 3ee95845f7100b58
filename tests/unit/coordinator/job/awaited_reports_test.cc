// AwaitedReports alone: a machine lost after every other rank exited 0
// reports its workers when it is back; the reports, or the deadline,
// decide the generation.
#include "coordinator/job/awaited_reports.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Kind = AwaitedReports::Verdict::Kind;
const TimePoint kStart = TimePoint{} + seconds(1000);

// Machines 0 and 1, two ranks each, in generation 3; both lost.
struct Fixture {
  MachineTable machines;
  RankTable ranks;
  AwaitedReports awaited;
  Fixture() {
    for (int m = 0; m < 2; ++m) {
      NodeRecord node;
      node.info.local_world_size = 2;
      node.rank_offset = 2 * m;
      node.lost_reason = "sent no heartbeat for 3.0 s";
      machines.Add(m, node);
      machines.Disconnect(m, /*vacant=*/true);
    }
    ranks.Assign({{0, 0, 2, 0}, {1, 2, 2, 1}});
    awaited.Await({0, 1}, kStart + seconds(10));
  }
  // Machine `m` is back with these exit codes of generation `generation`.
  void Back(int m, std::map<int, int> codes, int64_t generation = 3) {
    NodeRecord& node = machines.at(m);
    node.info.report_generation = generation;
    for (const auto& [local, code] : codes) {
      node.info.reported_exits[local].exit_code = code;
    }
    machines.Reconnect(m);
  }
  AwaitedReports::Verdict Settle(TimePoint now) {
    return awaited.Settle(machines, ranks, 3, seconds(10), now);
  }
};

TEST(AwaitedReportsTest, EveryReportOfZeroSucceedsAndNoneBeforeAll) {
  Fixture f;
  EXPECT_EQ(f.Settle(kStart).kind, Kind::kWaiting);
  f.Back(0, {{0, 0}, {1, 0}});
  EXPECT_EQ(f.Settle(kStart).kind, Kind::kWaiting);
  EXPECT_EQ(f.ranks.all()[1].state, RankState::kSucceeded);
  f.Back(1, {{0, 0}, {1, 0}});
  EXPECT_EQ(f.Settle(kStart).kind, Kind::kAllSucceeded);
  EXPECT_TRUE(f.awaited.empty());
}

TEST(AwaitedReportsTest, AFailedWorkerOrAMissingExitFailsTheGeneration) {
  Fixture f;
  f.Back(1, {{0, 0}, {1, 7}});
  AwaitedReports::Verdict verdict = f.Settle(kStart);
  ASSERT_EQ(verdict.kind, Kind::kRankFailed);
  EXPECT_EQ(verdict.rank->rank, 3);
  EXPECT_EQ(verdict.rank->exit.exit_code, 7);
  EXPECT_EQ(verdict.rank->state, RankState::kFailed);
  Fixture g;
  g.Back(0, {{0, 0}});  // one exit of two
  verdict = g.Settle(kStart);
  ASSERT_EQ(verdict.kind, Kind::kMachineFailed);
  EXPECT_EQ(verdict.machine_rank, 0);
  Fixture h;
  h.Back(0, {{0, 0}, {1, 0}}, /*generation=*/2);  // another generation's
  EXPECT_EQ(h.Settle(kStart).kind, Kind::kMachineFailed);
}

TEST(AwaitedReportsTest, AMachineThatNeverComesFailsAtTheFirstDeadline) {
  Fixture f;
  f.awaited.Await({1}, kStart + seconds(60));  // the first deadline holds
  EXPECT_EQ(f.awaited.deadline(), kStart + seconds(10));
  f.Back(0, {{0, 0}, {1, 0}});
  EXPECT_EQ(f.Settle(kStart + seconds(10)).kind, Kind::kWaiting);
  const AwaitedReports::Verdict late = f.Settle(kStart + seconds(11));
  ASSERT_EQ(late.kind, Kind::kMachineFailed);
  EXPECT_EQ(late.machine_rank, 1);
  EXPECT_EQ(late.why,
            "sent no heartbeat for 3.0 s and did not come back within 10 s "
            "to report its workers");
}

}  // namespace
}  // namespace trl

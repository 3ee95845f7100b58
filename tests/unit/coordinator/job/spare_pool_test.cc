// SparePool alone: keys in the order spares came, the cap, which spare is
// ready first, silence and the coordinator's own stalls.
#include "coordinator/job/spare_pool.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
const TimePoint kStart = TimePoint{} + seconds(1000);

AgentInfo Spare(const std::string& host) {
  AgentInfo agent;
  agent.hostname = host;
  agent.spare = true;
  agent.machine_rank = 7;
  agent.config_fingerprint["num_machines"] = "2";
  return agent;
}

TEST(SparePoolTest, KeysCountDownInTheOrderSparesCameAndTheCapHolds) {
  SparePool pool(2);
  ASSERT_EQ(*pool.Admit(Spare("a"), kStart), -1);
  ASSERT_EQ(*pool.Admit(Spare("b"), kStart), -2);
  const auto third = pool.Admit(Spare("c"), kStart);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "this job takes at most 2 spares (--max_spares), and has as many");
  EXPECT_EQ(pool.Add(Spare("d"), kStart), -3);  // a demoted machine: no cap
  EXPECT_EQ(pool.size(), 3u);
  const SpareRecord& a = pool.all().at(-1);
  EXPECT_EQ(a.info.machine_rank, -1);  // nothing of its claim is kept
  EXPECT_TRUE(a.info.config_fingerprint.empty());
}

TEST(SparePoolTest, TheFirstReadySpareIsTakenFirst) {
  SparePool pool(4);
  CordonList cordons(1, seconds(60));
  AgentInfo checks = Spare("a");
  checks.checks_command = true;  // not ready until its command is checked
  ASSERT_TRUE(pool.Admit(checks, kStart).ok());
  ASSERT_TRUE(pool.Admit(Spare("b"), kStart).ok());
  ASSERT_TRUE(pool.Admit(Spare("c"), kStart).ok());
  EXPECT_EQ(pool.NextReady(cordons), -2);
  cordons.NoteFailure("b", "x", kStart);
  EXPECT_EQ(pool.NextReady(cordons), -3);
  pool.Find(-1)->command_checked = true;
  EXPECT_EQ(pool.NextReady(cordons), -1);
  pool.Find(-1)->unusable = "python3: not found";
  EXPECT_EQ(pool.NextReady(cordons), -3);
  const SpareRecord taken = pool.Take(-3);
  EXPECT_EQ(taken.info.hostname, "c");
  EXPECT_EQ(pool.NextReady(cordons), std::nullopt);
  EXPECT_EQ(pool.Find(-3), nullptr);
}

TEST(SparePoolTest, SilentSparesAreDroppedAndOwnStallsForgiven) {
  SparePool pool(4);
  ASSERT_TRUE(pool.Admit(Spare("a"), kStart).ok());
  ASSERT_TRUE(pool.Admit(Spare("b"), kStart).ok());
  pool.Heard(-2, kStart + seconds(2));
  EXPECT_TRUE(pool.DropSilent(seconds(3), kStart + seconds(3)).empty());
  // The coordinator itself stalled 2 s: both are heard 2 s later.
  pool.ExcuseStall(seconds(2), kStart + seconds(4));
  EXPECT_EQ(pool.all().at(-1).last_heartbeat, kStart + seconds(2));
  EXPECT_EQ(pool.all().at(-2).last_heartbeat, kStart + seconds(4));  // capped
  EXPECT_EQ(pool.DropSilent(seconds(3), kStart + seconds(5) + milliseconds(1)),
            std::vector<int>{-1});
  EXPECT_TRUE(pool.DropSilent(milliseconds(0), kStart + seconds(100)).empty());
  EXPECT_EQ(pool.size(), 1u);
}

}  // namespace
}  // namespace trl

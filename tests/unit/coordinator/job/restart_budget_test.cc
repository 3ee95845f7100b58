// RestartBudget alone: what a failure means for the job, the backoff before
// each restart, and the free restarts after a shortage of resources.
#include "coordinator/job/restart_budget.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
const TimePoint kStart = TimePoint{} + seconds(1000);

RestartPolicy Policy(int max_restarts) {
  RestartPolicy policy;
  policy.max_restarts = max_restarts;
  policy.initial_backoff = milliseconds(100);
  policy.max_backoff = milliseconds(1000);
  policy.no_restart_exit_codes = {3};
  return policy;
}

FailureRecord WorkerFailed(int exit_code, bool out_of_resources = false) {
  FailureRecord failure;
  failure.rank = 0;
  failure.exit.exit_code = exit_code;
  failure.exit.out_of_resources = out_of_resources;
  failure.reason = "rank 0 failed";
  return failure;
}

TEST(RestartBudgetTest, RestartsUntilTheBudgetIsSpentWithGrowingBackoff) {
  RestartBudget budget(Policy(3));
  EXPECT_FALSE(budget.Judge(WorkerFailed(1), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.used(), 1);
  EXPECT_EQ(budget.not_before(), kStart);  // the first: at once
  EXPECT_FALSE(budget.Judge(WorkerFailed(1), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(100));
  EXPECT_FALSE(budget.Judge(WorkerFailed(1), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(200));
  const std::optional<JobOutcome> end = budget.Judge(WorkerFailed(1), 1);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->phase, JobPhase::kFailed);
  EXPECT_EQ(end->summary, "rank 0 failed (all 3 restarts used)");
}

TEST(RestartBudgetTest, AnExitCodeNotWorthARestartEndsTheJobAtOnce) {
  RestartBudget budget(Policy(5));
  const std::optional<JobOutcome> end = budget.Judge(WorkerFailed(3), 3);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->summary,
            "rank 0 failed (exit code 3 is marked as not worth a restart)");
}

TEST(RestartBudgetTest, AShortageRestartsFreeFiveTimesInARowThenSpends) {
  RestartBudget budget(Policy(0));
  for (int i = 1; i <= 5; ++i) {
    EXPECT_FALSE(budget.Judge(WorkerFailed(1, /*out_of_resources=*/true), 1));
    budget.Restart(kStart);
    EXPECT_EQ(budget.used(), 0);
  }
  // Backed off from the first retry: 100, 200, 400, 800, 1000 (the cap).
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(1000));
  EXPECT_TRUE(budget.Judge(WorkerFailed(1, /*out_of_resources=*/true), 1));
  // A generation that started counts the free restarts from zero again.
  budget.GenerationStarted();
  EXPECT_FALSE(budget.Judge(WorkerFailed(1, /*out_of_resources=*/true), 1));
}

TEST(RestartBudgetTest, AShortageIsRetriedAfterABackoffAndSoIsWhatFollowsIt) {
  RestartBudget budget(Policy(3));
  EXPECT_FALSE(budget.Judge(WorkerFailed(1, /*out_of_resources=*/true), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(100));
  EXPECT_FALSE(budget.Judge(WorkerFailed(1, /*out_of_resources=*/true), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(200));
  // A worker's own failure after two shortage retries: the job's first
  // counted restart, but its third in a row.
  EXPECT_FALSE(budget.Judge(WorkerFailed(1), 1));
  budget.Restart(kStart);
  EXPECT_EQ(budget.used(), 1);
  EXPECT_EQ(budget.not_before(), kStart + milliseconds(400));
}

}  // namespace
}  // namespace trl

#include "coordinator/owner/waiting_report.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WaitingReportTest, SaysEveryIntervalWhoIsAwaitedAndWhatToRun) {
  WaitingReport report(seconds(15),
                       "trl-agent --config_file c.yaml "
                       "--machine_rank",
                       seconds(900));
  const TimePoint start{};
  EXPECT_FALSE(report.Due(true, {1}, 2, 2, start));
  EXPECT_FALSE(report.Due(true, {1}, 2, 2, start + seconds(14)));
  EXPECT_EQ(report.Due(true, {1}, 2, 2, start + seconds(15)),
            "still waiting for machine 1 of 2 after 15 s; the wait ends in "
            "885 s (--rdzv_timeout). On its host, run: trl-agent "
            "--config_file c.yaml --machine_rank 1");
  EXPECT_FALSE(report.Due(true, {1}, 2, 2, start + seconds(16)));
  EXPECT_EQ(report.Due(true, {1, 3}, 2, 4, start + seconds(30)),
            "still waiting for machines 1, 3 of 4 (2 needed to start) after "
            "30 s; the wait ends in 870 s (--rdzv_timeout). On each one's "
            "host, run: trl-agent --config_file c.yaml --machine_rank N");
}

TEST(WaitingReportTest, NothingOnceTheJobRunsOrWhenTurnedOff) {
  WaitingReport report(seconds(1), "trl-agent --machine_rank", seconds(900));
  const TimePoint start{};
  EXPECT_FALSE(report.Due(true, {1}, 2, 2, start));
  EXPECT_FALSE(report.Due(false, {1}, 2, 2, start + seconds(5)));
  // Waiting again (a resumed job's machines): counted from then.
  EXPECT_FALSE(report.Due(true, {1}, 2, 2, start + seconds(6)));
  EXPECT_TRUE(report.Due(true, {1}, 2, 2, start + seconds(7)));
  EXPECT_FALSE(report.Due(true, {}, 2, 2, start + seconds(9)));
  WaitingReport off(milliseconds(0), "trl-agent --machine_rank", seconds(900));
  EXPECT_FALSE(off.Due(true, {1}, 2, 2, start));
  EXPECT_FALSE(off.Due(true, {1}, 2, 2, start + seconds(100)));
}

TEST(WaitingReportTest, TheCommandIsHowTheJobWasStarted) {
  LaunchOptions launch;
  AccelerateConfig config;
  config.num_machines = 2;
  config.num_processes = 4;
  config.main_process_ip = "10.0.0.1";
  config.main_process_port = 29500;
  EXPECT_EQ(AgentCommandFor(launch, config),
            "trl-agent --num_machines 2 --num_processes 4 --main_process_ip "
            "10.0.0.1 --main_process_port 29500 --machine_rank");
  launch.config_file = "multi_node.yaml";
  EXPECT_EQ(AgentCommandFor(launch, config),
            "trl-agent --config_file multi_node.yaml --main_process_ip "
            "10.0.0.1 --main_process_port 29500 --machine_rank");
}

}  // namespace
}  // namespace trl

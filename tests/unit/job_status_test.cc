#include "coordinator/job_status.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

using std::chrono::seconds;

TEST(JobStatusTest, DescribesJobNodesRanksAndFailures) {
  TimePoint now = TimePoint() + seconds(100);
  JobSettings settings;
  settings.job_id = "job-7";
  settings.num_machines = 1;
  settings.command = {"python3", "-u", "train.py"};
  JobStateMachine job(settings, now);
  AgentInfo agent;
  agent.machine_rank = 0;
  agent.hostname = "node01";
  agent.advertise_addr = "10.231.0.1";
  agent.local_world_size = 2;
  ASSERT_TRUE(job.Register(agent, now).ok());
  const GenerationStart start = job.StartGeneration(now);
  job.WorkerStarted(0, start.generation, 0, 111, now);
  job.WorkerStarted(0, start.generation, 1, 222, now);
  WorkerExit crash;
  crash.exit_code = 5;
  crash.last_lines = {"boom"};
  job.WorkerExited(0, start.generation, 1, crash, now);
  now += seconds(3);

  const auto status = DescribeJob(job, now);
  EXPECT_EQ(status.job_id(), "job-7");
  EXPECT_EQ(status.state(), "stopping");
  EXPECT_EQ(status.world_size(), 2);
  EXPECT_DOUBLE_EQ(status.uptime_s(), 3.0);
  ASSERT_EQ(status.nodes_size(), 1);
  EXPECT_EQ(status.nodes(0).hostname(), "node01");
  EXPECT_DOUBLE_EQ(status.nodes(0).last_heartbeat_age_s(), 3.0);
  ASSERT_EQ(status.ranks_size(), 2);
  EXPECT_EQ(status.ranks(0).pid(), 111);
  EXPECT_EQ(status.ranks(0).state(), "running");
  EXPECT_EQ(status.ranks(1).state(), "failed");
  EXPECT_EQ(status.ranks(1).exit_code(), 5);
  ASSERT_EQ(status.failures_size(), 1);
  EXPECT_EQ(status.failures(0).last_lines(0), "boom");

  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("JOB job-7"), std::string::npos) << table;
  EXPECT_NE(table.find("node01"), std::string::npos);
  EXPECT_NE(table.find("python3 -u train.py"), std::string::npos);
  EXPECT_NE(table.find("| boom"), std::string::npos);

  const std::string json = FormatJobJson(status);
  EXPECT_NE(json.find("\"job_id\": \"job-7\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pid\": 222"), std::string::npos) << json;
}

}  // namespace
}  // namespace trl

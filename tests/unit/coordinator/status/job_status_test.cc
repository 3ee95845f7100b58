#include "coordinator/status/job_status.h"

#include <gtest/gtest.h>

#include "coordinator/status/table.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

using std::chrono::seconds;

// Every restart counts, whatever ended the generation before: a
// coordinator's restart (issue 34: ps said "restarts: 0 used" for a job
// on its second generation) or a handover to a spare spend none of the
// budget, and are restarts all the same.
TEST(JobStatusTest, RestartsCountWhateverEndedTheGenerationBefore) {
  TimePoint now = TimePoint() + seconds(100);
  JobSettings settings;
  settings.job_id = "job-8";
  settings.num_machines = 1;
  settings.restart.max_restarts = 3;
  settings.command = {"python3", "train.py"};
  JobStateMachine job(settings, now);
  // A coordinator that resumes the job after generation 1 (one restart of
  // the budget used), whose workers its restart ended.
  job.ResumeAfter(1, 1, {}, now, {}, {});
  AgentInfo agent;
  agent.machine_rank = 0;
  agent.hostname = "node01";
  agent.advertise_addr = "10.231.0.1";
  agent.local_world_size = 1;
  ASSERT_TRUE(job.Register(agent, now).ok());
  ASSERT_EQ(job.StartGeneration(now).generation, 2);
  const auto status = DescribeJob(job, now);
  EXPECT_EQ(status.restarts_used(), 1);
  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("restarts: 2 (1 of the budget of 3 used, 2 left)"),
            std::string::npos)
      << table;
}

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

TEST(JobStatusTest, AHandedOverMachinesOldRanksNameTheirHostAndNoExitCode) {
  // Machine 1 (host node02) is lost and a spare (node04) takes its place:
  // the machine's row names node04, but generation 0's ranks 2-3 ran on
  // node02, and how they ended is not known (I6: not "exit 0").
  TimePoint now = TimePoint() + seconds(100);
  JobSettings settings;
  settings.job_id = "job-8";
  settings.num_machines = 2;
  settings.local_world_size = 2;
  settings.restart.max_restarts = 1;
  JobStateMachine job(settings, now);
  for (int m = 0; m < 2; ++m) {
    AgentInfo agent;
    agent.machine_rank = m;
    agent.hostname = m == 0 ? "node01" : "node02";
    agent.host_id = agent.hostname + "/boot";
    agent.local_world_size = 2;
    ASSERT_TRUE(job.Register(agent, now).ok());
  }
  AgentInfo spare;
  spare.machine_rank = -1;
  spare.spare = true;
  spare.hostname = "node04";
  spare.host_id = "node04/boot";
  spare.local_world_size = 2;
  ASSERT_TRUE(job.Admit(spare, now).ok());
  const GenerationStart start = job.StartGeneration(now);
  for (int m = 0; m < 2; ++m) {
    for (int local = 0; local < 2; ++local) {
      job.WorkerStarted(m, start.generation, local, 100 + 2 * m + local, now);
    }
  }
  job.AgentDisconnected(1, now);
  ASSERT_EQ(job.Tick(now).handovers.size(), 1u);

  const auto status = DescribeJob(job, now);
  ASSERT_EQ(status.nodes_size(), 2);
  EXPECT_EQ(status.nodes(1).hostname(), "node04");
  ASSERT_EQ(status.ranks_size(), 4);
  EXPECT_EQ(status.ranks(0).hostname(), "node01");
  for (int rank : {2, 3}) {
    EXPECT_EQ(status.ranks(rank).hostname(), "node02");
    EXPECT_EQ(status.ranks(rank).state(), "lost");
    EXPECT_EQ(status.ranks(rank).exit_code(), -1);
  }
  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("node02               lost       unknown"),
            std::string::npos)
      << table;
  const std::string json = FormatJobJson(status);
  EXPECT_NE(json.find("\"exit_code\": -1"), std::string::npos) << json;
}

// A large job (20 machines x 8 ranks): what is wrong, and the counts, not
// 160 lines.
TEST(JobStatusTableTest, ALargeJobIsSummarisedUnlessEveryRowIsAskedFor) {
  pb::JobStatus status;
  status.set_job_id("big");
  status.set_state("stopping");
  for (int m = 0; m < 20; ++m) {
    auto* node = status.add_nodes();
    node->set_machine_rank(m);
    node->set_hostname("host" + std::to_string(m));
    node->set_state(m == 13 ? "lost" : "stopping");
    for (int local = 0; local < 8; ++local) {
      auto* rank = status.add_ranks();
      rank->set_rank(m * 8 + local);
      rank->set_machine_rank(m);
      rank->set_local_rank(local);
      rank->set_state(m == 13 ? "lost"
                              : (m * 8 + local == 42 ? "failed" : "running"));
      if (rank->rank() == 42) rank->set_exit_code(3);
    }
  }
  for (int i = 0; i < 7; ++i) {
    auto* failure = status.add_failures();
    failure->set_generation(i);
    failure->set_reason("failure number " + std::to_string(i));
  }
  const std::string summary = FormatJobTable(status);
  EXPECT_NE(summary.find("machines: stopping 19, lost 1"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("ranks: running 151, failed 1, lost 8"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("host13"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("host12"), std::string::npos) << summary;
  EXPECT_NE(summary.find("42     2      5"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("running    -"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("failure number 1\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("(2 earlier ones"), std::string::npos) << summary;
  EXPECT_NE(summary.find("failure number 6"), std::string::npos) << summary;
  EXPECT_NE(summary.find("trl-coord ps --ranks lists every one"),
            std::string::npos)
      << summary;

  const std::string whole = FormatJobTable(status, /*every_row=*/true);
  EXPECT_NE(whole.find("host12"), std::string::npos);
  EXPECT_NE(whole.find("failure number 1\n"), std::string::npos);
  size_t rank_lines = 0;
  for (size_t at = whole.find("running    -"); at != std::string::npos;
       at = whole.find("running    -", at + 1)) {
    ++rank_lines;
  }
  EXPECT_EQ(rank_lines, 151u);
}

// Registers machines `ranks` (host node0M), each with `workers` ranks.
bool RegisterMachines(JobStateMachine& job, std::initializer_list<int> ranks,
                      int workers, TimePoint now) {
  for (int m : ranks) {
    AgentInfo agent;
    agent.machine_rank = m;
    agent.hostname = "node0" + std::to_string(m);
    agent.local_world_size = workers;
    if (!job.Register(agent, now).ok()) return false;
  }
  return true;
}

// While a job waits for its machines, its status names those that have
// not registered (a machine whose agent left is awaited again), and `ps`
// says what to run on them; once they are all there, nothing is awaited.
TEST(JobStatusTest, TheMachinesNotRegisteredAreNamedWhileTheJobWaits) {
  TimePoint now = TimePoint() + seconds(100);
  JobSettings settings;
  settings.job_id = "job-8";
  settings.num_machines = 4;
  JobStateMachine job(settings, now);
  ASSERT_TRUE(RegisterMachines(job, {0, 2}, 1, now));
  pb::JobStatus status = DescribeJob(job, now);
  EXPECT_EQ(status.state(), "waiting_for_agents");
  EXPECT_EQ(status.awaited_count(), 2);
  ASSERT_EQ(status.awaited_machines_size(), 2);
  EXPECT_EQ(status.awaited_machines(0), 1);
  EXPECT_EQ(status.awaited_machines(1), 3);
  status.set_awaited_command("trl-agent --config_file c.yaml --machine_rank");
  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("waiting for: 2 machines not registered (1, 3); on "
                       "each, run: trl-agent --config_file c.yaml "
                       "--machine_rank N"),
            std::string::npos)
      << table;
  EXPECT_NE(FormatJobJson(status).find("\"awaited_count\": 2"),
            std::string::npos);

  // Machine 2's agent leaves before the job starts: awaited again.
  job.AgentDisconnected(2, now);
  EXPECT_EQ(DescribeJob(job, now).awaited_count(), 3);

  ASSERT_TRUE(RegisterMachines(job, {1, 2, 3}, 1, now));
  const pb::JobStatus all_there = DescribeJob(job, now);
  EXPECT_EQ(all_there.awaited_count(), 0);
  EXPECT_EQ(all_there.awaited_machines_size(), 0);
  EXPECT_EQ(FormatJobTable(all_there).find("waiting for:"), std::string::npos);
}

// Progress in view: each rank's newest line of this generation, with its
// age, in the status and in `ps`; a line said for a rank of another
// machine, or of another generation, is not taken.
TEST(JobStatusTest, EachRanksNewestLineIsShownWithItsAge) {
  TimePoint now = TimePoint() + seconds(100);
  JobSettings settings;
  settings.job_id = "job-9";
  settings.num_machines = 2;
  JobStateMachine job(settings, now);
  ASSERT_TRUE(RegisterMachines(job, {0, 1}, 2, now));
  const GenerationStart start = job.StartGeneration(now);
  job.RankPrinted(1, start.generation, 3, "{'loss': 0.42, 'epoch': 1.0}", now);
  job.RankPrinted(0, start.generation, 3, "machine 0 has no rank 3", now);
  job.RankPrinted(1, start.generation + 1, 2, "a later generation", now);
  job.RankPrinted(1, start.generation, -5, "no such rank", now);
  now += seconds(4);

  const pb::JobStatus status = DescribeJob(job, now);
  ASSERT_EQ(status.ranks_size(), 4);
  EXPECT_EQ(status.ranks(3).last_line(), "{'loss': 0.42, 'epoch': 1.0}");
  EXPECT_DOUBLE_EQ(status.ranks(3).last_line_age_s(), 4.0);
  // Machine 1 printed 4 s ago; machine 0's ranks never did (the line sent
  // in its name for rank 3, not its own, counts for no machine).
  ASSERT_EQ(status.nodes_size(), 2);
  EXPECT_DOUBLE_EQ(status.nodes(1).last_output_age_s(), 4.0);
  EXPECT_DOUBLE_EQ(status.nodes(0).last_output_age_s(), -1.0);
  for (int rank : {0, 1, 2}) {
    EXPECT_EQ(status.ranks(rank).last_line(), "") << rank;
    EXPECT_DOUBLE_EQ(status.ranks(rank).last_line_age_s(), -1.0) << rank;
  }
  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("LAST LINE"), std::string::npos) << table;
  EXPECT_NE(table.find("{'loss': 0.42, 'epoch': 1.0} (4s ago)"),
            std::string::npos)
      << table;

  // The copied rows (the whole status built off the owner) say the same.
  const pb::JobStatus copied =
      FinishJobStatus(CopyJobStatus(job, now, pb::JobStatusRequest(), nullptr));
  ASSERT_EQ(copied.ranks_size(), 4);
  EXPECT_EQ(copied.ranks(3).last_line(), "{'loss': 0.42, 'epoch': 1.0}");
  EXPECT_DOUBLE_EQ(copied.ranks(3).last_line_age_s(), 4.0);
  ASSERT_EQ(copied.nodes_size(), 2);
  EXPECT_DOUBLE_EQ(copied.nodes(1).last_output_age_s(), 4.0);
  EXPECT_DOUBLE_EQ(copied.nodes(0).last_output_age_s(), -1.0);
}

}  // namespace
}  // namespace trl

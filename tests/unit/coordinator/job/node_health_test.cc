// Node health in the job state machine, on a fake clock: an agent whose
// health checks fail cordons its host at once; its machine gets no ranks
// (a spare takes its place, an elastic job runs without it, a fixed-size
// job without a spare waits), and the cordon ends by itself once every
// agent of the host passes again.
#include <gtest/gtest.h>

#include "coordinator/job/state_machine.h"
#include "tests/lib/job_fixtures.h"

namespace trl {
namespace {

using std::chrono::seconds;

class NodeHealthTest : public testing::Test {
 protected:
  TimePoint now_ = TimePoint() + seconds(1000);

  // 3 machines of 2 workers (MIN:MAX when min_machines > 0).
  JobSettings Settings(int min_machines = 0) {
    JobSettings settings = TestJobSettings(3);
    settings.min_machines = min_machines;
    settings.restart.max_restarts = 10;
    settings.restart.max_backoff = std::chrono::milliseconds(100);
    settings.elastic_wait = seconds(0);
    return settings;
  }

  static AgentInfo Agent(int m, const std::string& host,
                         const std::string& health_problem = "") {
    AgentInfo info = TestAgent(m);
    info.hostname = host;
    info.host_id = "boot-" + host + "/pidns:4026531836";
    info.health_problem = health_problem;
    return info;
  }
  static AgentInfo Spare(const std::string& host,
                         const std::string& health_problem = "") {
    AgentInfo info = Agent(-1, host, health_problem);
    info.spare = true;
    return info;
  }

  int Admit(JobStateMachine& job, const AgentInfo& agent) {
    absl::StatusOr<int> key = job.Admit(agent, now_);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *key : -1000;
  }

  // Starts the generation Tick asks for, with every worker running.
  GenerationStart StartRunning(JobStateMachine& job) {
    EXPECT_TRUE(job.Tick(now_).start_generation);
    return StartWithEveryWorker(job, now_);
  }

  // Machine `m`'s first worker exits 1; the others exit as a stop makes
  // them; a second passes.
  void FailAndStop(JobStateMachine& job, int64_t generation, int m) {
    WorkerExit crashed;
    crashed.exit_code = 1;
    job.WorkerExited(m, generation, 0, crashed, now_);
    WorkerExit stopped;
    stopped.signal = 15;
    for (const auto& rank : job.ranks()) {
      if (rank.state == RankState::kRunning) {
        job.WorkerExited(rank.machine_rank, generation, rank.local_rank,
                         stopped, now_);
      }
    }
    now_ += seconds(1);
  }

  // The hosts the generation's machines run on, in machine order.
  static std::vector<std::string> Hosts(const JobStateMachine& job,
                                        const GenerationStart& start) {
    std::vector<std::string> hosts;
    for (const auto& node : start.nodes) {
      hosts.push_back(job.nodes().at(node.machine_rank).info.hostname);
    }
    return hosts;
  }
};

TEST_F(NodeHealthTest, AnUnhealthyMachineGetsNoRanksASpareTakesItsPlace) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b", "--health_check exited 1: GPU 3 missing"));
  Admit(job, Agent(2, "c"));
  const int spare = Admit(job, Spare("s"));
  ASSERT_EQ(job.cordoned().count("b"), 1u);
  EXPECT_EQ(job.cordoned().at("b").Why(),
            "health check failed: --health_check exited 1: GPU 3 missing");
  const Decision tick = job.Tick(now_);
  // The spare is machine 1 now, machine 1's agent a spare that cannot
  // take a place while its host is unhealthy.
  ASSERT_EQ(tick.handovers.size(), 2u);
  EXPECT_EQ(tick.handovers[0].from, spare);
  EXPECT_EQ(tick.handovers[0].to, 1);
  ASSERT_TRUE(tick.start_generation);
  const GenerationStart start = job.StartGeneration(now_);
  EXPECT_EQ(Hosts(job, start), (std::vector<std::string>{"a", "s", "c"}));
  EXPECT_EQ(start.world_size, 6);
}

TEST_F(NodeHealthTest, WithoutASpareAFixedSizeJobWaitsUntilTheHostIsHealthy) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b", "disk: /var/log/trl has 12 MiB free"));
  Admit(job, Agent(2, "c"));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  now_ += seconds(30);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  // The operator frees the disk: the agent's next check passes.
  job.HealthReported(1, "");
  EXPECT_EQ(job.cordoned().count("b"), 0u);
  ASSERT_TRUE(job.Tick(now_).start_generation);
  EXPECT_EQ(Hosts(job, job.StartGeneration(now_)),
            (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(NodeHealthTest, AnElasticJobRunsWithoutTheUnhealthyMachine) {
  JobStateMachine job(Settings(/*min_machines=*/2), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c", "--health_check timed out after 10 s"));
  ASSERT_TRUE(job.Tick(now_).start_generation);
  const GenerationStart start = job.StartGeneration(now_);
  EXPECT_EQ(Hosts(job, start), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(start.world_size, 4);
}

TEST_F(NodeHealthTest, AnElasticJobWithFewerThanMinHealthyMachinesWaits) {
  JobStateMachine job(Settings(/*min_machines=*/2), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b", "disk: /var/log/trl has 3 MiB free"));
  Admit(job, Agent(2, "c", "disk: /var/log/trl has 5 MiB free"));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  job.HealthReported(2, "");
  ASSERT_TRUE(job.Tick(now_).start_generation);
  EXPECT_EQ(Hosts(job, job.StartGeneration(now_)),
            (std::vector<std::string>{"a", "c"}));
}

TEST_F(NodeHealthTest, ARunningGenerationGoesOnAndTheNextRunsWithoutTheHost) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  const GenerationStart first = StartRunning(job);
  job.HealthReported(1, "disk: /scratch has 0 MiB free");
  // Nothing is stopped for it: the ranks there may be fine.
  const Decision tick = job.Tick(now_);
  EXPECT_FALSE(tick.stop_generation.has_value());
  EXPECT_TRUE(tick.handovers.empty());
  // A spare comes; the generation fails on its own; the spare takes the
  // unhealthy machine's place in the next one.
  Admit(job, Spare("s"));
  FailAndStop(job, first.generation, 1);
  ASSERT_TRUE(job.Tick(now_).start_generation);
  EXPECT_EQ(Hosts(job, job.StartGeneration(now_)),
            (std::vector<std::string>{"a", "s", "c"}));
}

TEST_F(NodeHealthTest, AHostIsHealthyAgainOnlyOnceEveryAgentOfItIs) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b", "GPU 0: 2 uncorrectable ECC errors"));
  const int spare = Admit(job, Spare("b", "GPU 0: 2 uncorrectable ECC errors"));
  job.HealthReported(1, "");
  ASSERT_EQ(job.cordoned().count("b"), 1u) << "the spare on b is still sick";
  job.HealthReported(spare, "");
  EXPECT_EQ(job.cordoned().count("b"), 0u);
}

TEST_F(NodeHealthTest, AnElasticJobNeverFallsBackOnAnUnhealthyMachine) {
  // MIN 2: a is healthy, b cordoned for its failures, c unhealthy. Without
  // any cordoned host the job is short of MIN, so it may fall back on b,
  // never on c.
  JobSettings settings = Settings(/*min_machines=*/2);
  settings.cordon_after = 1;
  JobStateMachine job(settings, now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c", "disk: /logs has 0 MiB free"));
  const GenerationStart first = StartRunning(job);
  EXPECT_EQ(Hosts(job, first), (std::vector<std::string>{"a", "b"}));
  FailAndStop(job, first.generation, 1);
  ASSERT_TRUE(job.cordoned().at("b").ForFailures());
  ASSERT_TRUE(job.Tick(now_).start_generation);
  EXPECT_EQ(Hosts(job, job.StartGeneration(now_)),
            (std::vector<std::string>{"a", "b"}));
}

TEST_F(NodeHealthTest, TheLastUnhealthyAgentOfAHostLeavingLeavesItToTheRest) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  const int spare = Admit(job, Spare("b", "GPU 1 has fallen off the bus"));
  ASSERT_TRUE(job.cordoned().count("b"));
  // The sick spare goes; machine 1, healthy, stays on b: b is healthy.
  job.AgentDisconnected(spare, now_);
  EXPECT_EQ(job.cordoned().count("b"), 0u);
  // An unhealthy machine whose agent is lost with no other agent there:
  // the host stays cordoned until an agent of it says otherwise.
  Admit(job, Agent(2, "c", "disk full"));
  job.AgentDisconnected(2, now_);
  EXPECT_EQ(job.cordoned().count("c"), 1u);
  Admit(job, Agent(2, "c"));
  EXPECT_EQ(job.cordoned().count("c"), 0u);
}

TEST_F(NodeHealthTest, AReportSaidAgainChangesNothing) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  EXPECT_FALSE(job.HealthReported(0, ""));
  EXPECT_TRUE(job.HealthReported(0, "disk full"));
  EXPECT_FALSE(job.HealthReported(0, "disk full"));
  EXPECT_TRUE(job.HealthReported(0, ""));
}

TEST_F(NodeHealthTest, AHostCordonedForFailuresStaysSoWhenItsHealthPasses) {
  CordonList cordons(/*after=*/1, seconds(600));
  ASSERT_TRUE(cordons.NoteFailure("b", "rank 2 exited 1", now_));
  EXPECT_FALSE(cordons.SetHealth("b", "disk full"));  // cordoned already
  EXPECT_TRUE(cordons.Unhealthy("b"));
  EXPECT_EQ(cordons.At("b").Why(),
            "health check failed: disk full; 1 failures within 600 s, the "
            "last: rank 2 exited 1");
  EXPECT_FALSE(cordons.SetHealth("b", ""));
  ASSERT_TRUE(cordons.Cordoned("b"));
  EXPECT_FALSE(cordons.AnyUnhealthy());
  EXPECT_TRUE(cordons.Uncordon("b").ok());
  // Failures on a host cordoned for its health: both, counted once.
  EXPECT_TRUE(cordons.SetHealth("d", "disk full"));
  EXPECT_TRUE(cordons.NoteFailure("d", "rank 0 exited 1", now_));
  EXPECT_TRUE(cordons.AnyUnhealthy());
  EXPECT_FALSE(cordons.SetHealth("d", ""));
  EXPECT_FALSE(cordons.AnyUnhealthy());
  EXPECT_TRUE(cordons.Cordoned("d"));
  // A health cordon cleared by the operator counts as healthy.
  EXPECT_TRUE(cordons.SetHealth("c", "x"));
  EXPECT_TRUE(cordons.Uncordon("c").ok());
  EXPECT_FALSE(cordons.AnyUnhealthy());
}

TEST_F(NodeHealthTest, AStateFileKeepsNoHealthCordon) {
  // A restarted coordinator hears each host's health again from its
  // agents: a cordon it restored would outlive a host made healthy
  // meanwhile.
  CordonList cordons(/*after=*/1, seconds(600));
  cordons.SetHealth("b", "disk full");
  cordons.NoteFailure("c", "rank 4 exited 1", now_);
  CordonList restored(1, seconds(600));
  restored.Restore(cordons.cordoned());
  EXPECT_FALSE(restored.Cordoned("b"));
  EXPECT_TRUE(restored.Cordoned("c"));
  EXPECT_FALSE(restored.AnyUnhealthy());
}

}  // namespace
}  // namespace trl

// Elastic membership (--num_machines MIN:MAX) in the job state machine, on
// a fake clock: when a generation starts with fewer than MAX machines,
// what a loss and a joiner do, and that ranks stay 0..N-1, contiguous per
// machine in machine_rank order.
#include <gtest/gtest.h>

#include "coordinator/job/state_machine.h"
#include "coordinator/status/job_status.h"
#include "coordinator/status/table.h"
#include "tests/lib/job_fixtures.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class ElasticMembershipTest : public testing::Test {
 protected:
  TimePoint now_ = TimePoint() + seconds(1000);

  // 2:3 machines of 2 workers each, unless told otherwise.
  JobSettings Settings(int min_machines = 2, int max_machines = 3) {
    JobSettings settings = TestJobSettings(max_machines);
    settings.min_machines = min_machines;
    settings.restart.max_restarts = 3;
    settings.elastic_wait = seconds(10);
    return settings;
  }

  static AgentInfo Agent(int m) { return TestAgent(m); }

  // Time passes; every connected agent has kept sending heartbeats.
  void Pass(JobStateMachine& job, std::chrono::steady_clock::duration d) {
    now_ += d;
    for (const auto& [m, node] : job.nodes()) {
      if (node.connected) job.Heartbeat(m, now_);
    }
  }

  // As the coordinator does: a tick after every registration.
  void Register(JobStateMachine& job, int m) {
    ASSERT_TRUE(job.Register(Agent(m), now_).ok());
    job.Tick(now_);
  }

  // Starts the generation Tick asks for, with every worker running.
  GenerationStart Start(JobStateMachine& job) {
    EXPECT_TRUE(job.Tick(now_).start_generation);
    GenerationStart start = job.StartGeneration(now_);
    for (const auto& node : start.nodes) {
      for (int local = 0; local < node.local_world_size; ++local) {
        job.WorkerStarted(node.machine_rank, start.generation, local,
                          100 * node.machine_rank + local, now_);
      }
    }
    return start;
  }

  // Ranks 0..world_size-1 exactly once, contiguous per machine in
  // machine_rank order, GROUP_RANK the member's place.
  static void ExpectShape(const GenerationStart& start,
                          const std::vector<int>& machines) {
    ASSERT_EQ(start.nodes.size(), machines.size());
    EXPECT_EQ(start.num_machines, static_cast<int>(machines.size()));
    int next_rank = 0;
    for (size_t i = 0; i < machines.size(); ++i) {
      EXPECT_EQ(start.nodes[i].machine_rank, machines[i]);
      EXPECT_EQ(start.nodes[i].group_rank, static_cast<int>(i));
      EXPECT_EQ(start.nodes[i].rank_offset, next_rank);
      next_rank += start.nodes[i].local_world_size;
    }
    EXPECT_EQ(start.world_size, next_rank);
  }
};

TEST_F(ElasticMembershipTest, StartsWithMinAfterTheWait) {
  JobStateMachine job(Settings(), now_);
  Register(job, 0);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Register(job, 2);
  EXPECT_FALSE(job.Tick(now_).start_generation);  // MIN there: the wait
  ASSERT_TRUE(job.NextDeadline(now_).has_value());
  EXPECT_LE(*job.NextDeadline(now_), now_ + seconds(10));
  Pass(job, seconds(9));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, seconds(1));
  const GenerationStart start = Start(job);
  ExpectShape(start, {0, 2});
  EXPECT_EQ(start.world_size, 4);
  EXPECT_EQ(start.master_addr, "10.0.0.1");
  EXPECT_EQ(job.members(), (std::vector<int>{0, 2}));
  EXPECT_EQ(ElasticShape(start, job.settings()),
            "2 of 2:3 machines (0, 2), world size 4, effective batch size = "
            "per-device batch x 4");
}

TEST_F(ElasticMembershipTest, StartsAtOnceWithMax) {
  JobStateMachine job(Settings(), now_);
  Register(job, 2);
  Register(job, 1);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Register(job, 0);
  const GenerationStart start = Start(job);  // no wait
  ExpectShape(start, {0, 1, 2});
  EXPECT_EQ(start.world_size, 6);
}

TEST_F(ElasticMembershipTest, MasterIsTheFirstMember) {
  JobStateMachine job(Settings(), now_);
  Register(job, 1);
  Register(job, 2);
  EXPECT_EQ(job.NextMasterAddr(), "10.0.0.2");
  Pass(job, seconds(11));
  const GenerationStart start = Start(job);
  ExpectShape(start, {1, 2});
  EXPECT_EQ(start.master_addr, "10.0.0.2");
}

TEST_F(ElasticMembershipTest, LossWithMinLeftGoesOnWithFewer) {
  JobStateMachine job(Settings(), now_);
  for (int m : {0, 1, 2}) Register(job, m);
  const GenerationStart first = Start(job);
  ExpectShape(first, {0, 1, 2});
  const Decision lost = job.AgentDisconnected(1, now_);
  ASSERT_TRUE(lost.stop_generation.has_value());
  // The survivors' workers stop.
  for (int m : {0, 2}) {
    for (int local = 0; local < 2; ++local) {
      WorkerExit killed;
      killed.signal = 15;
      job.WorkerExited(m, first.generation, local, killed, now_);
    }
  }
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  EXPECT_EQ(job.restarts_used(), 1);  // a loss spends a restart
  // Not before machine 1's old agent has surely stopped its workers (its
  // lease + stop grace + 2 s): it may only be cut off (I1).
  Pass(job, seconds(10));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, seconds(2));
  const GenerationStart second = Start(job);
  EXPECT_EQ(second.generation, first.generation + 1);
  ExpectShape(second, {0, 2});
  EXPECT_EQ(second.world_size, 4);
  // Long before the rejoin timeout (60 s).
}

TEST_F(ElasticMembershipTest, LossBelowMinWaitsForTheRejoinTimeout) {
  JobStateMachine job(Settings(2, 3), now_);
  Register(job, 0);
  Register(job, 1);
  Pass(job, seconds(10));
  const GenerationStart first = Start(job);
  ExpectShape(first, {0, 1});
  ASSERT_TRUE(job.AgentDisconnected(1, now_).stop_generation);
  for (int local = 0; local < 2; ++local) {
    WorkerExit killed;
    killed.signal = 15;
    job.WorkerExited(0, first.generation, local, killed, now_);
  }
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  Pass(job, seconds(30));
  EXPECT_FALSE(job.Tick(now_).start_generation);  // one machine: below MIN
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  Pass(job, seconds(31));  // past the rejoin timeout
  const Decision ended = job.Tick(now_);
  ASSERT_TRUE(ended.finished.has_value());
  EXPECT_EQ(ended.finished->phase, JobPhase::kFailed);
  EXPECT_NE(ended.finished->summary.find("did not rejoin"), std::string::npos)
      << ended.finished->summary;
  EXPECT_NE(ended.finished->summary.find("at least 2"), std::string::npos)
      << ended.finished->summary;
}

TEST_F(ElasticMembershipTest, JoinerIsTakenInAtTheNextGeneration) {
  JobStateMachine job(Settings(), now_);
  Register(job, 0);
  Register(job, 1);
  Pass(job, seconds(10));
  const GenerationStart first = Start(job);
  ExpectShape(first, {0, 1});
  // Machine 2 registers while generation 0 runs: accepted, not started.
  Register(job, 2);
  const Decision joined = job.Tick(now_);
  EXPECT_FALSE(joined.stop_generation.has_value());
  EXPECT_FALSE(joined.start_generation);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
  EXPECT_EQ(job.world_size(), 4);
  // A worker fails: the next generation takes machine 2 in.
  WorkerExit failed;
  failed.exit_code = 1;
  ASSERT_TRUE(job.WorkerExited(1, first.generation, 0, failed, now_)
                  .stop_generation.has_value());
  for (const auto& [m, local] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 1}}) {
    WorkerExit killed;
    killed.signal = 15;
    job.WorkerExited(m, first.generation, local, killed, now_);
  }
  Pass(job, milliseconds(100));  // (the first restart has no backoff)
  const GenerationStart second = Start(job);
  ExpectShape(second, {0, 1, 2});
  EXPECT_EQ(second.world_size, 6);
  EXPECT_EQ(job.restarts_used(), 1);
}

TEST_F(ElasticMembershipTest, RescaleOnJoinRestartsAtOnce) {
  JobSettings settings = Settings();
  settings.rescale_on_join = true;
  JobStateMachine job(settings, now_);
  Register(job, 0);
  Register(job, 2);
  Pass(job, seconds(10));
  const GenerationStart first = Start(job);
  ExpectShape(first, {0, 2});
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  const Decision joined = job.Tick(now_);
  ASSERT_TRUE(joined.stop_generation.has_value());
  EXPECT_NE(joined.stop_generation->find("machine 1"), std::string::npos);
  EXPECT_EQ(job.phase(), JobPhase::kStopping);
  for (int m : {0, 2}) {
    for (int local = 0; local < 2; ++local) {
      WorkerExit killed;
      killed.signal = 15;
      job.WorkerExited(m, first.generation, local, killed, now_);
    }
  }
  // A rescale is no failure: no restart spent, no backoff.
  EXPECT_EQ(job.restarts_used(), 0);
  EXPECT_TRUE(job.failures().empty());
  const GenerationStart second = Start(job);
  EXPECT_EQ(second.generation, first.generation + 1);
  ExpectShape(second, {0, 1, 2});
}

TEST_F(ElasticMembershipTest, OldGenerationEventsAreIgnoredAfterAShrink) {
  JobStateMachine job(Settings(), now_);
  for (int m : {0, 1, 2}) Register(job, m);
  const GenerationStart first = Start(job);
  job.AgentDisconnected(0, now_);
  for (int m : {1, 2}) {
    for (int local = 0; local < 2; ++local) {
      WorkerExit killed;
      killed.signal = 15;
      job.WorkerExited(m, first.generation, local, killed, now_);
    }
  }
  Pass(job, seconds(12));
  const GenerationStart second = Start(job);
  ExpectShape(second, {1, 2});
  EXPECT_EQ(second.master_addr, "10.0.0.2");
  // A late exit of generation 0 changes nothing.
  WorkerExit failed;
  failed.exit_code = 1;
  EXPECT_FALSE(job.WorkerExited(1, first.generation, 0, failed, now_)
                   .stop_generation.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
}

TEST_F(ElasticMembershipTest, StatusShowsMinAndTheMembers) {
  JobStateMachine job(Settings(), now_);
  Register(job, 0);
  Register(job, 2);
  Pass(job, seconds(10));
  Start(job);
  Register(job, 1);  // a joiner: registered, not a member
  const auto status = DescribeJob(job, now_);
  EXPECT_EQ(status.min_machines(), 2);
  EXPECT_EQ(status.num_machines(), 3);
  ASSERT_EQ(status.members_size(), 2);
  EXPECT_EQ(status.members(0), 0);
  EXPECT_EQ(status.members(1), 2);
  EXPECT_EQ(status.world_size(), 4);
  const std::string table = FormatJobTable(status);
  EXPECT_NE(table.find("machines 2 of 2:3 (members 0,2)"), std::string::npos)
      << table;
  const std::string json = FormatJobJson(status);
  EXPECT_NE(json.find("\"min_machines\": 2"), std::string::npos) << json;
}

TEST_F(ElasticMembershipTest, ResumedJobGoesOnAfterItsGenerationWithMin) {
  // A restarted coordinator: generation 4 may have run on machines 0..2.
  JobStateMachine job(Settings(), now_);
  std::map<int, HostIdentity> hosts;
  for (int m : {0, 1, 2}) hosts[m] = Agent(m).host();
  job.ResumeAfter(4, 1, {}, now_, hosts);
  Register(job, 1);
  // Machine 2's agent comes back from another host: its old one may still
  // run generation 4's ranks until its lease and stop grace are over.
  AgentInfo moved = Agent(2);
  moved.hostname = "node9";
  moved.host_id = "boot-9/pidns:4026531836";
  ASSERT_TRUE(job.Register(moved, now_).ok());
  job.Tick(now_);
  Pass(job, seconds(10));  // the elastic wait is over, the lease is not
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, seconds(2));
  const GenerationStart start = Start(job);
  EXPECT_EQ(start.generation, 5);
  ExpectShape(start, {1, 2});
  EXPECT_EQ(start.master_addr, "10.0.0.2");
}

TEST_F(ElasticMembershipTest, RegistrationTimeoutNeedsOnlyMin) {
  JobSettings settings = Settings();
  settings.registration_timeout = seconds(30);
  settings.elastic_wait = seconds(60);
  JobStateMachine job(settings, now_);
  Register(job, 0);
  Register(job, 1);
  Pass(job, seconds(31));
  const Decision decision = job.Tick(now_);
  EXPECT_FALSE(decision.finished.has_value());
}

TEST_F(ElasticMembershipTest, FixedSizeJobIsUnchanged) {
  // N:N is N: every machine, no wait, no joiner after the start.
  for (int min : {0, 3}) {
    JobStateMachine job(Settings(min, 3), now_);
    EXPECT_FALSE(job.settings().Elastic());
    Register(job, 0);
    Register(job, 1);
    Pass(job, seconds(100));
    EXPECT_FALSE(job.Tick(now_).start_generation);
    Register(job, 2);
    const GenerationStart start = Start(job);
    ExpectShape(start, {0, 1, 2});
    job.AgentDisconnected(2, now_);
    for (int m : {0, 1}) {
      for (int local = 0; local < 2; ++local) {
        WorkerExit killed;
        killed.signal = 15;
        job.WorkerExited(m, start.generation, local, killed, now_);
      }
    }
    Pass(job, seconds(30));
    EXPECT_FALSE(job.Tick(now_).start_generation);  // waits for machine 2
    AgentInfo back = Agent(2);
    ASSERT_TRUE(job.Register(back, now_).ok());
    ExpectShape(Start(job), {0, 1, 2});
  }
}

}  // namespace
}  // namespace trl

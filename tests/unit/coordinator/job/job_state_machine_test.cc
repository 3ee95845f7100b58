#include <gtest/gtest.h>

#include <set>

#include "coordinator/job/state_machine.h"

namespace trl {
namespace {

using std::chrono::seconds;

class JobStateMachineTest : public testing::Test {
 protected:
  // A fake clock: time moves only when a test says so.
  TimePoint now_ = TimePoint() + seconds(1000);

  JobSettings Settings(int machines) {
    JobSettings settings;
    settings.job_id = "job";
    settings.num_machines = machines;
    settings.config_fingerprint = {{"num_processes", "8"},
                                   {"distributed_type", "MULTI_CPU"}};
    settings.command = {"python3", "-u", "train.py"};
    return settings;
  }

  AgentInfo Agent(int machine_rank, int workers = 2) {
    AgentInfo info;
    info.machine_rank = machine_rank;
    info.hostname = "node" + std::to_string(machine_rank);
    info.advertise_addr = "10.0.0." + std::to_string(machine_rank + 1);
    info.local_world_size = workers;
    info.config_fingerprint = Settings(2).config_fingerprint;
    return info;
  }

  // Registers machines 0..n-1 (in reverse order, to show arrival order does
  // not matter) and starts the first generation.
  GenerationStart StartJob(JobStateMachine& job, int machines) {
    for (int m = machines - 1; m >= 0; --m) {
      EXPECT_TRUE(job.Register(Agent(m), now_).ok());
    }
    EXPECT_TRUE(job.Tick(now_).start_generation);
    GenerationStart start = job.StartGeneration(now_);
    for (const auto& node : start.nodes) {
      for (int local = 0; local < node.local_world_size; ++local) {
        job.WorkerStarted(node.machine_rank, start.generation, local,
                          1000 + node.rank_offset + local, now_);
      }
    }
    return start;
  }

  // Invariant 2: ranks are exactly 0..world_size-1, each once.
  void ExpectRanksArePermutation(const JobStateMachine& job) {
    std::set<int> seen;
    for (const auto& rank : job.ranks()) seen.insert(rank.rank);
    EXPECT_EQ(static_cast<int>(seen.size()), job.world_size());
    if (!seen.empty()) {
      EXPECT_EQ(*seen.begin(), 0);
      EXPECT_EQ(*seen.rbegin(), job.world_size() - 1);
    }
  }
};

TEST_F(JobStateMachineTest, WaitsForEveryMachine) {
  JobStateMachine job(Settings(2), now_);
  EXPECT_EQ(job.phase(), JobPhase::kWaitingForAgents);
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  EXPECT_FALSE(job.Tick(now_).start_generation);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(JobStateMachineTest, RanksFollowMachineRankNotArrival) {
  JobStateMachine job(Settings(3), now_);
  for (int m : {2, 0, 1}) {
    ASSERT_TRUE(job.Register(Agent(m, m + 1), now_).ok());
  }
  const GenerationStart start = job.StartGeneration(now_);
  EXPECT_EQ(start.generation, 0);
  EXPECT_EQ(start.world_size, 6);
  EXPECT_EQ(start.master_addr, "10.0.0.1");
  ASSERT_EQ(start.nodes.size(), 3u);
  EXPECT_EQ(start.nodes[0].rank_offset, 0);
  EXPECT_EQ(start.nodes[1].rank_offset, 1);
  EXPECT_EQ(start.nodes[2].rank_offset, 3);
  ExpectRanksArePermutation(job);
  EXPECT_EQ(job.ranks()[4].machine_rank, 2);
  EXPECT_EQ(job.ranks()[4].local_rank, 1);
}

TEST_F(JobStateMachineTest, RefusesOutOfRangeAndDuplicateRanks) {
  JobStateMachine job(Settings(2), now_);
  absl::Status status = job.Register(Agent(2), now_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("machine_rank 2 is out of range"),
            std::string::npos);
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  status = job.Register(Agent(1), now_);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(status.message().find("already registered by host node1"),
            std::string::npos);
  EXPECT_EQ(job.nodes().size(), 1u);  // state unchanged
}

TEST_F(JobStateMachineTest, RefusesADifferentConfigAndSaysWhatDiffers) {
  JobStateMachine job(Settings(2), now_);
  AgentInfo agent = Agent(1);
  agent.config_fingerprint["num_processes"] = "16";
  const absl::Status status = job.Register(agent, now_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find(
                "num_processes is 16 on the agent but 8 on the coordinator"),
            std::string::npos)
      << status;
}

TEST_F(JobStateMachineTest, DisconnectWhileWaitingFreesTheRank) {
  JobStateMachine job(Settings(2), now_);
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  job.AgentDisconnected(1, now_);
  EXPECT_TRUE(job.nodes().empty());
  EXPECT_TRUE(job.Register(Agent(1), now_).ok());
}

TEST_F(JobStateMachineTest, SucceedsWhenEveryRankExitsZero) {
  JobStateMachine job(Settings(2), now_);
  const GenerationStart start = StartJob(job, 2);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
  Decision last;
  for (const auto& rank : job.ranks()) {
    EXPECT_EQ(rank.state, RankState::kRunning);
  }
  for (int m = 0; m < 2; ++m) {
    for (int local = 0; local < 2; ++local) {
      EXPECT_FALSE(last.finished.has_value());
      last = job.WorkerExited(m, start.generation, local, WorkerExit{}, now_);
    }
  }
  ASSERT_TRUE(last.finished.has_value());
  EXPECT_EQ(last.finished->phase, JobPhase::kSucceeded);
  EXPECT_EQ(last.finished->exit_code, 0);
  EXPECT_FALSE(last.stop_generation.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kSucceeded);
}

TEST_F(JobStateMachineTest, FirstFailureStopsEveryoneAndIsTheResult) {
  JobStateMachine job(Settings(2), now_);
  const GenerationStart start = StartJob(job, 2);
  WorkerExit crash;
  crash.exit_code = 3;
  crash.last_lines = {"Traceback", "ValueError: bad"};
  crash.executable = "/usr/bin/python3";
  Decision decision = job.WorkerExited(1, start.generation, 1, crash, now_);
  ASSERT_TRUE(decision.stop_generation.has_value());
  EXPECT_NE(decision.stop_generation->find("rank 3"), std::string::npos);
  EXPECT_FALSE(decision.finished.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kStopping);

  // The others die of our SIGTERM: not failures of their own.
  WorkerExit terminated;
  terminated.signal = 15;
  job.WorkerExited(0, start.generation, 0, terminated, now_);
  job.WorkerExited(0, start.generation, 1, terminated, now_);
  decision = job.WorkerExited(1, start.generation, 0, terminated, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_EQ(decision.finished->exit_code, 3);
  EXPECT_NE(decision.finished->summary.find(
                "rank 3 (local rank 1 on machine 1, host node1) exited with "
                "code 3 (program /usr/bin/python3)"),
            std::string::npos)
      << decision.finished->summary;
  ASSERT_EQ(job.failures().size(), 1u);
  EXPECT_EQ(job.failures()[0].exit.last_lines.back(), "ValueError: bad");
  EXPECT_EQ(job.ranks()[0].state, RankState::kStopped);
  EXPECT_EQ(job.ranks()[3].state, RankState::kFailed);
}

TEST_F(JobStateMachineTest, SignalDeathIsReportedAs128PlusSignal) {
  JobSettings one = Settings(1);
  JobStateMachine single(one, now_);
  AgentInfo agent = Agent(0, 1);
  agent.config_fingerprint = one.config_fingerprint;
  ASSERT_TRUE(single.Register(agent, now_).ok());
  const GenerationStart start = single.StartGeneration(now_);
  WorkerExit killed;
  killed.signal = 9;
  const Decision decision =
      single.WorkerExited(0, start.generation, 0, killed, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->exit_code, 137);
  EXPECT_NE(decision.finished->summary.find("killed by signal 9 (SIGKILL)"),
            std::string::npos);
}

TEST_F(JobStateMachineTest, LostAgentFailsTheJobOnceOthersStopped) {
  JobStateMachine job(Settings(2), now_);
  const GenerationStart start = StartJob(job, 2);
  Decision decision = job.AgentDisconnected(1, now_);
  ASSERT_TRUE(decision.stop_generation.has_value());
  EXPECT_NE(decision.stop_generation->find("machine 1"), std::string::npos);
  EXPECT_FALSE(decision.finished.has_value());
  EXPECT_EQ(job.ranks()[2].state, RankState::kLost);
  WorkerExit terminated;
  terminated.signal = 15;
  job.WorkerExited(0, start.generation, 0, terminated, now_);
  decision = job.WorkerExited(0, start.generation, 1, terminated, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_EQ(decision.finished->exit_code, 1);
}

TEST_F(JobStateMachineTest, StopRequestEndsAsStopped) {
  JobStateMachine job(Settings(1), now_);
  JobSettings one = Settings(1);
  AgentInfo agent = Agent(0, 2);
  agent.config_fingerprint = one.config_fingerprint;
  ASSERT_TRUE(job.Register(agent, now_).ok());
  const GenerationStart start = job.StartGeneration(now_);
  Decision decision = job.StopRequested("trl-coord received SIGINT", 130, now_);
  ASSERT_TRUE(decision.stop_generation.has_value());
  EXPECT_FALSE(decision.finished.has_value());
  WorkerExit terminated;
  terminated.signal = 15;
  job.WorkerExited(0, start.generation, 0, terminated, now_);
  decision = job.WorkerExited(0, start.generation, 1, terminated, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kStopped);
  EXPECT_EQ(decision.finished->exit_code, 130);
  // A second request changes nothing.
  decision = job.StopRequested("again", 1, now_);
  EXPECT_FALSE(decision.finished.has_value());
  EXPECT_EQ(job.outcome()->exit_code, 130);
}

TEST_F(JobStateMachineTest, StopWhileWaitingEndsAtOnce) {
  JobStateMachine job(Settings(2), now_);
  const Decision decision = job.StopRequested("operator", 143, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kStopped);
  EXPECT_FALSE(job.Register(Agent(0), now_).ok());
}

TEST_F(JobStateMachineTest, EventsOfOtherGenerationsAreIgnored) {
  JobStateMachine job(Settings(2), now_);
  const GenerationStart start = StartJob(job, 2);
  WorkerExit crash;
  crash.exit_code = 1;
  Decision decision = job.WorkerExited(0, start.generation + 1, 0, crash, now_);
  EXPECT_FALSE(decision.stop_generation.has_value());
  decision = job.WorkerExited(0, start.generation - 1, 0, crash, now_);
  EXPECT_FALSE(decision.stop_generation.has_value());
  job.WorkerStarted(0, start.generation - 1, 0, 4242, now_);
  EXPECT_EQ(job.ranks()[0].pid, 1000);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
}

TEST_F(JobStateMachineTest, OutOfRangeWorkerEventsAreIgnored) {
  JobStateMachine job(Settings(2), now_);
  const GenerationStart start = StartJob(job, 2);
  WorkerExit crash;
  crash.exit_code = 1;
  EXPECT_FALSE(job.WorkerExited(0, start.generation, 7, crash, now_)
                   .stop_generation.has_value());
  EXPECT_FALSE(job.WorkerExited(0, start.generation, -1, crash, now_)
                   .stop_generation.has_value());
  EXPECT_FALSE(job.WorkerExited(5, start.generation, 0, crash, now_)
                   .stop_generation.has_value());
}

TEST_F(JobStateMachineTest, StartFailureCountsAsAFailure) {
  JobStateMachine job(Settings(2), now_);
  for (int m : {0, 1}) ASSERT_TRUE(job.Register(Agent(m), now_).ok());
  const GenerationStart start = job.StartGeneration(now_);
  WorkerExit cannot;
  cannot.start_error = "'train' was not found on PATH";
  const Decision decision =
      job.WorkerExited(1, start.generation, 0, cannot, now_);
  ASSERT_TRUE(decision.stop_generation.has_value());
  EXPECT_NE(decision.stop_generation->find("could not start"),
            std::string::npos);
}

TEST_F(JobStateMachineTest, HeartbeatsUpdateTheNode) {
  JobStateMachine job(Settings(2), now_);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  now_ += seconds(5);
  job.Heartbeat(0, now_);
  EXPECT_EQ(job.nodes().at(0).last_heartbeat, now_);
  job.Heartbeat(7, now_);  // unknown: ignored
}

}  // namespace
}  // namespace trl

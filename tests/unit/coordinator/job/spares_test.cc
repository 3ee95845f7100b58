// Hot spares and cordons in the job state machine, on a fake clock: a
// spare takes a lost machine's place at once (and its ranks only after the
// lost agent's lease and stop grace), a returning machine becomes a spare,
// a host that keeps failing is cordoned and a spare or a smaller shape is
// used instead, until Uncordon.
#include <gtest/gtest.h>

#include "coordinator/job/state_machine.h"
#include "coordinator/status/job_status.h"
#include "coordinator/status/table.h"
#include "tests/lib/job_fixtures.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class SparesTest : public testing::Test {
 protected:
  TimePoint now_ = TimePoint() + seconds(1000);

  // 3 machines of 2 workers (MIN:MAX when min_machines > 0).
  JobSettings Settings(int min_machines = 0) {
    JobSettings settings = TestJobSettings(3);
    settings.min_machines = min_machines;
    settings.restart.max_restarts = 10;
    settings.restart.max_backoff = milliseconds(100);
    settings.elastic_wait = seconds(0);
    settings.cordon_after = 2;
    settings.cordon_window = seconds(600);
    return settings;
  }

  static AgentInfo Agent(int m, const std::string& host) {
    AgentInfo info;
    info.machine_rank = m;
    info.hostname = host;
    info.host_id = "boot-" + host + "/pidns:4026531836";
    info.advertise_addr = "10.0.0." + host;
    info.local_world_size = 2;
    info.lease = seconds(4);
    return info;
  }
  static AgentInfo Spare(const std::string& host) {
    AgentInfo info = Agent(-1, host);
    info.spare = true;
    return info;
  }

  // Time passes; every connected agent and spare keeps sending heartbeats.
  void Pass(JobStateMachine& job, std::chrono::steady_clock::duration d) {
    now_ += d;
    for (const auto& [m, node] : job.nodes()) {
      if (node.connected) job.Heartbeat(m, now_);
    }
    for (const auto& [key, spare] : job.spares()) job.Heartbeat(key, now_);
  }

  int Admit(JobStateMachine& job, const AgentInfo& agent) {
    absl::StatusOr<int> key = job.Admit(agent, now_);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *key : -1000;
  }

  // Starts the generation Tick asks for, with every worker running.
  GenerationStart Start(JobStateMachine& job) {
    EXPECT_TRUE(job.Tick(now_).start_generation);
    return StartWithEveryWorker(job, now_);
  }

  // Every rank of the generation exits as a stop makes it.
  void StopAll(JobStateMachine& job, int64_t generation) {
    WorkerExit stopped;
    stopped.signal = 15;
    for (const auto& rank : job.ranks()) {
      if (rank.state == RankState::kRunning) {
        job.WorkerExited(rank.machine_rank, generation, rank.local_rank,
                         stopped, now_);
      }
    }
  }

  // A worker of machine `m` fails in generations 0 and 1 (the job is
  // restarted in between): two failures of its host.
  void FailTwice(JobStateMachine& job, int m, int local_rank) {
    WorkerExit crashed;
    crashed.exit_code = 1;
    for (int generation = 0; generation < 2; ++generation) {
      job.WorkerExited(m, generation, local_rank, crashed, now_);
      StopAll(job, generation);
      Pass(job, seconds(1));
      if (generation == 0) Start(job);
    }
  }

  // Three machines on hosts a, b, c and a spare on host s, running
  // generation 0.
  JobStateMachine RunningWithSpare(JobSettings settings, int* spare_key) {
    JobStateMachine job(std::move(settings), now_);
    Admit(job, Agent(0, "a"));
    Admit(job, Agent(1, "b"));
    Admit(job, Agent(2, "c"));
    *spare_key = Admit(job, Spare("s"));
    Start(job);
    return job;
  }
};

TEST_F(SparesTest, ASpareRegistersUnderAKeyBelowZeroAndHoldsNoRanks) {
  JobStateMachine job(Settings(), now_);
  const int key = Admit(job, Spare("s"));
  EXPECT_LT(key, 0);
  ASSERT_EQ(job.spares().size(), 1u);
  EXPECT_EQ(job.spares().at(key).info.hostname, "s");
  // It is not a machine: three machines still have to register.
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  const GenerationStart start = Start(job);
  EXPECT_EQ(start.world_size, 6);
  for (const auto& node : start.nodes) EXPECT_GE(node.machine_rank, 0);
  // A spare with another config is refused, as a machine would be.
  AgentInfo odd = Spare("t");
  odd.local_world_size = 3;
  EXPECT_FALSE(job.Admit(odd, now_).ok());
}

TEST_F(SparesTest, ASpareTakesALostMachinesPlaceAtOnceAndItsRanksAfterI1) {
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  // Machine 1's agent is killed: its stream ends.
  Decision lost = job.AgentDisconnected(1, now_);
  EXPECT_TRUE(lost.stop_generation.has_value());
  Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.handovers.size(), 1u);
  EXPECT_EQ(tick.handovers[0].from, spare_key);
  EXPECT_EQ(tick.handovers[0].to, 1);
  EXPECT_TRUE(job.spares().empty());
  EXPECT_TRUE(job.nodes().at(1).connected);
  EXPECT_EQ(job.nodes().at(1).info.hostname, "s");
  StopAll(job, 0);
  // The lost agent may be only cut off, its workers running until its
  // lease (4 s) and stop grace (5 s) and 2 s are over: not before.
  Pass(job, seconds(10));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, seconds(2));
  const GenerationStart next = Start(job);
  EXPECT_EQ(next.generation, 1);
  ASSERT_EQ(next.nodes.size(), 3u);
  EXPECT_EQ(next.nodes[1].machine_rank, 1);
  EXPECT_EQ(next.nodes[1].rank_offset, 2);
  EXPECT_EQ(next.world_size, 6);
  // It did not wait for the rejoin timeout (60 s): 12 s.
}

TEST_F(SparesTest, TheLostMachineComingBackBecomesASpare) {
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  job.AgentDisconnected(1, now_);
  job.Tick(now_);  // the spare on s is machine 1 now
  // Machine 1's own agent (host b) comes back: a spare, not a duplicate.
  const int key = Admit(job, Agent(1, "b"));
  EXPECT_LT(key, 0);
  EXPECT_NE(key, spare_key);
  EXPECT_EQ(job.spares().at(key).info.hostname, "b");
  EXPECT_EQ(job.nodes().at(1).info.hostname, "s");
  // A machine whose agent did not come from a spare is still a duplicate.
  EXPECT_FALSE(job.Admit(Agent(2, "x"), now_).ok());
}

TEST_F(SparesTest, APromotedSpareThatReconnectsTakesItsMachineBackIfVacant) {
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  job.AgentDisconnected(1, now_);
  job.Tick(now_);
  // The promoted agent's own connection drops; it registers again as the
  // spare that stood for machine 1.
  job.AgentDisconnected(1, now_);
  AgentInfo back = Spare("s");
  back.machine_rank = 1;
  EXPECT_EQ(Admit(job, back), 1);
  EXPECT_TRUE(job.nodes().at(1).from_spare);
  // Once machine 1 is taken, the same registration is a spare.
  AgentInfo other = Spare("t");
  other.machine_rank = 1;
  EXPECT_LT(Admit(job, other), 0);
}

TEST_F(SparesTest, APromotedSpareTakesItsMachineAtARestartedCoordinator) {
  // A new coordinator has no machines yet: the agent that stood for
  // machine 1 registers as a spare for it and is machine 1 again; the
  // machine's own agent, if it comes, is a spare.
  JobStateMachine job(Settings(), now_);
  AgentInfo stand_in = Spare("s");
  stand_in.machine_rank = 1;
  EXPECT_EQ(Admit(job, stand_in), 1);
  EXPECT_LT(Admit(job, Agent(1, "b")), 0);
  // A spare that stood for no machine stays a spare.
  EXPECT_LT(Admit(job, Spare("t")), 0);
}

TEST_F(SparesTest, AStandInThatReconnectsStillWaitsForTheLostAgent) {
  // I1: machine 1's agent on b is cut off (its workers may run for its
  // lease and stop grace); the spare on s takes its place, loses its own
  // connection and comes back. Being back on its own host does not lift
  // the wait for b's workers.
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  job.AgentDisconnected(1, now_);
  job.Tick(now_);
  StopAll(job, 0);
  Pass(job, seconds(3));
  job.AgentDisconnected(1, now_);
  AgentInfo back = Spare("s");
  back.machine_rank = 1;
  EXPECT_EQ(Admit(job, back), 1);
  Pass(job, seconds(1));
  EXPECT_FALSE(job.Tick(now_).start_generation);  // 4 s after the loss
  Pass(job, seconds(8));  // 12 s: b's lease 4 + grace 5 + 2 are over
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(SparesTest, AMachineBackWithoutItsOutcomesIsNoHandover) {
  // Every other rank exited 0; machine 1, cut off, comes back without the
  // outcome of its workers. It is connected again: no spare takes its
  // place, so its failure is not a free handover, and with a budget of 0
  // the job fails, spare or not.
  JobSettings settings = Settings();
  settings.restart.max_restarts = 0;
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(settings, &spare_key);
  WorkerExit ok;
  for (const auto& rank : job.ranks()) {
    if (rank.machine_rank != 1) {
      job.WorkerExited(rank.machine_rank, 0, rank.local_rank, ok, now_);
    }
  }
  job.AgentDisconnected(1, now_);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);  // awaiting its report
  EXPECT_EQ(Admit(job, Agent(1, "b")), 1);     // no report
  job.Tick(now_);
  StopAll(job, 0);
  job.Tick(now_);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
}

TEST_F(SparesTest, AStandInBringsTheReportOfTheGenerationItRan) {
  // The spare on s ran machine 1's ranks; every other rank exits 0, then
  // its connection drops. Back (as the spare that stood for machine 1),
  // it says its ranks exited 0: the job succeeded.
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  job.AgentDisconnected(1, now_);
  job.Tick(now_);
  StopAll(job, 0);
  Pass(job, seconds(12));
  const GenerationStart next = Start(job);
  WorkerExit ok;
  for (const auto& rank : job.ranks()) {
    if (rank.machine_rank != 1) {
      job.WorkerExited(rank.machine_rank, next.generation, rank.local_rank, ok,
                       now_);
    }
  }
  job.AgentDisconnected(1, now_);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);  // awaiting its report
  AgentInfo back = Spare("s");
  back.machine_rank = 1;
  back.report_generation = next.generation;
  back.reported_exits[0] = ok;
  back.reported_exits[1] = ok;
  EXPECT_EQ(Admit(job, back), 1);
  const Decision end = job.Tick(now_);
  ASSERT_TRUE(end.finished.has_value());
  EXPECT_EQ(end.finished->phase, JobPhase::kSucceeded);
}

TEST_F(SparesTest, AFencedMachinesRanksMoveAfterItsLeaseAndFenceNotTheGrace) {
  // An agent with a guardian (fence 0.7 s) has its workers killed at its
  // lease's end even when it is frozen: the spare runs its ranks after
  // lease + fence (4.7 s), not after lease + stop grace + 2 s (11 s).
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  AgentInfo fenced = Agent(1, "b");
  fenced.fence = milliseconds(700);
  Admit(job, fenced);
  Admit(job, Agent(2, "c"));
  Admit(job, Spare("s"));
  Start(job);
  job.AgentDisconnected(1, now_);
  ASSERT_EQ(job.Tick(now_).handovers.size(), 1u);
  StopAll(job, 0);
  Pass(job, milliseconds(4699));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, milliseconds(1));
  EXPECT_EQ(Start(job).generation, 1);
}

TEST_F(SparesTest, ADeadAgentsRanksMoveWhenItsGuardianSaysItsWorkersEnded) {
  // Machine 1's agent is killed; its guardian saw its workers end and
  // says so: the spare runs its ranks then, not after lease + fence.
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  job.AgentDisconnected(1, now_);
  ASSERT_EQ(job.Tick(now_).handovers.size(), 1u);
  StopAll(job, 0);
  Pass(job, milliseconds(300));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  job.LostAgentGone(1, now_);
  EXPECT_EQ(Start(job).generation, 1);
}

TEST_F(SparesTest, ADeadAgentsGuardianDoesNotSpeakForTheAgentsBeforeIt) {
  // Machine 1 was lost on host b (cut off: it may run until its lease and
  // grace are over); the spare on s took its place and died in turn. The
  // guardian on s speaks for s's workers only: b's still bound the start.
  JobSettings settings = Settings();
  JobStateMachine job(settings, now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Admit(job, Spare("s"));
  Admit(job, Spare("t"));
  Start(job);
  job.AgentDisconnected(1, now_);  // b: 4 s lease + 5 s grace + 2 s
  ASSERT_EQ(job.Tick(now_).handovers.size(), 1u);
  StopAll(job, 0);
  Pass(job, seconds(1));
  job.AgentDisconnected(1, now_);                  // s, the stand-in, dies
  ASSERT_EQ(job.Tick(now_).handovers.size(), 1u);  // t takes the place
  job.LostAgentGone(1, now_);
  Pass(job, seconds(9));  // 10 s after b's loss
  EXPECT_FALSE(job.Tick(now_).start_generation);
  Pass(job, seconds(1));
  EXPECT_EQ(Start(job).generation, 1);
}

TEST_F(SparesTest, AfterACoordinatorRestartASpareWaitsForTheOldAgentsLease) {
  // Machine 1's agent before the restart had a 12 s lease (with its fence,
  // 12.7 s); the spare's own is 4 s. The restarted coordinator does not
  // know when machine 1's agent last heard from its predecessor (before
  // now): the spare takes the machine after 12.7 s, not after its own
  // lease and grace (11 s), which would run two copies of ranks 2-3.
  JobStateMachine job(Settings(), now_);
  job.ResumeAfter(4, 1, {}, TimePoint(),
                  {{0, Agent(0, "a").host()},
                   {1, Agent(1, "b").host()},
                   {2, Agent(2, "c").host()}},
                  {{1, milliseconds(12700)}});
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(2, "c"));
  const int key = Admit(job, Spare("s"));
  Pass(job, milliseconds(12699));
  EXPECT_TRUE(job.Tick(now_).handovers.empty());
  Pass(job, milliseconds(1));
  const Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.handovers.size(), 1u);
  EXPECT_EQ(tick.handovers[0].from, key);
  EXPECT_EQ(tick.handovers[0].to, 1);
}

TEST_F(SparesTest, AHandoverToASpareSpendsNoRestartEvenWithABudgetOfZero) {
  // The default --max_restarts 0: a lost machine with a spare ready is a
  // handover, not a restart; the job goes on. A worker's failure still
  // ends it: a spare does not replace a failing script.
  JobSettings settings = Settings();
  settings.restart.max_restarts = 0;
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(settings, &spare_key);
  const Decision lost = job.AgentDisconnected(1, now_);
  EXPECT_TRUE(lost.stop_generation.has_value());
  EXPECT_FALSE(lost.finished.has_value());
  ASSERT_EQ(job.Tick(now_).handovers.size(), 1u);
  StopAll(job, 0);
  EXPECT_NE(job.phase(), JobPhase::kFailed);
  Pass(job, seconds(12));
  const GenerationStart next = Start(job);
  EXPECT_EQ(next.generation, 1);
  EXPECT_EQ(job.restarts_used(), 0);

  WorkerExit crashed;
  crashed.exit_code = 1;
  job.WorkerExited(0, 1, 0, crashed, now_);
  StopAll(job, 1);
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
}

TEST_F(SparesTest, ASpareTakesAMachineThatNeverRegistered) {
  // Machine 2's node did not come up: once any earlier agent of it has
  // surely stopped (lease 4 s + grace 5 s + 2 s), the spare takes it.
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  const int key = Admit(job, Spare("s"));
  Pass(job, seconds(10));
  EXPECT_TRUE(job.Tick(now_).handovers.empty());
  Pass(job, seconds(2));
  const Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.handovers.size(), 1u);
  EXPECT_EQ(tick.handovers[0].from, key);
  EXPECT_EQ(tick.handovers[0].to, 2);
  const GenerationStart start = Start(job);
  EXPECT_EQ(start.world_size, 6);
  // Machine 2's own agent, late, is a spare.
  EXPECT_LT(Admit(job, Agent(2, "c")), 0);
}

TEST_F(SparesTest, SparesAreBoundedAndTakenInTheOrderTheyCame) {
  JobSettings settings = Settings();
  settings.max_spares = 2;
  JobStateMachine job(settings, now_);
  const int first = Admit(job, Spare("s1"));
  Admit(job, Spare("s2"));
  const absl::StatusOr<int> third = job.Admit(Spare("s3"), now_);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("at most 2 spares (--max_spares)"),
            std::string::npos)
      << third.status();
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Start(job);
  job.AgentDisconnected(0, now_);
  const Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.handovers.size(), 1u);
  EXPECT_EQ(tick.handovers[0].from, first);
  EXPECT_EQ(job.nodes().at(0).info.hostname, "s1");
}

TEST_F(SparesTest, WithoutASpareAFixedSizeJobWaitsForTheMachine) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Start(job);
  job.AgentDisconnected(1, now_);
  EXPECT_TRUE(job.Tick(now_).handovers.empty());
  StopAll(job, 0);
  Pass(job, seconds(20));
  EXPECT_FALSE(job.Tick(now_).start_generation);
  // A spare that registers now takes the vacant place.
  const int key = Admit(job, Spare("s"));
  const Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.handovers.size(), 1u);
  EXPECT_EQ(tick.handovers[0].from, key);
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(SparesTest, ASilentSpareIsDroppedAndAStoppingSpareTakesNoPlace) {
  JobStateMachine job(Settings(), now_);
  const int key = Admit(job, Spare("s"));
  now_ += seconds(4);  // no heartbeat from it
  const Decision tick = job.Tick(now_);
  ASSERT_EQ(tick.drop_spares.size(), 1u);
  EXPECT_EQ(tick.drop_spares[0], key);
  EXPECT_TRUE(job.spares().empty());
  // One whose command check failed is kept but never promoted.
  const int unusable = Admit(job, [] {
    AgentInfo spare = Spare("u");
    spare.checks_command = true;
    return spare;
  }());
  job.CommandChecked(unusable, "python3 not found", now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Start(job);
  job.AgentDisconnected(2, now_);
  EXPECT_TRUE(job.Tick(now_).handovers.empty());
  EXPECT_EQ(job.phase(), JobPhase::kStopping);  // not failed for the spare
}

TEST_F(SparesTest, AFlappingHostIsCordonedAndASpareTakesItsPlace) {
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(Settings(), &spare_key);
  WorkerExit crashed;
  crashed.exit_code = 1;
  for (int generation = 0; generation < 2; ++generation) {
    EXPECT_TRUE(job.cordoned().empty());
    job.WorkerExited(1, generation, 0, crashed, now_);
    StopAll(job, generation);
    Pass(job, seconds(1));
    if (generation == 0) Start(job);
  }
  // Two failures of host b within the window: cordoned.
  ASSERT_EQ(job.cordoned().count("b"), 1u);
  EXPECT_EQ(job.cordoned().at("b").failures, 2);
  const Decision tick = job.Tick(now_);
  // Swapped: the spare is machine 1, b's agent a spare.
  ASSERT_EQ(tick.handovers.size(), 2u);
  EXPECT_EQ(tick.handovers[0].from, spare_key);
  EXPECT_EQ(tick.handovers[0].to, 1);
  EXPECT_EQ(tick.handovers[1].from, 1);
  EXPECT_LT(tick.handovers[1].to, 0);
  EXPECT_EQ(job.nodes().at(1).info.hostname, "s");
  ASSERT_EQ(job.spares().size(), 1u);
  EXPECT_EQ(job.spares().begin()->second.info.hostname, "b");
  const GenerationStart next = Start(job);
  EXPECT_EQ(next.world_size, 6);
  // The cordoned host's spare is never promoted, even into a vacancy.
  job.AgentDisconnected(2, now_);
  EXPECT_TRUE(job.Tick(now_).handovers.empty());
  // Until an operator clears it.
  EXPECT_FALSE(job.Uncordon("nohost").ok());
  ASSERT_TRUE(job.Uncordon("b").ok());
  EXPECT_TRUE(job.cordoned().empty());
  const Decision after = job.Tick(now_);
  ASSERT_EQ(after.handovers.size(), 1u);
  EXPECT_EQ(after.handovers[0].to, 2);
}

TEST_F(SparesTest, FailuresOutsideTheWindowDoNotCordon) {
  JobSettings settings = Settings();
  settings.cordon_window = seconds(10);
  int spare_key = 0;
  JobStateMachine job = RunningWithSpare(settings, &spare_key);
  WorkerExit crashed;
  crashed.exit_code = 1;
  for (int generation = 0; generation < 3; ++generation) {
    job.WorkerExited(1, generation, 0, crashed, now_);
    StopAll(job, generation);
    Pass(job, seconds(11));
    Start(job);
  }
  EXPECT_TRUE(job.cordoned().empty());
}

TEST_F(SparesTest, AnElasticJobRunsSmallerWithoutACordonedHost) {
  JobStateMachine job(Settings(/*min_machines=*/2), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Start(job);
  FailTwice(job, 2, 1);
  ASSERT_EQ(job.cordoned().count("c"), 1u);
  const GenerationStart next = Start(job);
  ASSERT_EQ(next.nodes.size(), 2u);
  EXPECT_EQ(next.nodes[0].machine_rank, 0);
  EXPECT_EQ(next.nodes[1].machine_rank, 1);
  EXPECT_EQ(next.world_size, 4);
  // The status shows it, and ps says how to clear it.
  const std::string table = FormatJobTable(DescribeJob(job, now_));
  EXPECT_NE(table.find("cordoned: c (2 failures within 600 s"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("trl-coord uncordon c"), std::string::npos);
}

TEST_F(SparesTest, ACordonedHostWithoutAReplacementKeepsItsRanks) {
  // A fixed-size job with no spare cannot start without the machine: it
  // runs there (said in the generation), instead of standing idle.
  JobStateMachine job(Settings(), now_);
  Admit(job, Agent(0, "a"));
  Admit(job, Agent(1, "b"));
  Admit(job, Agent(2, "c"));
  Start(job);
  FailTwice(job, 0, 0);
  ASSERT_EQ(job.cordoned().count("a"), 1u);
  GenerationStart next = Start(job);
  EXPECT_EQ(next.world_size, 6);
  EXPECT_EQ(next.cordoned_members, std::vector<int>{0});
  // An elastic job keeps it too when fewer than MIN would be left.
  JobStateMachine elastic(Settings(/*min_machines=*/2), now_);
  elastic.RestoreCordons({{"a", Cordon{2, "2 failures"}}});
  Admit(elastic, Agent(0, "a"));
  Admit(elastic, Agent(1, "b"));
  elastic.Tick(now_);  // MIN there: the (zero) wait for more starts
  next = Start(elastic);
  EXPECT_EQ(next.nodes.size(), 2u);
  EXPECT_EQ(next.cordoned_members, std::vector<int>{0});
  // A shortage (no descriptors at start) is not the host's fault.
  WorkerExit short_of_files;
  short_of_files.start_error = "pipe: Too many open files";
  short_of_files.out_of_resources = true;
  elastic.WorkerExited(1, next.generation, 0, short_of_files, now_);
  StopAll(elastic, next.generation);
  Pass(elastic, seconds(1));
  Start(elastic);
  elastic.WorkerExited(1, next.generation + 1, 0, short_of_files, now_);
  EXPECT_EQ(elastic.cordoned().count("b"), 0u);
}

TEST_F(SparesTest, SparesAppearInTheStatusAndTable) {
  JobStateMachine job(Settings(), now_);
  Admit(job, Spare("s"));
  const auto status = DescribeJob(job, now_);
  ASSERT_EQ(status.spares_size(), 1);
  EXPECT_EQ(status.spares(0).hostname(), "s");
  EXPECT_NE(FormatJobTable(status).find("spares: 1 (s "), std::string::npos);
}

}  // namespace
}  // namespace trl

// Restarts, lost machines and rejoins in the job state machine, on a fake
// clock.
#include <gtest/gtest.h>

#include "coordinator/job/state_machine.h"
#include "tests/lib/job_fixtures.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class JobRestartTest : public testing::Test {
 protected:
  TimePoint now_ = TimePoint() + seconds(1000);

  JobSettings Settings(int max_restarts) {
    JobSettings settings;
    settings.job_id = "job";
    settings.num_machines = 2;
    settings.restart.max_restarts = max_restarts;
    settings.restart.initial_backoff = milliseconds(100);
    settings.restart.max_backoff = milliseconds(1000);
    settings.restart.no_restart_exit_codes = {2};
    settings.agent_heartbeat_timeout = seconds(3);
    settings.rejoin_timeout = seconds(60);
    return settings;
  }

  // No lease: nothing to wait out before a machine's ranks move.
  AgentInfo Agent(int m) {
    AgentInfo info = TestAgent(m);
    info.lease = {};
    return info;
  }

  // Starts a generation once Tick says so, with every worker running.
  GenerationStart Start(JobStateMachine& job) {
    EXPECT_TRUE(job.Tick(now_).start_generation);
    GenerationStart start = job.StartGeneration(now_);
    for (int m = 0; m < 2; ++m) {
      for (int local = 0; local < 2; ++local) {
        job.WorkerStarted(m, start.generation, local, 100 * m + local, now_);
      }
    }
    return start;
  }

  // Starts a generation in which every worker but (m, local) starts: that
  // one could not.
  GenerationStart StartAllBut(JobStateMachine& job, int m_out, int local_out) {
    EXPECT_TRUE(job.Tick(now_).start_generation);
    GenerationStart start = job.StartGeneration(now_);
    for (int m = 0; m < 2; ++m) {
      for (int local = 0; local < 2; ++local) {
        if (m == m_out && local == local_out) continue;
        job.WorkerStarted(m, start.generation, local, 100 * m + local, now_);
      }
    }
    return start;
  }

  // Machine 1's stream breaks; machine 0's two workers end on the stop.
  void LoseMachine1(JobStateMachine& job, const GenerationStart& start) {
    job.AgentDisconnected(1, now_);
    WorkerExit terminated;
    terminated.signal = 15;
    job.WorkerExited(0, start.generation, 0, terminated, now_);
    job.WorkerExited(0, start.generation, 1, terminated, now_);
  }

  // Both machines registered, on a ticker that promises a tick every
  // 100 ms (JobSettings::tick_interval).
  JobStateMachine TickedEvery100Ms() {
    JobSettings settings = Settings(3);
    settings.tick_interval = milliseconds(100);
    JobStateMachine job(settings, now_);
    EXPECT_TRUE(job.Register(Agent(0), now_).ok());
    EXPECT_TRUE(job.Register(Agent(1), now_).ok());
    return job;
  }

  // Both machines registered by agents that check the command.
  JobStateMachine RegisteredCheckingTheCommand() {
    JobStateMachine job(Settings(3), now_);
    for (int m = 0; m < 2; ++m) {
      AgentInfo agent = Agent(m);
      agent.checks_command = true;
      EXPECT_TRUE(job.Register(agent, now_).ok());
    }
    return job;
  }

  JobStateMachine Registered(int max_restarts) {
    JobStateMachine job(Settings(max_restarts), now_);
    EXPECT_TRUE(job.Register(Agent(0), now_).ok());
    EXPECT_TRUE(job.Register(Agent(1), now_).ok());
    return job;
  }

  // The survivors of generation `g` exit from our SIGTERM.
  Decision StopOthers(JobStateMachine& job, int64_t g, int failed_machine,
                      int failed_local) {
    Decision last;
    WorkerExit terminated;
    terminated.signal = 15;
    for (int m = 0; m < 2; ++m) {
      for (int local = 0; local < 2; ++local) {
        if (m == failed_machine && local == failed_local) continue;
        last = job.WorkerExited(m, g, local, terminated, now_);
      }
    }
    return last;
  }

  static WorkerExit Code(int code) {
    WorkerExit exit;
    exit.exit_code = code;
    return exit;
  }
};

TEST(RestartPolicyTest, TheFirstRestartIsAtOnceThenBackoffDoublesToTheCap) {
  RestartPolicy policy;
  policy.initial_backoff = milliseconds(100);
  policy.max_backoff = milliseconds(700);
  EXPECT_EQ(policy.BackoffBefore(1), milliseconds(0));
  EXPECT_EQ(policy.BackoffBefore(2), milliseconds(100));
  EXPECT_EQ(policy.BackoffBefore(3), milliseconds(200));
  EXPECT_EQ(policy.BackoffBefore(4), milliseconds(400));
  EXPECT_EQ(policy.BackoffBefore(5), milliseconds(700));
  EXPECT_EQ(policy.BackoffBefore(40), milliseconds(700));
}

TEST_F(JobRestartTest, FailedWorkerRestartsTheWholeJobAtOnce) {
  JobStateMachine job = Registered(3);
  const GenerationStart first = Start(job);
  Decision decision = job.WorkerExited(1, first.generation, 0, Code(1), now_);
  ASSERT_TRUE(decision.stop_generation.has_value());
  decision = StopOthers(job, first.generation, 1, 0);
  EXPECT_FALSE(decision.finished.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  EXPECT_EQ(job.restarts_used(), 1);

  // The first restart waits for no backoff: one failure is no crash loop.
  EXPECT_EQ(job.next_start_not_before(), now_);
  const GenerationStart second = Start(job);
  EXPECT_EQ(second.generation, first.generation + 1);
  EXPECT_EQ(second.world_size, 4);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);

  // Invariant 4: a late exit from generation 0 changes nothing.
  decision = job.WorkerExited(0, first.generation, 0, Code(9), now_);
  EXPECT_FALSE(decision.stop_generation.has_value());
  EXPECT_EQ(job.phase(), JobPhase::kRunning);

  for (int m = 0; m < 2; ++m) {
    for (int local = 0; local < 2; ++local) {
      decision = job.WorkerExited(m, second.generation, local, Code(0), now_);
    }
  }
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kSucceeded);
  EXPECT_EQ(job.failures().size(), 1u);
}

TEST_F(JobRestartTest, LaterRestartsBackOffDoubling) {
  JobStateMachine job = Registered(3);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const GenerationStart start = Start(job);
    job.WorkerExited(0, start.generation, 0, Code(1), now_);
    StopOthers(job, start.generation, 0, 0);
  }
  // The second restart: the first backoff.
  EXPECT_EQ(job.restarts_used(), 2);
  EXPECT_FALSE(job.Tick(now_ + milliseconds(99)).start_generation);
  now_ += milliseconds(100);
  const GenerationStart third = Start(job);
  job.WorkerExited(0, third.generation, 0, Code(1), now_);
  StopOthers(job, third.generation, 0, 0);
  // The third: twice as long.
  EXPECT_EQ(job.restarts_used(), 3);
  EXPECT_FALSE(job.Tick(now_ + milliseconds(199)).start_generation);
  EXPECT_TRUE(job.Tick(now_ + milliseconds(200)).start_generation);
}

TEST_F(JobRestartTest, ExhaustedBudgetFailsTheJob) {
  JobStateMachine job = Registered(1);
  GenerationStart start = Start(job);
  job.WorkerExited(0, start.generation, 1, Code(1), now_);
  StopOthers(job, start.generation, 0, 1);
  now_ += seconds(1);
  start = Start(job);
  job.WorkerExited(1, start.generation, 1, Code(5), now_);
  const Decision decision = StopOthers(job, start.generation, 1, 1);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_EQ(decision.finished->exit_code, 5);
  EXPECT_NE(decision.finished->summary.find("(all 1 restarts used)"),
            std::string::npos)
      << decision.finished->summary;
  EXPECT_EQ(job.generation(), 1);
}

TEST_F(JobRestartTest, NoRestartExitCodeEndsTheJobAtOnce) {
  JobStateMachine job = Registered(5);
  const GenerationStart start = Start(job);
  job.WorkerExited(0, start.generation, 0, Code(2), now_);
  const Decision decision = StopOthers(job, start.generation, 0, 0);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->exit_code, 2);
  EXPECT_NE(decision.finished->summary.find(
                "exit code 2 is marked as not worth a restart"),
            std::string::npos);
  EXPECT_EQ(job.restarts_used(), 0);
}

// The next deadline is the least recently heard agent's, so a silent agent
// is noticed the moment its timeout passes, not at the next tick.
TEST_F(JobRestartTest, NextDeadlineIsTheQuietestAgentsTimeout) {
  JobStateMachine job = Registered(2);
  Start(job);
  const TimePoint started = now_;
  now_ += milliseconds(700);
  job.Heartbeat(0, now_);  // machine 1 is now the quietest
  auto deadline = job.NextDeadline(now_);
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GT(*deadline, started + seconds(3));
  EXPECT_LT(*deadline, started + seconds(3) + milliseconds(1));
  // Just before it, nobody is lost; at it, machine 1 only.
  EXPECT_TRUE(job.Tick(started + seconds(3)).drop_agents.empty());
  Decision decision = job.Tick(*deadline);
  EXPECT_EQ(decision.drop_agents, std::vector<int>{1});
  // Then machine 0's own deadline, 700 ms later.
  deadline = job.NextDeadline(*deadline);
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, started + milliseconds(3700));
}

// Nemesis (stop_coord_long): a coordinator frozen for longer than the
// heartbeat timeout declared every agent silent on waking, before it read
// the heartbeats queued meanwhile. A gap between ticks beyond the promised
// interval is its own stall, and the agents are not blamed for it.
TEST_F(JobRestartTest, TheCoordinatorsOwnStallIsNotAnAgentsSilence) {
  JobStateMachine job = TickedEvery100Ms();
  Start(job);
  for (int i = 0; i < 25; ++i) {  // 2.5 s of ticks on time, both heard
    now_ += milliseconds(100);
    job.Heartbeat(0, now_);
    job.Heartbeat(1, now_);
    EXPECT_TRUE(job.Tick(now_).drop_agents.empty());
  }
  EXPECT_EQ(job.own_stalls(), std::chrono::steady_clock::duration{});
  now_ += seconds(4);  // then frozen for 4 s
  EXPECT_TRUE(job.Tick(now_).drop_agents.empty());
  EXPECT_TRUE(job.own_stalls() == seconds(4) - milliseconds(100));
  // The agents have the rest of their timeout from there, no more: 0.1 s
  // of the gap counted (one tick's), then ticks on time.
  const TimePoint woke = now_;
  for (int i = 0; i < 40; ++i) {
    now_ += milliseconds(100);
    job.Heartbeat(0, now_);
    const Decision decision = job.Tick(now_);
    if (!decision.drop_agents.empty()) {
      EXPECT_EQ(decision.drop_agents, std::vector<int>{1});
      EXPECT_EQ(now_ - woke, milliseconds(3000));
      return;
    }
  }
  ADD_FAILURE() << "machine 1 was never found silent after the stall";
}

TEST_F(JobRestartTest, TicksOnTimeExcuseNothing) {
  JobStateMachine job = TickedEvery100Ms();
  Start(job);
  for (int i = 0; i < 35; ++i) {  // 3.5 s of ticks 100 ms apart
    now_ += milliseconds(100);
    job.Heartbeat(0, now_);
    const Decision decision = job.Tick(now_);
    if (!decision.drop_agents.empty()) {
      EXPECT_EQ(decision.drop_agents, std::vector<int>{1});
      EXPECT_EQ(i, 30);  // just past the 3 s timeout
      EXPECT_EQ(job.own_stalls(), std::chrono::steady_clock::duration{});
      return;
    }
  }
  ADD_FAILURE() << "machine 1 was never found silent";
}

TEST_F(JobRestartTest, NoRankStartsBeforeEveryAgentSaysTheCommandRuns) {
  JobStateMachine job = RegisteredCheckingTheCommand();
  EXPECT_FALSE(job.Tick(now_).start_generation);
  EXPECT_FALSE(job.CommandChecked(0, "", now_).finished.has_value());
  EXPECT_FALSE(job.Tick(now_).start_generation);  // machine 1 has not said
  job.CommandChecked(1, "", now_);
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(JobRestartTest, AMachineBackWithACommandToCheckHoldsTheNextGeneration) {
  // Every command was checked for generation 0; machine 0's agent is lost
  // and another registers (on the same host), checking the command anew:
  // generation 1 waits for its word, as generation 0 did for both.
  JobStateMachine job = RegisteredCheckingTheCommand();
  job.CommandChecked(0, "", now_);
  job.CommandChecked(1, "", now_);
  const GenerationStart first = Start(job);
  job.AgentDisconnected(0, now_);
  WorkerExit terminated;
  terminated.signal = 15;
  job.WorkerExited(1, first.generation, 0, terminated, now_);
  job.WorkerExited(1, first.generation, 1, terminated, now_);
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  AgentInfo back = Agent(0);
  back.checks_command = true;
  ASSERT_TRUE(job.Register(back, now_).ok());
  now_ += seconds(1);  // past the backoff; both heard from
  job.Heartbeat(0, now_);
  job.Heartbeat(1, now_);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);
  job.CommandChecked(0, "", now_);
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(JobRestartTest, ACommandThatCannotRunFailsTheJobWithExit2) {
  JobStateMachine job = RegisteredCheckingTheCommand();
  job.CommandChecked(0, "", now_);
  const Decision decision =
      job.CommandChecked(1, "the script x.py is not a file", now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_EQ(decision.finished->exit_code, 2);
  EXPECT_EQ(decision.finished->summary,
            "machine 1 (host node1) cannot run the command: the script x.py "
            "is not a file; nothing was started");
  EXPECT_FALSE(decision.start_generation);
  EXPECT_EQ(job.generation(), -1);  // no generation ever began
}

TEST_F(JobRestartTest, SilentAgentIsLostAndTheJobWaitsForItToRejoin) {
  JobStateMachine job = Registered(2);
  const GenerationStart start = Start(job);
  now_ += seconds(2);
  job.Heartbeat(0, now_);
  EXPECT_TRUE(job.Tick(now_).drop_agents.empty());
  now_ += milliseconds(1500);  // machine 1 silent for 3.5 s
  job.Heartbeat(0, now_);
  Decision decision = job.Tick(now_);
  ASSERT_EQ(decision.drop_agents, std::vector<int>{1});
  ASSERT_TRUE(decision.stop_generation.has_value());
  EXPECT_NE(decision.stop_generation->find("sent no heartbeat for 3.5 s"),
            std::string::npos)
      << *decision.stop_generation;
  WorkerExit terminated;
  terminated.signal = 15;
  job.WorkerExited(0, start.generation, 0, terminated, now_);
  job.WorkerExited(0, start.generation, 1, terminated, now_);
  EXPECT_EQ(job.phase(), JobPhase::kRestarting);

  // Past the backoff, still no start: machine 1 is not back.
  now_ += seconds(1);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  // An unknown machine cannot take its place; machine 1 itself can.
  AgentInfo stranger = Agent(1);
  stranger.local_world_size = 3;
  EXPECT_FALSE(job.Register(stranger, now_).ok());
  // Nor can any agent claim more workers than the config gives a machine.
  JobSettings strict = Settings(0);
  strict.local_world_size = 2;
  JobStateMachine bounded(strict, now_);
  AgentInfo greedy = Agent(0);
  greedy.local_world_size = 1000000000;
  const absl::Status refused = bounded.Register(greedy, now_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("local_world_size 1000000000 must be 2"),
            std::string::npos)
      << refused;
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  const GenerationStart next = Start(job);
  EXPECT_EQ(next.generation, 1);
}

TEST_F(JobRestartTest, MachineThatNeverRejoinsFailsTheJob) {
  JobStateMachine job = Registered(2);
  LoseMachine1(job, Start(job));
  job.Heartbeat(0, now_ + seconds(59));  // machine 0 stays alive
  EXPECT_FALSE(job.Tick(now_ + seconds(59)).finished.has_value());
  job.Heartbeat(0, now_ + seconds(61));
  job.Heartbeat(0, now_ + seconds(61));
  const Decision decision = job.Tick(now_ + seconds(61));
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_NE(decision.finished->summary.find(
                "machine 1 (host node1) disconnected and did not rejoin "
                "within 60 s"),
            std::string::npos)
      << decision.finished->summary;
}

// The edge ticks at NextDeadline when it is sooner than its interval. A
// deadline that has passed without Tick changing anything (the backoff is
// over, a machine is still away) must not come back, or the edge ticks in
// a loop: the coordinator spun at 100 % of two cores waiting for a rejoin.
TEST_F(JobRestartTest, WaitingForARejoinTicksOnlyAtItsInterval) {
  JobStateMachine job = Registered(2);
  LoseMachine1(job, Start(job));
  ASSERT_EQ(job.phase(), JobPhase::kRestarting);
  const TimePoint lost = now_;
  const auto interval = seconds(1);  // the edge's monitor interval
  int ticks = 0;
  while (!IsFinished(job.phase()) && ticks < 1000) {
    TimePoint next = now_ + interval;
    if (auto deadline = job.NextDeadline(now_)) {
      ASSERT_GT(*deadline, now_) << "after " << ticks << " ticks";
      next = std::min(next, *deadline);
    }
    now_ = next;
    job.Heartbeat(0, now_);  // machine 0 stays alive
    job.Tick(now_);
    ++ticks;
  }
  // Failed once the 60 s rejoin timeout passed, after about one tick per
  // interval plus the backoff's end and the timeout itself.
  EXPECT_EQ(job.phase(), JobPhase::kFailed);
  EXPECT_GT(now_ - lost, seconds(60));
  EXPECT_LE(now_ - lost, seconds(60) + milliseconds(1));
  EXPECT_LE(ticks, 63);
}

TEST_F(JobRestartTest, StopWhileRestartingEndsAtOnce) {
  JobStateMachine job = Registered(2);
  const GenerationStart start = Start(job);
  job.WorkerExited(0, start.generation, 0, Code(1), now_);
  StopOthers(job, start.generation, 0, 0);
  ASSERT_EQ(job.phase(), JobPhase::kRestarting);
  const Decision decision = job.StopRequested("SIGTERM", 143, now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kStopped);
  EXPECT_FALSE(job.Tick(now_ + seconds(5)).start_generation);
}

TEST_F(JobRestartTest, ResumedJobContinuesWithTheNextGeneration) {
  JobStateMachine job(Settings(3), now_);
  job.ResumeAfter(4, 2, {}, TimePoint(),
                  {{0, Agent(0).host()}, {1, Agent(1).host()}});
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());
  const GenerationStart start = Start(job);
  EXPECT_EQ(start.generation, 5);
  EXPECT_EQ(job.restarts_used(), 2);
}

TEST_F(JobRestartTest, MachinesThatNeverRegisterFailTheJob) {
  JobSettings settings = Settings(0);
  settings.registration_timeout = seconds(900);
  JobStateMachine job(settings, now_);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  EXPECT_FALSE(job.Tick(now_ + seconds(899)).finished.has_value());
  const Decision decision = job.Tick(now_ + seconds(901));
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_NE(decision.finished->summary.find(
                "machine(s) 1 did not register within 900 s"),
            std::string::npos)
      << decision.finished->summary;
}

TEST_F(JobRestartTest, HeartbeatsAreNotCheckedWhileWaitingForAgents) {
  JobStateMachine job(Settings(0), now_);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  EXPECT_TRUE(job.Tick(now_ + seconds(30)).drop_agents.empty());
}

// Invariant 1 when a machine is taken over: its old agent (frozen, or cut
// off) may keep its workers until its lease ends, and then for the stop
// grace; another agent gets the machine's ranks only after that.
TEST_F(JobRestartTest, AnotherAgentGetsALostMachinesRanksOnlyAfterItsLease) {
  JobSettings settings = Settings(3);
  settings.stop_grace = seconds(2);
  JobStateMachine job(settings, now_);
  AgentInfo first = Agent(1);
  first.agent_pid = 111;
  first.lease = seconds(4);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  ASSERT_TRUE(job.Register(first, now_).ok());
  const GenerationStart start = Start(job);
  LoseMachine1(job, start);  // declared lost now: its lease ends by now + 4 s
  AgentInfo replacement = Agent(1);
  replacement.hostname = "spare";
  replacement.agent_pid = 222;
  replacement.lease = seconds(4);
  now_ += seconds(1);
  ASSERT_TRUE(job.Register(replacement, now_).ok());
  EXPECT_FALSE(job.Tick(now_).start_generation);
  now_ += seconds(4);  // 5 s after the loss: lease over, grace not yet
  job.Heartbeat(0, now_);
  job.Heartbeat(1, now_);
  EXPECT_FALSE(job.Tick(now_).start_generation);
  const auto next = job.NextDeadline(now_);
  ASSERT_TRUE(next.has_value());
  // 4 s lease + 2 s grace + 2 s for SIGKILLed processes, after the loss.
  EXPECT_EQ(*next, now_ + seconds(3));
  now_ += seconds(3);
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

TEST_F(JobRestartTest, AnAgentOnTheSameHostGetsTheRanksBackAtOnce) {
  // The lost agent itself stopped its workers before it reconnected; a new
  // one on the same host killed what the old one left before registering.
  for (int pid : {111, 222}) {
    JobStateMachine job(Settings(3), now_);
    AgentInfo agent = Agent(1);
    agent.agent_pid = 111;
    agent.lease = seconds(4);
    ASSERT_TRUE(job.Register(Agent(0), now_).ok());
    ASSERT_TRUE(job.Register(agent, now_).ok());
    const GenerationStart start = Start(job);
    LoseMachine1(job, start);
    now_ += seconds(1);
    agent.agent_pid = pid;
    ASSERT_TRUE(job.Register(agent, now_).ok());
    EXPECT_TRUE(job.Tick(now_).start_generation) << "pid " << pid;
  }
}

// The same name on another machine (a cloned image) is another host: the
// new agent there cannot see the old one's workers, so it waits as well.
TEST_F(JobRestartTest, AHostOfTheSameNameOnAnotherMachineWaitsForTheLease) {
  JobStateMachine job(Settings(3), now_);
  AgentInfo first = Agent(1);
  first.lease = seconds(4);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  ASSERT_TRUE(job.Register(first, now_).ok());
  const GenerationStart start = Start(job);
  LoseMachine1(job, start);
  AgentInfo clone = first;
  clone.host_id = "boot-other/pidns:4026531836";
  now_ += seconds(1);
  ASSERT_TRUE(job.Register(clone, now_).ok());
  EXPECT_FALSE(job.Tick(now_).start_generation);
  now_ += seconds(4) + job.settings().stop_grace + seconds(2);
  job.Heartbeat(0, now_);
  job.Heartbeat(1, now_);
  EXPECT_TRUE(job.Tick(now_).start_generation);
}

// A restarted coordinator does not know when the old agents last heard
// from its predecessor, only that it was before now: an agent on another
// host gets a machine's ranks once the old agent's lease and grace,
// counted from the restart, are over; the agents where the machines ran
// before get them at once.
TEST_F(JobRestartTest, AfterACoordinatorRestartAnotherHostWaitsForTheOldLease) {
  JobSettings settings = Settings(3);
  settings.stop_grace = seconds(2);
  const std::map<int, HostIdentity> before = {{0, Agent(0).host()},
                                              {1, Agent(1).host()}};
  {
    JobStateMachine job(settings, now_);
    job.ResumeAfter(4, 1, {}, TimePoint(), before);
    ASSERT_TRUE(job.Register(Agent(0), now_).ok());
    ASSERT_TRUE(job.Register(Agent(1), now_).ok());
    EXPECT_TRUE(job.Tick(now_).start_generation) << "the same hosts";
  }
  JobStateMachine job(settings, now_);
  job.ResumeAfter(4, 1, {}, TimePoint(), before);
  AgentInfo spare = Agent(1);
  spare.hostname = "spare";
  spare.host_id = "boot-spare/pidns:4026531836";
  spare.lease = seconds(4);
  ASSERT_TRUE(job.Register(Agent(0), now_).ok());
  ASSERT_TRUE(job.Register(spare, now_ + seconds(1)).ok());
  EXPECT_FALSE(job.Tick(now_ + seconds(1)).start_generation);
  // 4 s lease + 2 s grace + 2 s for SIGKILLed processes, after the restart.
  const auto next = job.NextDeadline(now_ + seconds(1));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, now_ + seconds(8));
  EXPECT_FALSE(job.Tick(now_ + seconds(8) - milliseconds(1)).start_generation);
  EXPECT_TRUE(job.Tick(now_ + seconds(8)).start_generation);
}

// Invariant 5: a machine cut off in the job's last second, after every
// other rank exited 0, may have finished too; its agent's report decides.
class LastSecondLossTest : public JobRestartTest {
 protected:
  // Generation 0 runs; machine 0's ranks exit 0; machine 1 is cut off.
  JobStateMachine CutOffAtTheEnd(int max_restarts) {
    JobStateMachine job = Registered(max_restarts);
    start_ = Start(job);
    job.WorkerExited(0, start_.generation, 0, Code(0), now_);
    job.WorkerExited(0, start_.generation, 1, Code(0), now_);
    const Decision lost = job.AgentDisconnected(1, now_);
    EXPECT_FALSE(lost.stop_generation.has_value());
    EXPECT_FALSE(lost.finished.has_value());
    EXPECT_FALSE(job.Tick(now_ + seconds(1)).finished.has_value());
    return job;
  }
  AgentInfo Back(std::vector<int> exit_codes) {
    AgentInfo agent = Agent(1);
    agent.report_generation = start_.generation;
    for (size_t local = 0; local < exit_codes.size(); ++local) {
      agent.reported_exits[local] = Code(exit_codes[local]);
    }
    return agent;
  }
  GenerationStart start_;
};

TEST_F(LastSecondLossTest, AllExitedZeroIsASuccess) {
  JobStateMachine job = CutOffAtTheEnd(0);
  now_ += seconds(2);
  ASSERT_TRUE(job.Register(Back({0, 0}), now_).ok());
  const Decision decision = job.Tick(now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kSucceeded);
  EXPECT_EQ(decision.finished->exit_code, 0);
}

TEST_F(LastSecondLossTest, AReportedFailureIsTheJobsFailure) {
  JobStateMachine job = CutOffAtTheEnd(0);
  ASSERT_TRUE(job.Register(Back({0, 3}), now_).ok());
  const Decision decision = job.Tick(now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->exit_code, 3);
  EXPECT_NE(decision.finished->summary.find("rank 3"), std::string::npos)
      << decision.finished->summary;
}

TEST_F(LastSecondLossTest, NoReportIsALostMachine) {
  JobStateMachine job = CutOffAtTheEnd(1);
  ASSERT_TRUE(job.Register(Agent(1), now_).ok());  // no report
  job.Tick(now_);
  EXPECT_EQ(job.restarts_used(), 1);  // a restart, as for any lost machine
  ASSERT_FALSE(job.failures().empty());
  EXPECT_NE(job.failures().back().reason.find("without the outcome"),
            std::string::npos);
}

TEST_F(LastSecondLossTest,
       AMachineThatNeverComesBackFailsAfterTheRejoinTimeout) {
  JobStateMachine job = CutOffAtTheEnd(0);
  job.Heartbeat(0, now_ + seconds(59));
  EXPECT_FALSE(job.Tick(now_ + seconds(59)).finished.has_value());
  const auto next = job.NextDeadline(now_ + seconds(59));
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, now_ + seconds(60) + milliseconds(1));
  const Decision decision = job.Tick(now_ + seconds(61));
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
}

// A machine whose ranks have all exited 0 has nothing left to lose: its
// agent cut off afterwards does not fail the job (before: a restart, the
// whole job run again).
TEST_F(LastSecondLossTest, AMachineLostAfterItsRanksExitedZeroIsNoFailure) {
  JobStateMachine job = Registered(0);
  start_ = Start(job);
  job.WorkerExited(1, start_.generation, 0, Code(0), now_);
  job.WorkerExited(1, start_.generation, 1, Code(0), now_);
  const Decision lost = job.AgentDisconnected(1, now_);
  EXPECT_FALSE(lost.stop_generation.has_value());
  EXPECT_FALSE(lost.finished.has_value());
  job.WorkerExited(0, start_.generation, 0, Code(0), now_);
  const Decision last =
      job.WorkerExited(0, start_.generation, 1, Code(0), now_);
  ASSERT_TRUE(last.finished.has_value());
  EXPECT_EQ(last.finished->phase, JobPhase::kSucceeded);
  EXPECT_TRUE(job.failures().empty());
}

// Two machines cut off together (a switch) after the third's ranks exited
// 0: both are awaited, and their reports decide.
class ThreeMachineLastSecondTest : public LastSecondLossTest {
 protected:
  JobStateMachine CutOffTwo() {
    JobSettings settings = Settings(0);
    settings.num_machines = 3;
    JobStateMachine job(settings, now_);
    for (int m = 0; m < 3; ++m) EXPECT_TRUE(job.Register(Agent(m), now_).ok());
    EXPECT_TRUE(job.Tick(now_).start_generation);
    start_ = job.StartGeneration(now_);
    for (int m = 0; m < 3; ++m) {
      for (int local = 0; local < 2; ++local) {
        job.WorkerStarted(m, start_.generation, local, 100 * m + local, now_);
      }
    }
    job.Heartbeat(0, now_ + seconds(2));
    job.WorkerExited(0, start_.generation, 0, Code(0), now_ + seconds(2));
    job.WorkerExited(0, start_.generation, 1, Code(0), now_ + seconds(2));
    // Machines 1 and 2 fall silent together: lost in one tick.
    now_ += seconds(4);
    job.Heartbeat(0, now_);
    const Decision lost = job.Tick(now_);
    EXPECT_EQ(lost.drop_agents, (std::vector<int>{1, 2}));
    EXPECT_FALSE(lost.stop_generation.has_value());
    EXPECT_FALSE(lost.finished.has_value());
    return job;
  }
  AgentInfo BackAs(int m, std::vector<int> exit_codes) {
    AgentInfo agent = Back(exit_codes);
    const AgentInfo fresh = Agent(m);
    agent.machine_rank = m;
    agent.hostname = fresh.hostname;
    agent.host_id = fresh.host_id;
    return agent;
  }
};

TEST_F(ThreeMachineLastSecondTest, BothReportZeroIsASuccess) {
  JobStateMachine job = CutOffTwo();
  ASSERT_TRUE(job.Register(BackAs(2, {0, 0}), now_).ok());
  EXPECT_FALSE(job.Tick(now_).finished.has_value()) << "machine 1 is awaited";
  ASSERT_TRUE(job.Register(BackAs(1, {0, 0}), now_).ok());
  const Decision decision = job.Tick(now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kSucceeded);
}

TEST_F(ThreeMachineLastSecondTest, OneThatNeverComesBackFailsTheJob) {
  JobStateMachine job = CutOffTwo();
  ASSERT_TRUE(job.Register(BackAs(1, {0, 0}), now_).ok());
  EXPECT_FALSE(job.Tick(now_).finished.has_value());
  job.Heartbeat(0, now_ + seconds(61));
  job.Heartbeat(1, now_ + seconds(61));
  const Decision decision = job.Tick(now_ + seconds(61));
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->phase, JobPhase::kFailed);
  EXPECT_NE(decision.finished->summary.find("machine 2"), std::string::npos)
      << decision.finished->summary;
}

TEST_F(ThreeMachineLastSecondTest, AReportedFailureFailsTheJobAtOnce) {
  JobStateMachine job = CutOffTwo();
  ASSERT_TRUE(job.Register(BackAs(2, {0, 7}), now_).ok());
  const Decision decision = job.Tick(now_);
  ASSERT_TRUE(decision.finished.has_value());
  EXPECT_EQ(decision.finished->exit_code, 7);
}

// A worker that could not start for want of descriptors or memory (a flood
// of connections, a greedy neighbour) is the machine's trouble: the job
// tries again without spending its budget, a few times in a row.
TEST_F(JobRestartTest, AStartWithoutResourcesDoesNotSpendTheBudget) {
  JobStateMachine job = Registered(0);  // no restart budget at all
  WorkerExit no_descriptors;
  no_descriptors.start_error = "pipe: Too many open files";
  no_descriptors.out_of_resources = true;
  int64_t generation = -1;
  for (int attempt = 0; attempt < 5; ++attempt) {
    now_ += seconds(60);  // past any backoff
    job.Heartbeat(0, now_);
    job.Heartbeat(1, now_);
    const GenerationStart start = StartAllBut(job, 1, 0);
    EXPECT_GT(start.generation, generation);
    generation = start.generation;
    job.WorkerExited(1, start.generation, 0, no_descriptors, now_);
    StopOthers(job, start.generation, 1, 0);
    EXPECT_EQ(job.phase(), JobPhase::kRestarting) << "attempt " << attempt;
    EXPECT_EQ(job.restarts_used(), 0);
  }
  // A machine that never recovers still ends the job.
  now_ += seconds(60);
  job.Heartbeat(0, now_);
  job.Heartbeat(1, now_);
  const GenerationStart start = StartAllBut(job, 1, 0);
  job.WorkerExited(1, start.generation, 0, no_descriptors, now_);
  const Decision last = StopOthers(job, start.generation, 1, 0);
  ASSERT_TRUE(last.finished.has_value());
  EXPECT_EQ(last.finished->phase, JobPhase::kFailed);
}

}  // namespace
}  // namespace trl

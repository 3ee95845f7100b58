// The agent's core (agent/core/agent_core.h) on a made-up clock: registration,
// the lease, fencing, the heartbeat path, stop escalation and rejoin, with
// no process, socket or sleep.
#include "agent/core/agent_core.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using Time = AgentCore::Time;

class AgentCoreTest : public ::testing::Test {
 protected:
  AgentCoreTest() : core_(Settings()) {}

  static AgentCoreSettings Settings() {
    AgentCoreSettings settings;
    settings.heartbeat_interval = milliseconds(1000);
    settings.lease = milliseconds(4000);
    settings.lease_grace = milliseconds(200);
    settings.connect_timeout = milliseconds(900000);
    settings.reconnect_timeout = milliseconds(120000);
    return settings;
  }

  Time At(int64_t ms) const { return Time() + milliseconds(ms); }

  pb::AgentMessage Start(int64_t ms = 0) {
    pb::AgentRegistration registration;
    registration.set_machine_rank(1);
    registration.set_local_world_size(2);
    registration.set_checks_command(true);
    pb::AgentMessage hello = core_.StartSession(registration, At(ms));
    core_.StreamMessageSent(At(ms));  // the edge writes it
    sent_ = 1;
    return hello;
  }

  // The agent sent a message at `ms` and `message` is the coordinator's
  // word written once it had read it (what keeps the lease).
  AgentEffects Heard(pb::CoordinatorMessage message, int64_t ms,
                     int64_t read_ms) {
    core_.StreamMessageSent(At(ms));
    message.set_agent_messages_read(++sent_);
    return core_.Received(message, At(read_ms));
  }
  AgentEffects Heard(pb::CoordinatorMessage message, int64_t ms) {
    return Heard(std::move(message), ms, ms);
  }

  AgentEffects Reply(bool accepted, int udp_port = 0, int64_t ms = 0) {
    pb::CoordinatorMessage message;
    auto* reply = message.mutable_registration_reply();
    reply->set_accepted(accepted);
    reply->set_job_id("job-1");
    reply->set_heartbeat_udp_port(udp_port);
    reply->set_heartbeat_session(7);
    reply->set_heartbeat_key("k");
    return Heard(message, ms);
  }

  AgentEffects Assign(int64_t generation, std::string job_id = "job-1",
                      int64_t ms = 0) {
    pb::CoordinatorMessage message;
    auto* a = message.mutable_assignment();
    a->set_job_id(job_id);
    a->set_run_id("run-of-" + job_id);
    a->set_generation(generation);
    a->set_machine_rank(1);
    a->set_rank_offset(2);
    a->set_local_world_size(2);
    a->add_argv("train.py");
    return Heard(message, ms);
  }

  AgentEffects Stop(int64_t generation, int signal = 0) {
    pb::CoordinatorMessage message;
    message.mutable_stop()->set_generation(generation);
    message.mutable_stop()->set_signal(signal);
    return Heard(message, 0);
  }

  AgentEffects Exit(int64_t generation, int local_rank, int code,
                    bool own_end = false) {
    pb::WorkerExited exited;
    exited.set_generation(generation);
    exited.set_local_rank(local_rank);
    exited.set_exit_code(code);
    exited.add_last_lines("a line");
    return core_.WorkerExited(exited, own_end);
  }

  AgentCore core_;
  uint64_t sent_ = 0;  // stream messages the agent wrote this session
};

TEST_F(AgentCoreTest, AnAcceptedRegistrationSweepsBeforeAnythingElse) {
  const pb::AgentMessage hello = Start();
  ASSERT_TRUE(hello.has_registration());
  EXPECT_EQ(hello.registration().machine_rank(), 1);
  const AgentEffects effects = Reply(true, 29500);
  EXPECT_TRUE(effects.sweep_stale);
  ASSERT_TRUE(effects.open_datagrams.has_value());
  EXPECT_EQ(effects.open_datagrams->port, 29500);
  EXPECT_EQ(effects.open_datagrams->session, 7u);
  EXPECT_TRUE(effects.check_command);
  EXPECT_FALSE(effects.end.has_value());
}

TEST_F(AgentCoreTest, ARefusedRegistrationEndsTheSessionWithExitTwo) {
  Start();
  const AgentEffects effects = Reply(false);
  EXPECT_FALSE(effects.sweep_stale);  // a healthy agent's workers live on
  ASSERT_TRUE(effects.end.has_value());
  EXPECT_EQ(effects.end->kind, SessionEnd::kRefused);
  EXPECT_EQ(core_.AfterSession(*effects.end).rejoin, false);
  EXPECT_EQ(core_.AfterSession(*effects.end).exit_code, 2);
}

TEST_F(AgentCoreTest, DatagramsAreNotOpenedWhenTheAgentDoesNotWantThem) {
  AgentCoreSettings settings = Settings();
  settings.udp_heartbeats = false;
  AgentCore core(settings);
  core.StartSession(pb::AgentRegistration(), At(0));
  pb::CoordinatorMessage message;
  message.mutable_registration_reply()->set_accepted(true);
  message.mutable_registration_reply()->set_heartbeat_udp_port(29500);
  EXPECT_FALSE(core.Received(message, At(0)).open_datagrams.has_value());
}

TEST_F(AgentCoreTest, TheLeaseRunsOutOnlyAfterItsLengthAndTheGrace) {
  Start(0);
  EXPECT_FALSE(core_.LeaseAt(At(4000)).expired);
  // Looks expired: the reader is given the grace to take what waits.
  AgentCore::Lease lease = core_.LeaseAt(At(4001));
  EXPECT_FALSE(lease.expired);
  EXPECT_EQ(lease.check_again, At(4201));
  EXPECT_FALSE(core_.LeaseAt(At(4100)).expired);
  EXPECT_TRUE(core_.LeaseAt(At(4201)).expired);
  EXPECT_TRUE(core_.lease_expired());
  // An expired lease stays expired, and no heartbeat goes out after it.
  Reply(true, 0, 4300);
  EXPECT_TRUE(core_.LeaseAt(At(4300)).expired);
  const AgentCore::Heartbeat beat = core_.HeartbeatAt(At(5000), false);
  EXPECT_FALSE(beat.stream || beat.datagram);
}

TEST_F(AgentCoreTest, WordsReadDuringTheGraceKeepTheLease) {
  Start(0);
  EXPECT_FALSE(core_.LeaseAt(At(4001)).expired);
  Reply(true, 0, 4100);  // the frozen process's unread words
  EXPECT_FALSE(core_.LeaseAt(At(4300)).expired);
  EXPECT_FALSE(core_.LeaseAt(At(8100)).expired);
  EXPECT_FALSE(core_.LeaseAt(At(8200)).expired);
  EXPECT_TRUE(core_.LeaseAt(At(8400)).expired);
}

TEST_F(AgentCoreTest, AcknowledgedDatagramsKeepTheLease) {
  Start(0);
  core_.UdpAcked(At(3500));  // the heartbeat sent at 3.5 s
  EXPECT_FALSE(core_.LeaseAt(At(7400)).expired);
  EXPECT_FALSE(core_.LeaseAt(At(7600)).expired);
  EXPECT_TRUE(core_.LeaseAt(At(7800)).expired);
}

TEST_F(AgentCoreTest, TheFenceFollowsTheLeaseAndOutlivesTheSession) {
  // What the guardian enforces: the lease, its grace and the kill grace
  // from the last word; nothing before a session or during a sweep; still
  // there once the session is lost (its workers are still stopping).
  EXPECT_FALSE(core_.FenceDeadline().has_value());
  Start(0);
  EXPECT_EQ(core_.FenceDeadline(), At(4000 + 200 + 300));
  Reply(true, 0, 1000);
  EXPECT_EQ(core_.FenceDeadline(), At(5500));
  core_.UdpAcked(At(2000));
  EXPECT_EQ(core_.FenceDeadline(), At(6500));
  core_.SweepStarted();
  EXPECT_FALSE(core_.FenceDeadline().has_value());
  core_.SweepEnded();
  core_.StreamEnded();
  EXPECT_EQ(core_.FenceDeadline(), At(6500));
  EXPECT_EQ(core_.FenceBound(), milliseconds(200 + 300 + 200));
}

TEST_F(AgentCoreTest, AFencedStopKeepsNoLeaseAndAsksForTheFencesGrace) {
  // A one-way partition: the coordinator no longer hears this agent and
  // says the machine is lost. That word must not renew the lease it
  // fences, and the workers get the fence's grace, not the stop grace.
  Start(0);
  Reply(true, 0, 0);
  Assign(3, "job-1", 0);
  core_.WorkersStarted(3, {{0, 100}, {1, 101}});
  pb::CoordinatorMessage message;
  message.mutable_stop()->set_generation(3);
  message.mutable_stop()->set_fenced(true);
  // It counts what the coordinator had read when it fenced the machine
  // (here a heartbeat sent at 3 s): still no renewal.
  const AgentEffects effects = Heard(message, 3000);
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_TRUE(effects.fence_grace);
  EXPECT_EQ(core_.FenceDeadline(), At(4500));
  EXPECT_TRUE(core_.LeaseAt(At(4201)).expired ||
              core_.LeaseAt(At(4401)).expired);
  // An ordinary stop is a word from the coordinator, with the stop grace.
  AgentCore fresh(Settings());
  fresh.StartSession(pb::AgentRegistration(), At(0));
  fresh.StreamMessageSent(At(0));
  fresh.StreamMessageSent(At(3000));
  message.mutable_stop()->set_fenced(false);
  message.set_agent_messages_read(2);
  EXPECT_FALSE(fresh.Received(message, At(3000)).fence_grace);
  EXPECT_EQ(fresh.FenceDeadline(), At(7500));
}

TEST_F(AgentCoreTest, AWordReadLateKeepsTheLeaseOnlyFromWhenTheAgentWasHeard) {
  // A frozen agent reads, at 9 s, the coordinator's answer to the
  // heartbeat it sent at 1 s. The coordinator heard it at 1 s and may have
  // declared it lost since: the lease runs from 1 s, not from 9 s.
  Start(0);
  Reply(true, 0, 0);
  pb::CoordinatorMessage ack;
  ack.mutable_heartbeat_ack();
  Heard(ack, 1000, 9000);
  EXPECT_EQ(core_.FenceDeadline(), At(1000 + 4000 + 200 + 300));
  EXPECT_FALSE(core_.LeaseAt(At(9000)).expired);  // the grace, for the rest
  EXPECT_TRUE(core_.LeaseAt(At(9200)).expired);
}

TEST_F(AgentCoreTest, AWordThatCountsNoKnownMessageRenewsNothing) {
  Start(0);
  Reply(true, 0, 0);
  pb::CoordinatorMessage ack;
  ack.mutable_heartbeat_ack();
  // A coordinator that counts nothing, or more than the agent wrote.
  core_.Received(ack, At(3000));
  ack.set_agent_messages_read(99);
  core_.Received(ack, At(3000));
  EXPECT_EQ(core_.FenceDeadline(), At(4500));
  // A count older than the newest heard moves nothing back.
  Heard(ack, 2000);
  ack.set_agent_messages_read(1);
  core_.Received(ack, At(2500));
  EXPECT_EQ(core_.FenceDeadline(), At(6500));
}

TEST_F(AgentCoreTest, AnAssignmentReadAfterTheLeaseRanOutStartsNothing) {
  // The restart's assignment waited in a frozen agent's socket; when it is
  // read, the lease (from the last heartbeat the coordinator heard, 1 s)
  // is over, and the ranks may run elsewhere: nothing starts, the session
  // ends as at the lease's end.
  Start(0);
  Reply(true, 0, 0);
  pb::CoordinatorMessage message;
  auto* a = message.mutable_assignment();
  a->set_job_id("job-1");
  a->set_generation(1);
  a->set_local_world_size(2);
  a->add_argv("train.py");
  const AgentEffects late = Heard(message, 1000, 5001);
  EXPECT_FALSE(late.start_workers.has_value());
  EXPECT_TRUE(late.cancel_stream);
  ASSERT_TRUE(late.not_started.has_value());
  EXPECT_NE(late.not_started->find("lease ran out"), std::string::npos)
      << *late.not_started;
  EXPECT_TRUE(core_.lease_expired());
  EXPECT_TRUE(core_.LeaseAt(At(5001)).expired);
  // Within the lease it starts.
  AgentCore on_time(Settings());
  on_time.StartSession(pb::AgentRegistration(), At(0));
  on_time.StreamMessageSent(At(0));
  on_time.StreamMessageSent(At(1000));
  message.set_agent_messages_read(2);
  EXPECT_TRUE(on_time.Received(message, At(5000)).start_workers.has_value());
  // Read in time, but the older workers took until past the lease to end:
  // nothing starts then either.
  const AgentEffects starting = on_time.StartingWorkers(1, At(5001));
  EXPECT_TRUE(starting.cancel_stream);
  EXPECT_TRUE(starting.not_started.has_value());
  EXPECT_TRUE(on_time.lease_expired());
  EXPECT_EQ(on_time.running_generation(), -1);
  AgentCore prompt(Settings());
  prompt.StartSession(pb::AgentRegistration(), At(0));
  prompt.StreamMessageSent(At(0));
  EXPECT_TRUE(prompt.Received(message, At(100)).start_workers.has_value());
  EXPECT_FALSE(prompt.StartingWorkers(1, At(200)).cancel_stream);
}

TEST_F(AgentCoreTest, TheLeaseIsNotHeldAgainstASweep) {
  Start(0);
  core_.SweepStarted();
  EXPECT_FALSE(core_.LeaseAt(At(9000)).expired);
  EXPECT_FALSE(core_.LeaseAt(At(9500)).expired);
  core_.SweepEnded();
  Reply(true, 0, 9600);  // the acks that waited in the socket
  EXPECT_FALSE(core_.LeaseAt(At(9700)).expired);
}

TEST_F(AgentCoreTest, HeartbeatsGoOnTheStreamUntilDatagramsAreAcknowledged) {
  Start(0);
  AgentCore::Heartbeat beat = core_.HeartbeatAt(At(0), false);
  EXPECT_TRUE(beat.stream);
  EXPECT_FALSE(beat.datagram);
  EXPECT_EQ(beat.next, At(1000));
  beat = core_.HeartbeatAt(At(500), false);  // not due
  EXPECT_FALSE(beat.stream || beat.datagram);
  Reply(true, 29500);
  core_.UdpOpened(true);
  // Opened, nothing acknowledged yet: both paths.
  beat = core_.HeartbeatAt(At(1000), false);
  EXPECT_TRUE(beat.stream);
  EXPECT_TRUE(beat.datagram);
  // The last datagram was acknowledged: datagrams alone.
  beat = core_.HeartbeatAt(At(2000), true);
  EXPECT_FALSE(beat.stream);
  EXPECT_TRUE(beat.datagram);
  // One was lost: the stream as well, at once.
  beat = core_.HeartbeatAt(At(3000), false);
  EXPECT_TRUE(beat.stream);
  EXPECT_TRUE(beat.datagram);
}

TEST_F(AgentCoreTest, AFailedDatagramPathLeavesHeartbeatsOnTheStream) {
  Start(0);
  Reply(true, 29500);
  core_.UdpOpened(false);
  const AgentCore::Heartbeat beat = core_.HeartbeatAt(At(0), true);
  EXPECT_TRUE(beat.stream);
  EXPECT_FALSE(beat.datagram);
}

TEST_F(AgentCoreTest, GenerationsOnlyIncreaseWithinASession) {
  Start();
  Reply(true);
  AgentEffects effects = Assign(3);
  EXPECT_TRUE(effects.end_workers);
  ASSERT_TRUE(effects.start_workers.has_value());
  EXPECT_EQ(effects.start_workers->generation(), 3);
  // A repeated or older generation would run its ranks twice.
  effects = Assign(3);
  EXPECT_FALSE(effects.end_workers);
  EXPECT_FALSE(effects.start_workers.has_value());
  EXPECT_FALSE(Assign(2).start_workers.has_value());
  EXPECT_EQ(core_.running_generation(), 3);
  effects = Assign(4);
  EXPECT_TRUE(effects.end_workers);
  EXPECT_TRUE(effects.start_workers.has_value());
}

TEST_F(AgentCoreTest, AStopOrderOfAnotherGenerationIsIgnored) {
  Start();
  Reply(true);
  Assign(5);
  EXPECT_FALSE(Stop(4).signal_workers.has_value());
  EXPECT_FALSE(Stop(6).signal_workers.has_value());
  const AgentEffects effects = Stop(5, SIGINT);
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_EQ(effects.signal_workers->number, SIGINT);
  EXPECT_EQ(Stop(5).signal_workers->number, SIGTERM);  // the default
}

// The first half of a failure's stop: the running generation's workers
// are read, not signalled; an agent with nothing of that generation (or
// fenced) answers at once, since the coordinator holds the stop until
// every machine has.
TEST_F(AgentCoreTest, ACaptureOnlyStopReadsTheWorkersAndSendsNoSignal) {
  Start();
  Reply(true);
  Assign(5);
  pb::CoordinatorMessage capture;
  capture.mutable_stop()->set_generation(5);
  capture.mutable_stop()->set_capture_stacks(true);
  capture.mutable_stop()->set_capture_only(true);
  const AgentEffects ours = Heard(capture, 10);
  EXPECT_FALSE(ours.signal_workers.has_value());
  ASSERT_TRUE(ours.capture_only.has_value());
  EXPECT_EQ(*ours.capture_only, 5);
  EXPECT_TRUE(ours.send.empty());  // said once the capture is done

  capture.mutable_stop()->set_generation(4);
  const AgentEffects other = Heard(capture, 20);
  EXPECT_FALSE(other.signal_workers.has_value());
  EXPECT_FALSE(other.capture_only.has_value());
  ASSERT_EQ(other.send.size(), 1u);
  EXPECT_EQ(other.send[0].stacks_captured().generation(), 4);

  capture.mutable_stop()->set_generation(5);
  capture.mutable_stop()->set_fenced(true);
  const AgentEffects fenced = Heard(capture, 30);
  EXPECT_FALSE(fenced.capture_only.has_value());
  ASSERT_EQ(fenced.send.size(), 1u);
  EXPECT_TRUE(fenced.send[0].has_stacks_captured());
  // The stop itself still signals.
  EXPECT_TRUE(Stop(5).signal_workers.has_value());
}

TEST_F(AgentCoreTest, OnlyTheRunningGenerationsStartsAreReported) {
  Start();
  Reply(true);
  Assign(2);
  EXPECT_TRUE(core_.WorkersStarted(1, {{0, 100}}).send.empty());
  const AgentEffects effects = core_.WorkersStarted(2, {{0, 100}, {1, 101}});
  ASSERT_EQ(effects.send.size(), 1u);
  EXPECT_EQ(effects.send[0].workers_started().generation(), 2);
  EXPECT_EQ(effects.send[0].workers_started().workers_size(), 2);
}

TEST_F(AgentCoreTest, AnInvalidJobIdStartsNothingAndReportsEachRank) {
  Start();
  Reply(true);
  const AgentEffects effects = Assign(0, "../../etc");
  EXPECT_TRUE(effects.end_workers);
  EXPECT_FALSE(effects.start_workers.has_value());
  ASSERT_EQ(effects.send.size(), 2u);
  for (int local = 0; local < 2; ++local) {
    EXPECT_EQ(effects.send[local].worker_exited().local_rank(), local);
    EXPECT_EQ(effects.send[local].worker_exited().start_error(),
              "the job id is not valid");
  }
  EXPECT_FALSE(Stop(0).signal_workers.has_value());
}

TEST_F(AgentCoreTest, TheFirstStopSignalStopsAndTellsTheSecondKills) {
  Start();
  Reply(true);
  Assign(0);
  AgentEffects effects = core_.StopRequested(StopSignal{SIGTERM});
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_EQ(effects.signal_workers->number, SIGTERM);
  ASSERT_EQ(effects.send.size(), 1u);
  EXPECT_EQ(effects.send[0].stopping().signal(), SIGTERM);
  EXPECT_EQ(core_.StopExitCode(), 128 + SIGTERM);
  effects = core_.StopRequested(StopSignal{SIGINT});
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_EQ(effects.signal_workers->number, SIGKILL);
  EXPECT_TRUE(effects.send.empty());
  EXPECT_EQ(core_.StopExitCode(), 128 + SIGTERM);  // the first one's
}

TEST_F(AgentCoreTest, SlurmsSignalIsNotSentToTheWorkersAgainButIsTold) {
  Start();
  Reply(true);
  Assign(0);
  const AgentEffects effects =
      core_.StopRequested(StopSignal{SIGTERM, /*workers_have_it=*/true});
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_TRUE(effects.signal_workers->workers_have_it);
  ASSERT_EQ(effects.send.size(), 1u);
  EXPECT_TRUE(effects.send[0].stopping().workers_have_signal());
}

TEST_F(AgentCoreTest, ASecondSignalAfterTheSessionEndedStillKills) {
  Start();
  Reply(true);
  Assign(0);
  core_.StopRequested(StopSignal{SIGTERM});
  core_.StreamEnded();  // the workers are still within their grace
  const AgentEffects effects = core_.StopRequested(StopSignal{SIGTERM});
  ASSERT_TRUE(effects.signal_workers.has_value());
  EXPECT_EQ(effects.signal_workers->number, SIGKILL);
}

TEST_F(AgentCoreTest, ALostSessionRejoinsWithinTheReconnectTimeout) {
  EXPECT_EQ(core_.WaitLimit(), milliseconds(900000));
  EXPECT_TRUE(core_.HandshakeMayBeRefusal());
  Start();
  Reply(true);
  Assign(0);
  const SessionEnd end = core_.StreamEnded();
  EXPECT_EQ(end.kind, SessionEnd::kLost);
  const AgentCore::Next next = core_.AfterSession(core_.Finished(end, false));
  EXPECT_TRUE(next.rejoin);
  EXPECT_EQ(core_.WaitLimit(), milliseconds(120000));
  // It proved it holds the token: a failing handshake is waited out.
  EXPECT_FALSE(core_.HandshakeMayBeRefusal());
}

TEST_F(AgentCoreTest, ALostSessionAfterAStopSignalLeavesWithTheSignalsCode) {
  Start();
  Reply(true);
  core_.StopRequested(StopSignal{SIGINT});
  const AgentCore::Next next = core_.AfterSession(core_.StreamEnded());
  EXPECT_FALSE(next.rejoin);
  EXPECT_EQ(next.exit_code, 128 + SIGINT);
}

TEST_F(AgentCoreTest, AWrongTokenIsARefusalNotALoss) {
  Start();
  const SessionEnd end = core_.Finished(core_.StreamEnded(), true);
  EXPECT_EQ(end.kind, SessionEnd::kRefused);
  const AgentCore::Next next = core_.AfterSession(end);
  EXPECT_FALSE(next.rejoin);
  EXPECT_EQ(next.exit_code, 2);
}

TEST_F(AgentCoreTest, TheJobsEndIsHeardAndEndsTheAgentWithItsCode) {
  Start();
  Reply(true);
  pb::CoordinatorMessage message;
  message.mutable_finished()->set_exit_code(3);
  const AgentEffects effects = core_.Received(message, At(0));
  ASSERT_TRUE(effects.end.has_value());
  EXPECT_EQ(effects.end->kind, SessionEnd::kJobFinished);
  ASSERT_EQ(effects.send.size(), 1u);
  EXPECT_TRUE(effects.send[0].has_job_end_heard());
  // Not a lost connection, even if the authentication check says no.
  const AgentCore::Next next =
      core_.AfterSession(core_.Finished(*effects.end, true));
  EXPECT_FALSE(next.rejoin);
  EXPECT_EQ(next.exit_code, 3);
}

TEST_F(AgentCoreTest, OwnExitsOfTheLastGenerationAreCarriedToTheNextSession) {
  Start();
  Reply(true);
  Assign(4);
  Exit(4, 1, 7);  // on its own
  Exit(3, 0, 1);  // of an older generation: not carried
  const AgentCore::Next next = core_.AfterSession(core_.StreamEnded());
  ASSERT_TRUE(next.rejoin);
  Exit(4, 0, 143);  // the agent stopped it: not the worker's own doing
  const pb::AgentMessage hello = Start(10000);
  ASSERT_EQ(hello.registration().last_generation_exits_size(), 1);
  const pb::WorkerExited& carried =
      hello.registration().last_generation_exits(0);
  EXPECT_EQ(carried.generation(), 4);
  EXPECT_EQ(carried.local_rank(), 1);
  EXPECT_EQ(carried.exit_code(), 7);
  EXPECT_EQ(carried.last_lines_size(), 0);  // the registration stays small
  // A new generation forgets them.
  Reply(true);
  Assign(5);
  EXPECT_TRUE(core_.OwnExitsOfLastGeneration().empty());
}

TEST_F(AgentCoreTest, AnExitFromBeforeTheStopReadAfterTheLossIsCarried) {
  // The agent was frozen while its workers exited 0; thawed, it reads the
  // loss first and their exits after: the workers' own all the same (I5).
  Start();
  Reply(true);
  Assign(4);
  core_.AfterSession(core_.StreamEnded());
  Exit(4, 0, 0, /*own_end=*/true);
  Exit(4, 1, 143, /*own_end=*/false);  // the stop's doing
  // Killed by SIGKILL before any stop of the agent's: its guardian's fence
  // (the agent was frozen), not the worker's own end.
  pb::WorkerExited fenced;
  fenced.set_generation(4);
  fenced.set_local_rank(1);
  fenced.set_signal(SIGKILL);
  core_.WorkerExited(fenced, /*own_end=*/true);
  const pb::AgentMessage hello = Start(10000);
  ASSERT_EQ(hello.registration().last_generation_exits_size(), 1);
  EXPECT_EQ(hello.registration().last_generation_exits(0).local_rank(), 0);
  EXPECT_EQ(hello.registration().last_generation_exits(0).exit_code(), 0);
}

TEST_F(AgentCoreTest, TheReportNamesItsRun) {
  // The coordinator takes a report of its own run only: a new agent may
  // carry what an agent of an earlier run on the same address kept.
  Start();
  Reply(true);
  Assign(4, "job-9");
  Exit(4, 0, 0);
  ASSERT_TRUE(core_.OwnExit(4, 0).has_value());
  EXPECT_FALSE(core_.OwnExit(3, 0).has_value());
  EXPECT_FALSE(core_.OwnExit(4, 1).has_value());
  core_.AfterSession(core_.StreamEnded());
  const pb::AgentMessage hello = Start(10000);
  EXPECT_EQ(hello.registration().report_run_id(), "run-of-job-9");
  // Nothing to report, no job named.
  Reply(true, 0, 10001);
  Assign(5, "job-9", 10002);
  core_.AfterSession(core_.StreamEnded());
  EXPECT_EQ(Start(20000).registration().report_run_id(), "");
}

TEST(AgentCoreCarryTest, ANewAgentCarriesWhatAnEarlierAgentKept) {
  // The exits an earlier agent of the machine kept on disk
  // (agent/cleanup/exit_ledger.h) go with the first registration, as a
  // thawed agent's own do, and are gone once a generation is assigned.
  AgentCore core{AgentCoreSettings{}};
  std::vector<pb::WorkerExited> exits(2);
  exits[0].set_local_rank(0);
  exits[1].set_local_rank(1);
  exits[1].set_exit_code(3);
  core.CarryEarlierExits("run-2", 7, exits);
  const pb::AgentMessage hello =
      core.StartSession(pb::AgentRegistration(), AgentCore::Time{});
  EXPECT_EQ(hello.registration().report_run_id(), "run-2");
  ASSERT_EQ(hello.registration().last_generation_exits_size(), 2);
  EXPECT_EQ(hello.registration().last_generation_exits(0).generation(), 7);
  EXPECT_EQ(hello.registration().last_generation_exits(1).exit_code(), 3);
  // Once a session ran, the agent's own word counts, not the disk's.
  AgentCore later{AgentCoreSettings{}};
  later.StartSession(pb::AgentRegistration(), AgentCore::Time{});
  later.CarryEarlierExits("run-2", 7, exits);
  EXPECT_TRUE(later.OwnExitsOfLastGeneration().empty());
}

TEST_F(AgentCoreTest, ANewSessionStartsWithAFreshLeaseAndNoWorkers) {
  Start(0);
  Reply(true);
  Assign(2);
  EXPECT_TRUE(core_.LeaseAt(At(4201)).expired ||
              core_.LeaseAt(At(4401)).expired);
  core_.AfterSession(core_.StreamEnded());
  Start(20000);
  EXPECT_FALSE(core_.lease_expired());
  EXPECT_FALSE(core_.LeaseAt(At(23000)).expired);
  EXPECT_EQ(core_.running_generation(), -1);
  // The coordinator may hand the same generation number to the new
  // session (a rendezvous that had not started): it is not fenced off.
  Reply(true, 0, 20001);
  EXPECT_TRUE(Assign(2, "job-1", 20002).start_workers.has_value());
}

// A hot spare (trl-agent --spare): it registers as a spare, becomes the
// machine the coordinator hands it, and after a lost connection registers
// as the spare that stood for that machine.
TEST(AgentCoreRoleTest, ASpareTakesAMachinesPlaceAndRegistersAsItsStandIn) {
  AgentCoreSettings settings;
  settings.spare = true;
  AgentCore core(settings);
  pb::AgentRegistration registration;
  registration.set_machine_rank(0);  // the config's, ignored for a spare
  pb::AgentMessage hello = core.StartSession(registration, Time());
  EXPECT_TRUE(hello.registration().spare());
  EXPECT_EQ(hello.registration().machine_rank(), -1);
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(true);
  reply.mutable_registration_reply()->set_spare(true);
  reply.mutable_registration_reply()->set_machine_rank(-1);
  const AgentEffects registered = core.Received(reply, Time());
  EXPECT_FALSE(registered.sweep_stale);  // a spare has no machine
  EXPECT_FALSE(registered.role_changed.has_value());

  pb::CoordinatorMessage change;
  change.mutable_role_change()->set_machine_rank(2);
  change.mutable_role_change()->set_reason("machine 2 was lost");
  const AgentEffects promoted = core.Received(change, Time());
  ASSERT_TRUE(promoted.role_changed.has_value());
  EXPECT_NE(promoted.role_changed->find("stands for machine 2"),
            std::string::npos);
  EXPECT_FALSE(core.spare());
  EXPECT_EQ(core.machine_rank(), 2);

  core.StreamEnded();
  hello = core.StartSession(registration, Time() + milliseconds(10));
  EXPECT_TRUE(hello.registration().spare());
  EXPECT_EQ(hello.registration().machine_rank(), 2);
  // Taken back: a machine again, whose leftovers are swept.
  reply.mutable_registration_reply()->set_spare(false);
  reply.mutable_registration_reply()->set_machine_rank(2);
  const AgentEffects back = core.Received(reply, Time() + milliseconds(10));
  EXPECT_TRUE(back.sweep_stale);
  EXPECT_EQ(back.machine_rank, 2);
}

// A stand-in sends its heartbeats as datagrams of the session its role
// change offers (they name the machine), and leaves a last word of it; a
// machine's agent that becomes a spare sends none (its session named the
// machine it no longer stands for).
TEST(AgentCoreRoleTest, AStandInTakesTheSessionItsRoleChangeOffers) {
  AgentCoreSettings settings;
  settings.spare = true;
  settings.udp_heartbeats = true;
  AgentCore core(settings);
  pb::AgentRegistration registration;
  core.StartSession(registration, Time());
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(true);
  reply.mutable_registration_reply()->set_spare(true);
  reply.mutable_registration_reply()->set_machine_rank(-1);
  EXPECT_FALSE(core.Received(reply, Time()).open_datagrams.has_value());

  pb::CoordinatorMessage change;
  auto* role = change.mutable_role_change();
  role->set_machine_rank(2);
  role->set_reason("machine 2 was lost");
  role->set_heartbeat_udp_port(29500);
  role->set_heartbeat_session(77);
  role->set_heartbeat_key(std::string(32, 'k'));
  const AgentEffects promoted = core.Received(change, Time());
  EXPECT_TRUE(promoted.close_datagrams);
  ASSERT_TRUE(promoted.open_datagrams.has_value());
  EXPECT_EQ(promoted.open_datagrams->port, 29500);
  EXPECT_EQ(promoted.open_datagrams->session, 77u);
  EXPECT_EQ(promoted.open_datagrams->key, std::string(32, 'k'));
  EXPECT_EQ(promoted.machine_rank, 2);

  pb::CoordinatorMessage demoted;
  demoted.mutable_role_change()->set_spare(true);
  demoted.mutable_role_change()->set_machine_rank(-1);
  const AgentEffects spare = core.Received(demoted, Time());
  EXPECT_TRUE(spare.close_datagrams);
  EXPECT_FALSE(spare.open_datagrams.has_value());
}

TEST(AgentCoreRoleTest, AMachineWhosePlaceWasTakenRegistersAsASpareFromThenOn) {
  AgentCore core{AgentCoreSettings()};
  pb::AgentRegistration registration;
  registration.set_machine_rank(1);
  pb::AgentMessage hello = core.StartSession(registration, Time());
  EXPECT_FALSE(hello.registration().spare());
  EXPECT_EQ(hello.registration().machine_rank(), 1);
  pb::CoordinatorMessage reply;
  reply.mutable_registration_reply()->set_accepted(true);
  reply.mutable_registration_reply()->set_spare(true);
  const AgentEffects effects = core.Received(reply, Time());
  ASSERT_TRUE(effects.role_changed.has_value());
  EXPECT_NE(effects.role_changed->find("registered as a spare"),
            std::string::npos);
  EXPECT_FALSE(effects.sweep_stale);  // a stand-in here may hold machine 1
  core.StreamEnded();
  hello = core.StartSession(registration, Time() + milliseconds(10));
  EXPECT_TRUE(hello.registration().spare());
  EXPECT_EQ(hello.registration().machine_rank(), -1);
}

TEST_F(AgentCoreTest, AnAgentAskedToStopStartsNothingMoreAndReportsEachRank) {
  Start();
  Reply(true);
  core_.StopRequested(StopSignal{SIGTERM});
  const AgentEffects effects = Assign(0);
  EXPECT_FALSE(effects.start_workers.has_value());
  ASSERT_EQ(effects.send.size(), 2u);
  for (const auto& message : effects.send) {
    EXPECT_EQ(message.worker_exited().start_error(), "the agent is stopping");
  }
}

}  // namespace
}  // namespace trl

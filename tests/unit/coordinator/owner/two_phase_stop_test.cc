// A failure's stop in a job of several machines comes in two phases: every
// agent is first asked to keep where its workers stand (capture_only), and
// the signals follow once every machine has said it has, has gone, or the
// wait (kCaptureWait) is over. A hang is reported before its kill
// (WorkerHung): the rank stays alive until the stop, and its exit, whatever
// ended it, is the hang's failure. (Found by tests/pypi/two_hosts_hang.sh:
// the machine that found the hang killed its rank, and the other
// machine's ranks woke from their collective before their agent read them.)
#include <gtest/gtest.h>

#include "coordinator/owner/capture_barrier.h"
#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

class TwoPhaseStopTest : public ::testing::Test {
 protected:
  explicit TwoPhaseStopTest(int machines = 2) : options_(TwoMachineCpuJob()) {
    options_.config.num_machines = machines;
    options_.config.num_processes = machines;
    // No restart: the job ends with generation 0's ranks as they ended.
    options_.policy.restart.max_restarts = 0;
    core_ = CoordinatorOnClock(options_, [this] { return now_; });
  }
  // An agent of this build: it answers a capture_only stop.
  void Register(FakeAgentLink* link, int machine_rank,
                bool captures_before_stop = true) {
    pb::AgentMessage registration = Registration(options_, machine_rank, 3000);
    registration.mutable_registration()->set_captures_before_stop(
        captures_before_stop);
    core_->OnMessage(link, registration);
    ASSERT_TRUE(link->reply().accepted()) << link->reply().reason();
  }
  // Both machines registered, generation 0's workers started.
  void RunBoth(FakeAgentLink* a, FakeAgentLink* b) {
    Register(a, 0);
    Register(b, 1);
    Started(a, 0);
    Started(b, 0);
  }
  void Started(FakeAgentLink* link, int64_t generation) {
    pb::AgentMessage message;
    message.mutable_workers_started()->set_generation(generation);
    auto* worker = message.mutable_workers_started()->add_workers();
    worker->set_local_rank(0);
    worker->set_pid(4242);
    core_->OnMessage(link, message);
  }
  void Hung(FakeAgentLink* link, const std::string& reason) {
    pb::AgentMessage message;
    message.mutable_worker_hung()->set_generation(0);
    message.mutable_worker_hung()->set_local_rank(0);
    message.mutable_worker_hung()->set_reason(reason);
    core_->OnMessage(link, message);
  }
  void Captured(FakeAgentLink* link, int64_t generation) {
    pb::AgentMessage message;
    message.mutable_stacks_captured()->set_generation(generation);
    core_->OnMessage(link, message);
  }
  void Heartbeat(FakeAgentLink* link) {
    pb::AgentMessage message;
    message.mutable_heartbeat();
    core_->OnMessage(link, message);
  }
  void Exited(FakeAgentLink* link, int signal) {
    pb::AgentMessage message;
    auto* exited = message.mutable_worker_exited();
    exited->set_generation(0);
    exited->set_local_rank(0);
    exited->set_signal(signal);
    core_->OnMessage(link, message);
  }
  // The stop orders `link` got: those that only ask for a capture, and
  // those that signal.
  static int CaptureOnly(const FakeAgentLink& link) {
    int n = 0;
    for (const auto& stop : link.stops()) n += stop.capture_only() ? 1 : 0;
    return n;
  }
  static int Signalling(const FakeAgentLink& link) {
    return static_cast<int>(link.stops().size()) - CaptureOnly(link);
  }

  CoordinatorOptions options_;
  TimePoint now_ = TimePoint() + std::chrono::seconds(1000);
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(TwoPhaseStopTest, AHangIsStoppedOnceEveryMachineHasCaptured) {
  FakeAgentLink a, b;
  RunBoth(&a, &b);
  Hung(&b, "hung: its processes used less than 1% of a core for 3.0 s");
  // Both are asked to read their workers; neither is signalled yet.
  EXPECT_EQ(CaptureOnly(a), 1);
  EXPECT_EQ(CaptureOnly(b), 1);
  EXPECT_EQ(Signalling(a), 0);
  EXPECT_EQ(Signalling(b), 0);
  EXPECT_TRUE(a.stops().front().capture_stacks());
  Captured(&b, 0);
  EXPECT_EQ(Signalling(a), 0);  // machine 0 is still reading
  Captured(&a, 0);
  ASSERT_EQ(Signalling(a), 1);
  ASSERT_EQ(Signalling(b), 1);
  EXPECT_NE(a.stops().back().reason().find("rank 1 (local rank 0 on machine 1"),
            std::string::npos)
      << a.stops().back().reason();
  EXPECT_NE(a.stops().back().reason().find("hung: its processes"),
            std::string::npos);
  // The hung rank's exit by the stop's signal is its hang's failure; the
  // other's is the stop's.
  Exited(&b, SIGKILL);
  Exited(&a, SIGTERM);
  const pb::JobStatus status = core_->Status();
  ASSERT_EQ(status.ranks_size(), 2);
  EXPECT_EQ(status.ranks(1).state(), "failed");
  EXPECT_EQ(status.ranks(0).state(), "stopped");
  ASSERT_GE(status.failures_size(), 1);
  EXPECT_NE(status.failures(0).reason().find("hung"), std::string::npos)
      << status.failures(0).reason();
  // A hang is a failure: without a restart left, the job fails with the
  // code of a rank killed for its hang.
  EXPECT_EQ(status.state(), "failed");
  EXPECT_EQ(a.exit_code(), 128 + SIGKILL);
}

TEST_F(TwoPhaseStopTest,
       AMachineThatNeverSaysItCapturedHoldsTheStopOnlyAWhile) {
  FakeAgentLink a, b;
  RunBoth(&a, &b);
  Hung(&b, "hung: no output");
  Captured(&b, 0);
  // Machine 0 stays alive (it heartbeats) but never says it captured.
  const TimePoint asked = now_;
  while (now_ + std::chrono::milliseconds(500) < asked + kCaptureWait) {
    now_ += std::chrono::milliseconds(500);
    Heartbeat(&a);
    Heartbeat(&b);
    core_->Tick();
  }
  now_ = asked + kCaptureWait - std::chrono::milliseconds(1);
  core_->Tick();
  EXPECT_EQ(Signalling(b), 0);
  ASSERT_TRUE(core_->NextDeadline());
  EXPECT_LE(*core_->NextDeadline(), now_ + std::chrono::milliseconds(1));
  now_ += std::chrono::milliseconds(1);
  core_->Tick();
  EXPECT_EQ(Signalling(a), 1);
  EXPECT_EQ(Signalling(b), 1);
}

TEST_F(TwoPhaseStopTest, AMachineThatGoesIsAwaitedNoLonger) {
  FakeAgentLink a, b;
  RunBoth(&a, &b);
  Hung(&b, "hung: no output");
  Captured(&b, 0);
  core_->OnDisconnected(&a);
  EXPECT_EQ(Signalling(b), 1);
}

TEST_F(TwoPhaseStopTest, AHangSeenWhileTheGenerationStopsIsOnlyThatRanks) {
  FakeAgentLink a, b;
  RunBoth(&a, &b);
  Hung(&b, "hung: first");
  Hung(&a, "hung: second, the first one's effect");
  EXPECT_EQ(CaptureOnly(a), 1);  // one stop, not two
  Captured(&a, 0);
  Captured(&b, 0);
  // Both were killed for their hangs: both failed, one failure for the job.
  Exited(&a, SIGKILL);
  Exited(&b, SIGKILL);
  const pb::JobStatus status = core_->Status();
  EXPECT_EQ(status.ranks(0).state(), "failed");
  EXPECT_EQ(status.ranks(1).state(), "failed");
  EXPECT_EQ(status.failures_size(), 1);
}

TEST_F(TwoPhaseStopTest, AnOperatorsStopReleasesTheStopHeldForCaptures) {
  FakeAgentLink a, b;
  RunBoth(&a, &b);
  Hung(&b, "hung: no output");
  ASSERT_EQ(Signalling(a), 0);
  core_->RequestStop("stopped by the operator (SIGINT)", 130,
                     StopSignal{SIGINT});
  EXPECT_GE(Signalling(a), 1);
  EXPECT_GE(Signalling(b), 1);
}

TEST_F(TwoPhaseStopTest, AnAgentThatCannotAnswerGetsTheStopInOnePhase) {
  // An older agent takes a capture_only stop for the stop itself and
  // never answers: the job's stops come in one phase, as before.
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1, /*captures_before_stop=*/false);
  Started(&a, 0);
  Started(&b, 0);
  Hung(&a, "hung: no output");
  EXPECT_EQ(CaptureOnly(a), 0);
  EXPECT_EQ(CaptureOnly(b), 0);
  EXPECT_EQ(Signalling(a), 1);
  EXPECT_EQ(Signalling(b), 1);
  EXPECT_TRUE(b.stops().back().capture_stacks());
}

class OneMachineStopTest : public TwoPhaseStopTest {
 protected:
  OneMachineStopTest() : TwoPhaseStopTest(1) {}
};

TEST_F(OneMachineStopTest, OneMachineIsStoppedAtOnceAndReadsItsOwnFirst) {
  FakeAgentLink a;
  Register(&a, 0);
  Started(&a, 0);
  Hung(&a, "hung: no output");
  EXPECT_EQ(CaptureOnly(a), 0);
  ASSERT_EQ(Signalling(a), 1);
  EXPECT_TRUE(a.stops().back().capture_stacks());
}

}  // namespace
}  // namespace trl

// How the coordinator takes leave when the job ends: every machine it told
// must say it heard (JobEndHeard) before it goes, so that an agent whose
// stream was cut just as the job ended hears the outcome when it registers
// again, instead of waiting out its reconnect timeout and exiting 1
// (nemesis: a partition in the job's last second).
#include <gtest/gtest.h>

#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class JobEndFarewellTest : public ::testing::Test {
 protected:
  JobEndFarewellTest() : options_(TwoMachineCpuJob()) {
    core_ = CoordinatorOnClock(options_, [this] { return now_; });
  }
  void Register(FakeAgentLink* link, int machine_rank) {
    core_->OnMessage(link, Registration(options_, machine_rank, 3000));
  }
  void ExitZero(FakeAgentLink* link) {
    pb::AgentMessage message;
    auto* exited = message.mutable_worker_exited();
    exited->set_generation(0);
    exited->set_local_rank(0);
    exited->set_exit_code(0);
    core_->OnMessage(link, message);
  }
  void Heartbeat(FakeAgentLink* link) {
    pb::AgentMessage message;
    message.mutable_heartbeat();
    core_->OnMessage(link, message);
  }
  void Heard(FakeAgentLink* link) {
    pb::AgentMessage message;
    message.mutable_job_end_heard();
    core_->OnMessage(link, message);
  }
  // A spare's registration (machine_rank -1), lease 3 s.
  pb::AgentMessage SpareRegistration() {
    pb::AgentMessage registration = Registration(options_, -1, 3000);
    registration.mutable_registration()->set_spare(true);
    return registration;
  }
  // The job succeeds; both machines hear it and their streams end.
  void SucceedAndPart(FakeAgentLink* a, FakeAgentLink* b) {
    RunToSuccess(a, b);
    Heard(a);
    Heard(b);
    core_->OnDisconnected(a);
    core_->OnDisconnected(b);
  }
  // Whether everyone has said farewell (the clock is the test's: waiting
  // would change nothing).
  bool FarewellsHeard() { return core_->FarewellsHeard(); }
  // Both machines' ranks exit 0: the job succeeds.
  void RunToSuccess(FakeAgentLink* a, FakeAgentLink* b) {
    Register(a, 0);
    Register(b, 1);
    ASSERT_EQ(core_->Status().state(), "running");
    ExitZero(a);
    ExitZero(b);
    ASSERT_EQ(core_->Status().state(), "succeeded");
  }

  // Machine 1's agent registers again: it is told how the job ended, its
  // stream stays open until it says it heard, and then nobody is awaited.
  void ExpectMachine1ToldWhenItRegistersAgain() {
    FakeAgentLink again;
    Register(&again, 1);
    EXPECT_EQ(again.finished(), "succeeded");
    EXPECT_EQ(again.exit_code(), 0);
    EXPECT_FALSE(again.closed());  // until it says it heard
    EXPECT_FALSE(FarewellsHeard());
    Heard(&again);
    EXPECT_TRUE(again.closed());
    core_->OnDisconnected(&again);
    EXPECT_TRUE(FarewellsHeard());
  }
  // Machine 1's ranks exit 0, then its stream is cut; machine 0's exit 0
  // and it hears the end: only machine 1 is awaited.
  void SucceedWithMachine1CutOff(FakeAgentLink* a, FakeAgentLink* b) {
    Register(a, 0);
    Register(b, 1);
    ExitZero(b);
    core_->OnDisconnected(b);
    ExitZero(a);
    ASSERT_EQ(core_->Status().state(), "succeeded");
    Heard(a);
    core_->OnDisconnected(a);
    EXPECT_FALSE(FarewellsHeard());
  }

  CoordinatorOptions options_;
  TimePoint now_ = TimePoint() + std::chrono::seconds(1000);
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(JobEndFarewellTest, EachStreamStaysOpenUntilItsAgentHeard) {
  FakeAgentLink a, b;
  RunToSuccess(&a, &b);
  EXPECT_EQ(a.finished(), "succeeded");
  EXPECT_EQ(b.finished(), "succeeded");
  EXPECT_FALSE(a.closed());
  EXPECT_FALSE(b.closed());
  Heard(&a);
  EXPECT_TRUE(a.closed());
  EXPECT_FALSE(b.closed());
  core_->OnDisconnected(&a);
  EXPECT_FALSE(FarewellsHeard());  // b has not heard
  Heard(&b);
  EXPECT_TRUE(b.closed());
  core_->OnDisconnected(&b);
  EXPECT_TRUE(FarewellsHeard());
}

TEST_F(JobEndFarewellTest, AnAgentCutOffAtTheEndIsToldWhenItRegistersAgain) {
  FakeAgentLink a, b;
  RunToSuccess(&a, &b);
  Heard(&a);
  core_->OnDisconnected(&a);
  // Machine 1's stream is cut before the news reached its agent.
  core_->OnDisconnected(&b);
  EXPECT_FALSE(FarewellsHeard());
  ExpectMachine1ToldWhenItRegistersAgain();
}

TEST_F(JobEndFarewellTest, AMachineCutOffJustBeforeTheEndIsAwaitedForItsLease) {
  // Machine 1's ranks exited 0, then its stream was cut: the job goes on
  // without it and succeeds, and its agent, which has not heard, will
  // register again once its lease (3 s) tells it the link is gone.
  FakeAgentLink a, b;
  SucceedWithMachine1CutOff(&a, &b);
  now_ += std::chrono::seconds(4);  // within lease + 2 s
  ExpectMachine1ToldWhenItRegistersAgain();
}

TEST_F(JobEndFarewellTest, AMachineThatNeverComesBackIsAwaitedNoLonger) {
  FakeAgentLink a, b;
  SucceedWithMachine1CutOff(&a, &b);
  now_ += std::chrono::milliseconds(5001);  // past its lease (3 s) + 2 s
  EXPECT_TRUE(FarewellsHeard());
}

TEST_F(JobEndFarewellTest, AStrangerAfterTheEndIsToldAndClosedAtOnce) {
  FakeAgentLink a, b;
  RunToSuccess(&a, &b);
  Heard(&a);
  Heard(&b);
  FakeAgentLink stranger;
  core_->OnMessage(&stranger, Registration(options_, 5, 3000));
  EXPECT_EQ(stranger.finished(), "succeeded");
  EXPECT_TRUE(stranger.closed());  // nobody waits for it
  for (FakeAgentLink* link : {&a, &b, &stranger}) core_->OnDisconnected(link);
  EXPECT_TRUE(FarewellsHeard());
}

TEST_F(JobEndFarewellTest, AHeardFromAnUntoldStreamChangesNothing) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  Heard(&a);  // before the end: ignored
  EXPECT_FALSE(a.closed());
  EXPECT_EQ(core_->Status().state(), "running");
}

TEST_F(JobEndFarewellTest, ASpareCutOffBeforeTheEndIsAwaitedForItsLease) {
  // A spare partitioned in the job's last seconds (nemesis, a job with a
  // spare): the coordinator stays its lease + 2 s after the end, so that
  // the spare, back, hears how the job ended and leaves with its code
  // instead of waiting for a coordinator that is gone (exit 1).
  FakeAgentLink spare;
  const pb::AgentMessage registration = SpareRegistration();
  core_->OnMessage(&spare, registration);
  ASSERT_TRUE(spare.reply().accepted()) << spare.reply().reason();
  ASSERT_TRUE(spare.reply().spare());
  core_->OnDisconnected(&spare);  // cut off while the job runs
  FakeAgentLink a, b;
  SucceedAndPart(&a, &b);
  EXPECT_FALSE(FarewellsHeard());  // the spare may come back
  now_ += std::chrono::seconds(4);
  FakeAgentLink back;
  core_->OnMessage(&back, registration);
  EXPECT_EQ(back.finished(), "succeeded");
  EXPECT_EQ(back.exit_code(), 0);
  EXPECT_FALSE(back.closed());  // until it says it heard
  Heard(&back);
  EXPECT_TRUE(back.closed());
  core_->OnDisconnected(&back);
  EXPECT_TRUE(FarewellsHeard());
}

TEST_F(JobEndFarewellTest, ASpareCutOffThatNeverComesBackIsAwaitedNoLonger) {
  FakeAgentLink spare;
  const pb::AgentMessage registration = SpareRegistration();
  core_->OnMessage(&spare, registration);
  core_->OnDisconnected(&spare);
  FakeAgentLink a, b;
  SucceedAndPart(&a, &b);
  now_ += std::chrono::milliseconds(4999);
  EXPECT_FALSE(FarewellsHeard());
  now_ += std::chrono::milliseconds(2);  // past its lease (3 s) + 2 s
  EXPECT_TRUE(FarewellsHeard());
}

TEST_F(JobEndFarewellTest, ASpareConnectedAtTheEndIsNotAwaitedOnceCut) {
  // A spare told at the end and cut then held nothing: nobody waits.
  FakeAgentLink spare;
  const pb::AgentMessage registration = SpareRegistration();
  core_->OnMessage(&spare, registration);
  FakeAgentLink a, b;
  SucceedAndPart(&a, &b);
  core_->OnDisconnected(&spare);
  EXPECT_TRUE(FarewellsHeard());
}

}  // namespace
}  // namespace trl

namespace trl {
namespace {

// Machine 1's ranks exited 0, then its agent went silent (frozen) just
// before the job's end: its place went to the spare, which heard the end.
// The old agent, thawed, registers again as machine 1; the coordinator
// stays for it while it may still be running (its lease and stop grace)
// and 2 s, so that it leaves with the job's code instead of exiting 1
// after its reconnect timeout (nemesis, seed 8 of --shapes spare).
class OldAgentFarewellTest : public JobEndFarewellTest {
 protected:
  // Returns when the job has succeeded with machine 1 held by the spare,
  // and every stream but the old agent's has heard and ended.
  void SucceedWithMachine1HandedOver(FakeAgentLink* a, FakeAgentLink* b,
                                     FakeAgentLink* spare) {
    core_->OnMessage(spare, SpareRegistration());
    ASSERT_TRUE(spare->reply().spare());
    Register(a, 0);
    Register(b, 1);
    ASSERT_EQ(core_->Status().state(), "running");
    ExitZero(b);
    // Machine 1 falls silent: lost after its lease (3 s), its ranks handed
    // to the spare.
    for (int i = 0; i < 8; ++i) {
      now_ += milliseconds(500);
      Heartbeat(a);
      Heartbeat(spare);
      core_->Tick();
    }
    ASSERT_GT(spare->role_changes(), 0) << "no handover to the spare";
    ExitZero(a);
    ASSERT_EQ(core_->Status().state(), "succeeded");
    Heard(a);
    Heard(spare);
    core_->OnDisconnected(a);
    core_->OnDisconnected(spare);
    core_->OnDisconnected(b);
  }
};

TEST_F(OldAgentFarewellTest,
       AHandedOverMachinesOldAgentIsAwaitedWhileItMayRun) {
  FakeAgentLink a, b, spare;
  SucceedWithMachine1HandedOver(&a, &b, &spare);
  EXPECT_FALSE(FarewellsHeard()) << "the old agent of machine 1 may come back";
  now_ += std::chrono::seconds(3);
  ExpectMachine1ToldWhenItRegistersAgain();
}

TEST_F(OldAgentFarewellTest, AHandedOverMachinesOldAgentIsAwaitedOnlyAWhile) {
  FakeAgentLink a, b, spare;
  SucceedWithMachine1HandedOver(&a, &b, &spare);
  now_ += std::chrono::seconds(60);
  EXPECT_TRUE(FarewellsHeard());
}

}  // namespace
}  // namespace trl

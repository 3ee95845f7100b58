// An agent that registers again before its old stream's end has reached
// the coordinator (nemesis, an elastic job: the coordinator paused past the
// agent's lease; the agent stopped its workers and reconnected, and the
// thawed coordinator read the new registration before the old stream's
// end). The same agent process on the same host has given its old stream
// up: it is ended as its end would have, and the registration is a rejoin,
// not "machine_rank 1 is already registered by host node1" (the agent
// exited 2). Another process, or another host, claiming a connected
// machine is still refused.
#include <gtest/gtest.h>

#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

class ReRegistrationTest : public ::testing::Test {
 protected:
  ReRegistrationTest() : options_(TwoMachineCpuJob()) {
    // A machine that comes back is waited for (a restart), as in the
    // nemesis's elastic job.
    options_.policy.restart.max_restarts = 2;
    core_ = CoordinatorOnClock(options_, [this] { return now_; });
  }
  pb::AgentMessage RegistrationOf(int machine_rank, int agent_pid,
                                  const std::string& hostname = "") {
    pb::AgentMessage message = Registration(options_, machine_rank, 3000);
    message.mutable_registration()->set_agent_pid(agent_pid);
    if (!hostname.empty()) {
      message.mutable_registration()->set_hostname(hostname);
    }
    return message;
  }
  // Both machines registered (agents with pids 100 and 101): running.
  void RunBoth(FakeAgentLink* a, FakeAgentLink* b) {
    core_->OnMessage(a, RegistrationOf(0, 100));
    core_->OnMessage(b, RegistrationOf(1, 101));
    ASSERT_TRUE(a->reply().accepted());
    ASSERT_TRUE(b->reply().accepted());
    ASSERT_EQ(core_->Status().state(), "running");
  }
  // Whether machine 1 is connected ("lost" when not; its row is the
  // job's phase when it is).
  bool Machine1Connected() {
    const pb::JobStatus status = core_->Status();
    for (const auto& node : status.nodes()) {
      if (node.machine_rank() == 1) return node.state() != "lost";
    }
    return false;
  }
  static pb::AgentMessage Heartbeat() {
    pb::AgentMessage message;
    message.mutable_heartbeat();
    return message;
  }

  CoordinatorOptions options_;
  TimePoint now_ = TimePoint() + std::chrono::seconds(1000);
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(ReRegistrationTest, TheSameAgentAgainEndsItsOldStreamAndRejoins) {
  FakeAgentLink a, b, again;
  RunBoth(&a, &b);
  now_ += std::chrono::seconds(1);
  core_->OnMessage(&again, RegistrationOf(1, 101));
  EXPECT_TRUE(again.reply().accepted()) << again.reply().reason();
  EXPECT_EQ(again.reply().machine_rank(), 1);
  EXPECT_FALSE(again.closed());
  EXPECT_TRUE(b.closed());  // the old stream is ended
  EXPECT_TRUE(Machine1Connected());
  // The old stream's end, when it comes at last, changes nothing: the
  // machine stays with its new stream, which is heard.
  core_->OnDisconnected(&b);
  EXPECT_TRUE(Machine1Connected());
  core_->OnMessage(&again, Heartbeat());
  EXPECT_EQ(again.acks(), 1);
  // Nothing the old stream says counts any more.
  const int old_acks = b.acks();
  core_->OnMessage(&b, Heartbeat());
  EXPECT_EQ(b.acks(), old_acks);
}

TEST_F(ReRegistrationTest, AnotherProcessOnTheSameHostIsStillRefused) {
  FakeAgentLink a, b, second;
  RunBoth(&a, &b);
  core_->OnMessage(&second, RegistrationOf(1, 202));
  EXPECT_FALSE(second.reply().accepted());
  EXPECT_NE(second.reply().reason().find("already registered"),
            std::string::npos)
      << second.reply().reason();
  EXPECT_TRUE(second.closed());
  EXPECT_FALSE(b.closed());  // the machine's own agent keeps its place
  EXPECT_TRUE(Machine1Connected());
}

TEST_F(ReRegistrationTest, TheSamePidOnAnotherHostIsStillRefused) {
  FakeAgentLink a, b, elsewhere;
  RunBoth(&a, &b);
  core_->OnMessage(&elsewhere, RegistrationOf(1, 101, "node9"));
  EXPECT_FALSE(elsewhere.reply().accepted());
  EXPECT_TRUE(elsewhere.closed());
  EXPECT_FALSE(b.closed());
}

TEST_F(ReRegistrationTest, AnAgentThatSaysNoPidIsNeverTakenForTheSame) {
  FakeAgentLink a, b, unknown;
  core_->OnMessage(&a, RegistrationOf(0, 0));
  core_->OnMessage(&b, RegistrationOf(1, 0));
  ASSERT_EQ(core_->Status().state(), "running");
  core_->OnMessage(&unknown, RegistrationOf(1, 0));
  EXPECT_FALSE(unknown.reply().accepted());
  EXPECT_FALSE(b.closed());
}

}  // namespace
}  // namespace trl

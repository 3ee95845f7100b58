// The coordinator acknowledges an agent's heartbeats every lease / 3 (the
// lease the agent declared when it registered), not every one.
#include <gtest/gtest.h>

#include "coordinator/coordinator.h"
#include "tests/unit/coordinator_harness.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

class CountingLink : public AgentLink {
 public:
  void Send(const pb::CoordinatorMessage& message) override {
    if (message.has_heartbeat_ack()) ++acks;
  }
  void Close() override {}
  std::string Peer() const override { return "test"; }
  int acks = 0;
};

class HeartbeatAckTest : public ::testing::Test {
 protected:
  HeartbeatAckTest()
      : options_(TwoMachineCpuJob()),
        core_(CoordinatorOnClock(options_, [this] { return now_; })) {}

  void Register(CountingLink* link, int machine_rank, int lease_ms) {
    core_->OnMessage(link, Registration(options_, machine_rank, lease_ms));
  }

  // Heartbeats from `link` every 500 ms for `count` beats.
  void Beat(CountingLink* link, int count) {
    pb::AgentMessage beat;
    beat.mutable_heartbeat();
    for (int i = 0; i < count; ++i) {
      core_->OnMessage(link, beat);
      now_ += milliseconds(500);
    }
  }

  CoordinatorOptions options_;
  TimePoint now_{};
  std::unique_ptr<Coordinator> core_;
};

TEST_F(HeartbeatAckTest, AcksEveryThirdOfTheLeaseNotEveryHeartbeat) {
  CountingLink link;
  Register(&link, 1, 3000);  // acks at most every 1 s
  Beat(&link, 9);            // 0, 0.5, ... 4.0 s
  EXPECT_EQ(link.acks, 5);   // at 0, 1, 2, 3, 4 s
}

TEST_F(HeartbeatAckTest, NoLeaseDeclaredMeansEveryHeartbeatIsAcked) {
  CountingLink link;
  Register(&link, 1, 0);  // an agent that says nothing of its lease
  Beat(&link, 6);
  EXPECT_EQ(link.acks, 6);
}

TEST_F(HeartbeatAckTest, AnUnregisteredStreamGetsNothing) {
  CountingLink stranger;
  Beat(&stranger, 3);
  EXPECT_EQ(stranger.acks, 0);
}

}  // namespace
}  // namespace trl

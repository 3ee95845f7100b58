// The coordinator acknowledges an agent's heartbeats every lease / 3 (the
// lease the agent declared when it registered), not every one: the first
// heartbeat at once, then the first one at least lease / 3 after the last
// ack. The fake clock starts at 1000 s, not at TimePoint{}: that is also
// the coordinator's "never acked" value, and a clock starting there acks
// the second heartbeat too (at 0 and 0.5 s), which a count alone missed.
#include <gtest/gtest.h>

#include <vector>

#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

// Far from TimePoint{}, the coordinator's "never acked".
const TimePoint kStart = TimePoint{} + std::chrono::seconds(1000);

class HeartbeatAckTest : public ::testing::Test {
 protected:
  HeartbeatAckTest()
      : options_(TwoMachineCpuJob()),
        core_(CoordinatorOnClock(options_, [this] { return now_; })) {}

  void Register(FakeAgentLink* link, int machine_rank, int lease_ms) {
    core_->OnMessage(link, Registration(options_, machine_rank, lease_ms));
  }

  // Heartbeats from `link` every 500 ms for `count` beats.
  void Beat(FakeAgentLink* link, int count) {
    pb::AgentMessage beat;
    beat.mutable_heartbeat();
    for (int i = 0; i < count; ++i) {
      core_->OnMessage(link, beat);
      now_ += milliseconds(500);
    }
  }

  CoordinatorOptions options_;
  TimePoint now_ = kStart;
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(HeartbeatAckTest, AcksEveryThirdOfTheLeaseNotEveryHeartbeat) {
  FakeAgentLink link([this] { return now_; });
  Register(&link, 1, 3000);  // acks at most every 1 s
  Beat(&link, 9);            // 0, 0.5, ... 4.0 s
  EXPECT_EQ(link.AckTimesMs(kStart),
            (std::vector<int>{0, 1000, 2000, 3000, 4000}));
}

TEST_F(HeartbeatAckTest, FirstHeartbeatIsAckedAtOnceHoweverLateItComes) {
  FakeAgentLink link([this] { return now_; });
  Register(&link, 1, 3000);
  now_ += milliseconds(200);  // the first heartbeat, 0.2 s after registering
  Beat(&link, 4);             // 0.2, 0.7, 1.2, 1.7 s
  EXPECT_EQ(link.AckTimesMs(kStart), (std::vector<int>{200, 1200}));
}

TEST_F(HeartbeatAckTest, AHeartbeatJustShortOfTheIntervalIsNotAcked) {
  FakeAgentLink link([this] { return now_; });
  Register(&link, 1, 3000);
  pb::AgentMessage beat;
  beat.mutable_heartbeat();
  core_->OnMessage(&link, beat);  // acked
  now_ += milliseconds(999);
  core_->OnMessage(&link, beat);  // 1 ms short of lease / 3
  now_ += milliseconds(1);
  core_->OnMessage(&link, beat);  // exactly lease / 3 after the last ack
  EXPECT_EQ(link.AckTimesMs(kStart), (std::vector<int>{0, 1000}));
}

TEST_F(HeartbeatAckTest, NoLeaseDeclaredMeansEveryHeartbeatIsAcked) {
  FakeAgentLink link([this] { return now_; });
  Register(&link, 1, 0);  // an agent that says nothing of its lease
  Beat(&link, 6);
  EXPECT_EQ(link.AckTimesMs(kStart),
            (std::vector<int>{0, 500, 1000, 1500, 2000, 2500}));
}

TEST_F(HeartbeatAckTest, AnUnregisteredStreamGetsNothing) {
  FakeAgentLink stranger([this] { return now_; });
  Beat(&stranger, 3);
  EXPECT_EQ(stranger.acks(), 0);
}

}  // namespace
}  // namespace trl

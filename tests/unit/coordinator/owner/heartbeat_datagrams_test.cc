// The coordinator's side of UDP heartbeats: what a registration offers,
// which datagrams count as a heartbeat and get an ack, and which are
// dropped (replays, forgeries, strangers, the sessions of ended streams).
#include <gtest/gtest.h>

#include <set>

#include "common/heartbeat_datagram.h"
#include "coordinator/owner/core.h"
#include "tests/lib/coordinator_harness.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

class HeartbeatDatagramsTest : public ::testing::Test {
 protected:
  HeartbeatDatagramsTest() : options_(TwoMachineCpuJob()) {
    options_.policy.agent_heartbeat_timeout = seconds(3);
    core_ = CoordinatorOnClock(options_, [this] { return now_; });
    // Not random, but every call different: enough to tell sessions apart.
    core_->OfferUdpHeartbeats(
        29500,
        [this](size_t count) {
          std::string bytes(count, '\0');
          for (auto& byte : bytes) {
            byte = static_cast<char>(++random_state_ * 37);
          }
          return bytes;
        },
        /*encrypted=*/true);
  }

  void Register(FakeAgentLink* link, int machine_rank) {
    core_->OnMessage(link, Registration(options_, machine_rank, 4000));
  }

  static std::string Beat(const FakeAgentLink& link, int machine_rank,
                          uint64_t counter) {
    HeartbeatDatagram beat;
    beat.machine_rank = static_cast<uint32_t>(machine_rank);
    beat.session = link.reply().heartbeat_session();
    beat.counter = counter;
    return EncodeHeartbeat(beat, link.reply().heartbeat_key());
  }

  // The datagrams that got an ack, by index.
  std::set<size_t> Acked(const std::vector<std::string>& datagrams) {
    std::vector<std::string_view> views(datagrams.begin(), datagrams.end());
    std::set<size_t> acked;
    for (const auto& reply : core_->OnHeartbeatDatagrams(views)) {
      acked.insert(reply.index);
    }
    return acked;
  }

  std::string Via(int machine_rank) {
    const pb::JobStatus status = core_->Status();
    for (const auto& node : status.nodes()) {
      if (node.machine_rank() == machine_rank) return node.heartbeat_via();
    }
    return "no such node";
  }

  CoordinatorOptions options_;
  TimePoint now_{};
  int random_state_ = 0;
  std::unique_ptr<CoordinatorCore> core_;
};

TEST_F(HeartbeatDatagramsTest, EachRegistrationGetsItsOwnSessionAndKey) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  ASSERT_TRUE(a.reply().accepted());
  EXPECT_EQ(a.reply().heartbeat_udp_port(), 29500);
  EXPECT_NE(a.reply().heartbeat_session(), 0u);
  EXPECT_EQ(a.reply().heartbeat_key().size(), kHeartbeatKeySize);
  EXPECT_NE(a.reply().heartbeat_session(), b.reply().heartbeat_session());
  EXPECT_NE(a.reply().heartbeat_key(), b.reply().heartbeat_key());
}

TEST_F(HeartbeatDatagramsTest, NothingIsOfferedUntilThePortIsBound) {
  auto plain = CoordinatorOnClock(options_, [this] { return now_; });
  FakeAgentLink link;
  plain->OnMessage(&link, Registration(options_, 0, 4000));
  ASSERT_TRUE(link.reply().accepted()) << link.reply().reason();
  EXPECT_EQ(link.reply().heartbeat_udp_port(), 0);
  EXPECT_TRUE(link.reply().heartbeat_key().empty());
}

TEST_F(HeartbeatDatagramsTest, SignedHeartbeatsKeepAnAgentAliveAndAreAcked) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  ASSERT_EQ(core_->Status().state(), "running");
  // Ten seconds of datagrams only, one a second from each: nobody is lost.
  for (uint64_t counter = 1; counter <= 10; ++counter) {
    now_ += seconds(1);
    const std::vector<std::string> beats = {Beat(a, 0, counter),
                                            Beat(b, 1, counter)};
    std::vector<std::string_view> views(beats.begin(), beats.end());
    const auto replies = core_->OnHeartbeatDatagrams(views);
    ASSERT_EQ(replies.size(), 2u);
    const auto ack = ParseHeartbeat(replies[1].bytes);
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->kind, HeartbeatKind::kAck);
    EXPECT_EQ(ack->machine_rank, 1u);
    EXPECT_EQ(ack->session, b.reply().heartbeat_session());
    EXPECT_EQ(ack->counter, counter);
    EXPECT_TRUE(
        HeartbeatSignedWith(replies[1].bytes, b.reply().heartbeat_key()));
    core_->Tick();
  }
  EXPECT_FALSE(a.stopped() || b.stopped());
  EXPECT_EQ(Via(1), "udp");
  // Machine 1 goes quiet: lost after the 3 s timeout, like any agent.
  for (uint64_t counter = 11; counter <= 15; ++counter) {
    now_ += seconds(1);
    Acked({Beat(a, 0, counter)});
    core_->Tick();
  }
  EXPECT_TRUE(a.stopped());  // the generation stops: machine 1 is lost
}

TEST_F(HeartbeatDatagramsTest, ForgedReplayedAndStrangeDatagramsAreDropped) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  ASSERT_EQ(Acked({Beat(b, 1, 5)}), std::set<size_t>{0});

  HeartbeatDatagram forged;
  forged.machine_rank = 1;
  forged.session = b.reply().heartbeat_session();
  forged.counter = 6;
  const std::string wrong_key(kHeartbeatKeySize, 'x');
  HeartbeatDatagram ack_kind = forged;
  ack_kind.kind = HeartbeatKind::kAck;
  const std::vector<std::string> bad = {
      Beat(b, 1, 5),                       // replayed
      Beat(b, 1, 4),                       // older
      EncodeHeartbeat(forged, wrong_key),  // not signed with the key
      Beat(b, 0, 7),                       // another machine's rank
      EncodeHeartbeat(ack_kind, b.reply().heartbeat_key()),  // not a heartbeat
      std::string(kHeartbeatDatagramSize, '\0'),             // garbage
      "GET / HTTP/1.1\r\n\r\n",
  };
  EXPECT_TRUE(Acked(bad).empty());
  // None of them counted as a heartbeat: machine 1 is lost on time.
  for (int second = 0; second < 5; ++second) {
    now_ += seconds(1);
    Acked({Beat(a, 0, 100 + second)});
    Acked(bad);
    core_->Tick();
  }
  EXPECT_TRUE(a.stopped());
}

TEST_F(HeartbeatDatagramsTest, AMachineWhoseLossEndsTheJobIsToldItEnded) {
  // No restarts left: losing machine 1 fails the job. Machine 1 is told to
  // stop, and that the job is over, so that it does not wait to rejoin.
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  for (uint64_t counter = 1; counter <= 5; ++counter) {
    now_ += seconds(1);
    Acked({Beat(a, 0, counter)});
    core_->Tick();
  }
  EXPECT_TRUE(b.stopped());
  EXPECT_FALSE(b.closed());  // until the generation has stopped
  // Machine 0's worker ends on the stop order: the job has failed.
  pb::AgentMessage exited;
  exited.mutable_worker_exited()->set_generation(0);
  exited.mutable_worker_exited()->set_local_rank(0);
  exited.mutable_worker_exited()->set_signal(15);
  core_->OnMessage(&a, exited);
  EXPECT_EQ(b.finished(), "failed");
  EXPECT_TRUE(b.closed());
  EXPECT_EQ(a.finished(), "failed");
}

TEST_F(HeartbeatDatagramsTest, AnEndedStreamsSessionIsNoLongerHeard) {
  FakeAgentLink a, b;
  Register(&a, 0);
  Register(&b, 1);
  const std::string next = Beat(b, 1, 1);
  core_->OnDisconnected(&b);
  EXPECT_TRUE(Acked({next}).empty());
  // The agent registers again: a new session; the old one stays dead.
  FakeAgentLink again;
  Register(&again, 1);
  EXPECT_NE(again.reply().heartbeat_session(), b.reply().heartbeat_session());
  EXPECT_TRUE(Acked({Beat(b, 1, 2)}).empty());
  EXPECT_EQ(Acked({Beat(again, 1, 1)}), std::set<size_t>{0});
}

}  // namespace
}  // namespace trl

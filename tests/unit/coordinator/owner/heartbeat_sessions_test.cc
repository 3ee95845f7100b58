// HeartbeatSessions on its own: when a stream's heartbeat is acknowledged,
// what a registration is offered, and which datagrams count (a session's
// own, newer than the last, naming its machine, signed with its key).
#include "coordinator/owner/heartbeat_sessions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/heartbeat_datagram.h"
#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;
using std::chrono::milliseconds;

// Far from TimePoint{}, "never acknowledged".
const TimePoint kStart = TimePoint{} + std::chrono::seconds(1000);

class HeartbeatSessionsTest : public ::testing::Test {
 protected:
  void OfferUdp() {
    // Not random, but every call different: enough to tell sessions apart.
    sessions_.OfferUdp(29500, [this](size_t count) {
      std::string bytes(count, '\0');
      for (auto& byte : bytes) byte = static_cast<char>(++random_state_ * 37);
      return bytes;
    });
  }

  static std::string Beat(const pb::RegistrationReply& reply, int machine_rank,
                          uint64_t counter, std::string_view key) {
    HeartbeatDatagram beat;
    beat.machine_rank = static_cast<uint32_t>(machine_rank);
    beat.session = reply.heartbeat_session();
    beat.counter = counter;
    return EncodeHeartbeat(beat, key);
  }
  static std::string Beat(const pb::RegistrationReply& reply, int machine_rank,
                          uint64_t counter) {
    return Beat(reply, machine_rank, counter, reply.heartbeat_key());
  }

  HeartbeatSessions::Checked Check(const std::vector<std::string>& datagrams) {
    std::vector<std::string_view> views(datagrams.begin(), datagrams.end());
    return sessions_.CheckDatagrams(views);
  }
  // The agent's last word ("agent gone"), as its guardian sends it.
  static std::string Gone(const pb::RegistrationReply& reply, int machine_rank,
                          uint64_t counter = 0) {
    HeartbeatDatagram gone;
    gone.kind = HeartbeatKind::kAgentGone;
    gone.machine_rank = static_cast<uint32_t>(machine_rank);
    gone.session = reply.heartbeat_session();
    gone.counter = counter;
    return EncodeHeartbeat(gone, reply.heartbeat_key());
  }
  // The session a role change offers, as a registration's reply holds it.
  static pb::RegistrationReply AsReply(const pb::RoleChange& change) {
    pb::RegistrationReply reply;
    reply.set_heartbeat_udp_port(change.heartbeat_udp_port());
    reply.set_heartbeat_session(change.heartbeat_session());
    reply.set_heartbeat_key(change.heartbeat_key());
    return reply;
  }
  static std::vector<size_t> Indexes(const HeartbeatSessions::Checked& c) {
    std::vector<size_t> indexes;
    for (const auto& accepted : c.accepted) indexes.push_back(accepted.index);
    return indexes;
  }

  HeartbeatSessions sessions_;
  int random_state_ = 0;
  FakeAgentLink machine1_, machine2_, spare_;
};

TEST_F(HeartbeatSessionsTest,
       TheFirstHeartbeatIsAckedThenOneEveryThirdOfTheLease) {
  sessions_.Open(&machine1_, 1, 3000, nullptr);  // every 1000 ms
  TimePoint now = kStart;
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, now));
  now += milliseconds(999);
  EXPECT_FALSE(sessions_.HeartbeatOnStream(&machine1_, now));  // 1 ms short
  now += milliseconds(1);
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, now));  // exactly
  now += milliseconds(1);
  EXPECT_FALSE(sessions_.HeartbeatOnStream(&machine1_, now));
  EXPECT_STREQ(sessions_.Via(&machine1_), "stream");
  // A stream never opened (or closed) gets no ack and has no "via".
  EXPECT_FALSE(sessions_.HeartbeatOnStream(&machine2_, now));
  EXPECT_EQ(sessions_.Via(&machine2_), nullptr);
}

TEST_F(HeartbeatSessionsTest, WithoutALeaseEveryHeartbeatIsAcked) {
  sessions_.Open(&machine1_, 1, 0, nullptr);
  EXPECT_STREQ(sessions_.Via(&machine1_), "");
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, kStart));
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, kStart));
}

TEST_F(HeartbeatSessionsTest,
       MachinesAreOfferedASessionOnceUdpIsOfferedSparesNever) {
  pb::RegistrationReply before, first, second, spare;
  sessions_.Open(&machine1_, 1, 3000, &before);
  EXPECT_EQ(before.heartbeat_udp_port(), 0);
  EXPECT_EQ(before.heartbeat_session(), 0u);
  OfferUdp();
  sessions_.Open(&machine2_, 2, 3000, &first);
  sessions_.Open(&spare_, -1, 3000, &spare);
  EXPECT_EQ(first.heartbeat_udp_port(), 29500);
  EXPECT_NE(first.heartbeat_session(), 0u);
  EXPECT_EQ(first.heartbeat_key().size(), kHeartbeatKeySize);
  EXPECT_EQ(spare.heartbeat_udp_port(), 0);
  EXPECT_EQ(spare.heartbeat_session(), 0u);
  FakeAgentLink third;
  sessions_.Open(&third, 0, 3000, &second);
  EXPECT_NE(second.heartbeat_session(), first.heartbeat_session());
  EXPECT_NE(second.heartbeat_key(), first.heartbeat_key());
}

TEST_F(HeartbeatSessionsTest,
       ASignedNewerHeartbeatIsAcceptedAndAckedWithItsKey) {
  OfferUdp();
  pb::RegistrationReply reply;
  sessions_.Open(&machine1_, 1, 3000, &reply);
  const auto checked = Check({Beat(reply, 1, 1)});
  ASSERT_EQ(checked.accepted.size(), 1u);
  EXPECT_EQ(checked.first_refusal, nullptr);
  EXPECT_EQ(checked.accepted[0].machine_rank, 1);
  EXPECT_TRUE(
      HeartbeatSignedWith(checked.accepted[0].ack, reply.heartbeat_key()));
  const auto ack = ParseHeartbeat(checked.accepted[0].ack);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->kind, HeartbeatKind::kAck);
  EXPECT_EQ(ack->counter, 1u);
  EXPECT_STREQ(sessions_.Via(&machine1_), "udp");
}

TEST_F(HeartbeatSessionsTest, AWrongKeyIsRefused) {
  OfferUdp();
  pb::RegistrationReply reply;
  sessions_.Open(&machine1_, 1, 3000, &reply);
  const std::string wrong(kHeartbeatKeySize, 'x');
  const auto checked = Check({Beat(reply, 1, 1, wrong)});
  EXPECT_TRUE(checked.accepted.empty());
  EXPECT_STREQ(checked.first_refusal, "bad signature");
  EXPECT_STREQ(sessions_.Via(&machine1_), "");
}

TEST_F(HeartbeatSessionsTest, ADatagramNamingAnotherMachineIsRefused) {
  OfferUdp();
  pb::RegistrationReply reply;
  sessions_.Open(&machine1_, 1, 3000, &reply);
  const auto checked = Check({Beat(reply, 2, 1)});
  EXPECT_TRUE(checked.accepted.empty());
  EXPECT_STREQ(checked.first_refusal, "bad signature");
}

TEST_F(HeartbeatSessionsTest, AReplayedOrOlderCounterIsRefused) {
  OfferUdp();
  pb::RegistrationReply reply;
  sessions_.Open(&machine1_, 1, 3000, &reply);
  const auto checked = Check({Beat(reply, 1, 5), Beat(reply, 1, 5),
                              Beat(reply, 1, 4), Beat(reply, 1, 6)});
  EXPECT_EQ(Indexes(checked), (std::vector<size_t>{0, 3}));
  EXPECT_STREQ(checked.first_refusal, "replayed");
  EXPECT_EQ(Check({Beat(reply, 1, 6)}).accepted.size(), 0u);  // next batch
}

TEST_F(HeartbeatSessionsTest, StrangersAndNonHeartbeatsAreRefused) {
  OfferUdp();
  pb::RegistrationReply reply;
  sessions_.Open(&machine1_, 1, 3000, &reply);
  EXPECT_STREQ(Check({"not a datagram"}).first_refusal, "not a heartbeat");
  pb::RegistrationReply stranger = reply;
  stranger.set_heartbeat_session(reply.heartbeat_session() + 1);
  EXPECT_STREQ(Check({Beat(stranger, 1, 1)}).first_refusal,
               "no registered stream has its session");
  HeartbeatDatagram ack;
  ack.kind = HeartbeatKind::kAck;
  ack.machine_rank = 1;
  ack.session = reply.heartbeat_session();
  ack.counter = 1;
  EXPECT_STREQ(
      Check({EncodeHeartbeat(ack, reply.heartbeat_key())}).first_refusal,
      "not a heartbeat");
}

TEST_F(HeartbeatSessionsTest, AnEndedOrClosedSessionIsNoLongerHeard) {
  OfferUdp();
  pb::RegistrationReply one, two;
  sessions_.Open(&machine1_, 1, 3000, &one);
  sessions_.Open(&machine2_, 2, 3000, &two);
  sessions_.EndUdpSession(&machine1_);  // re-keyed: heard on its stream only
  sessions_.Close(&machine2_, 2);
  const auto checked = Check({Beat(one, 1, 1), Beat(two, 2, 1)});
  EXPECT_TRUE(checked.accepted.empty());
  EXPECT_STREQ(checked.first_refusal, "no registered stream has its session");
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, kStart));
  EXPECT_EQ(sessions_.Via(&machine2_), nullptr);
}

TEST_F(HeartbeatSessionsTest, AnAgentsLastWordIsHeardOnceForItsOwnSession) {
  OfferUdp();
  pb::RegistrationReply one, two;
  sessions_.Open(&machine1_, 1, 3000, &one);
  sessions_.Open(&machine2_, 2, 3000, &two);
  // While its stream is still registered (its end not seen yet): kept
  // until the stream ends; a datagram alone ends nothing.
  auto checked = Check({Gone(one, 1), Gone(one, 1)});
  EXPECT_TRUE(checked.gone.empty());
  EXPECT_TRUE(checked.accepted.empty());  // no heartbeat, no ack
  EXPECT_EQ(checked.first_refusal, nullptr);
  EXPECT_TRUE(sessions_.Close(&machine1_, 1));
  EXPECT_TRUE(Check({Gone(one, 1)}).gone.empty());  // a late copy
  // After its stream ended: once, then its copies are not heard.
  EXPECT_FALSE(sessions_.Close(&machine2_, 2));
  checked = Check({Gone(two, 2), Gone(two, 2)});
  ASSERT_EQ(checked.gone.size(), 1u);
  EXPECT_EQ(checked.gone[0], 2);
  EXPECT_STREQ(checked.first_refusal, "no registered stream has its session");
}

// A spare that takes machine 2's place gets a session of machine 2: its
// heartbeats go as datagrams, and when it dies its guardian's word is heard
// (without one, a promoted spare's death waited out its lease and fence).
// The lost agent's own word is still heard after the handover.
TEST_F(HeartbeatSessionsTest, ASpareThatStandsForAMachineGetsASessionOfIt) {
  OfferUdp();
  pb::RegistrationReply two, spare;
  sessions_.Open(&machine2_, 2, 3000, &two);
  sessions_.Open(&spare_, -1, 3000, &spare);
  EXPECT_EQ(spare.heartbeat_udp_port(), 0);      // a spare beats on its stream
  EXPECT_FALSE(sessions_.Close(&machine2_, 2));  // machine 2 is lost
  pb::RoleChange change;
  sessions_.Rekey(&spare_, 2, &change);
  ASSERT_EQ(change.heartbeat_udp_port(), 29500);
  EXPECT_NE(change.heartbeat_session(), two.heartbeat_session());
  const pb::RegistrationReply stands = AsReply(change);
  auto checked = Check({Beat(stands, 2, 1), Beat(stands, 1, 2)});
  ASSERT_EQ(checked.accepted.size(), 1u);
  EXPECT_EQ(checked.accepted[0].machine_rank, 2);
  EXPECT_STREQ(checked.first_refusal, "bad signature");  // names machine 1
  checked = Check({Gone(two, 2)});
  ASSERT_EQ(checked.gone.size(), 1u) << "the lost agent's word";
  EXPECT_FALSE(sessions_.Close(&spare_, 2));  // the stand-in dies in turn
  checked = Check({Gone(stands, 2)});
  ASSERT_EQ(checked.gone.size(), 1u) << "the stand-in's word";
  EXPECT_EQ(checked.gone[0], 2);
}

TEST_F(HeartbeatSessionsTest, AMachinesAgentThatBecomesASpareLosesItsSession) {
  OfferUdp();
  pb::RegistrationReply one;
  sessions_.Open(&machine1_, 1, 3000, &one);
  pb::RoleChange change;
  sessions_.Rekey(&machine1_, -1, &change);
  EXPECT_EQ(change.heartbeat_udp_port(), 0);
  EXPECT_STREQ(Check({Beat(one, 1, 1)}).first_refusal,
               "no registered stream has its session");
  EXPECT_TRUE(sessions_.HeartbeatOnStream(&machine1_, kStart));
}

TEST_F(HeartbeatSessionsTest, NoLastWordIsHeardWithoutTls) {
  // In plaintext the key travels in the clear: a word could be forged.
  sessions_.OfferUdp(
      29500, [](size_t count) { return std::string(count, '\x5a'); },
      /*hear_last_words=*/false);
  pb::RegistrationReply one;
  sessions_.Open(&machine1_, 1, 3000, &one);
  EXPECT_STREQ(Check({Gone(one, 1)}).first_refusal, "a last word without TLS");
  EXPECT_FALSE(sessions_.Close(&machine1_, 1));
  const auto checked = Check({Gone(one, 1)});
  EXPECT_TRUE(checked.gone.empty());
  EXPECT_STREQ(checked.first_refusal, "a last word without TLS");
}

TEST_F(HeartbeatSessionsTest, ALastWordNotTheAgentsOwnIsNotHeard) {
  OfferUdp();
  pb::RegistrationReply one, two, spare, again;
  sessions_.Open(&machine1_, 1, 3000, &one);
  sessions_.Open(&machine2_, 2, 3000, &two);
  // Another machine's name, another key, a counter: refused.
  auto checked = Check({Gone(one, 2)});
  EXPECT_TRUE(checked.gone.empty());
  EXPECT_STREQ(checked.first_refusal, "bad signature");
  pb::RegistrationReply forged = one;
  forged.set_heartbeat_key(two.heartbeat_key());
  EXPECT_STREQ(Check({Gone(forged, 1)}).first_refusal, "bad signature");
  EXPECT_STREQ(Check({Gone(one, 1, 7)}).first_refusal, "bad signature");
  // A heartbeat's signature does not make a last word.
  EXPECT_TRUE(Check({Beat(one, 1, 0)}).gone.empty());
  // None of those was taken for its word. Machine 1's stream ends; a new
  // agent of machine 1 registers: the old one's word is moot (the new one
  // stopped what the old one left).
  EXPECT_FALSE(sessions_.Close(&machine1_, 1));
  FakeAgentLink newcomer;
  sessions_.Open(&newcomer, 1, 3000, &again);
  EXPECT_TRUE(Check({Gone(one, 1)}).gone.empty());
  // Machine 2's stream ends; a spare takes its place and is lost in turn:
  // the first agent's word no longer speaks for what the machine runs.
  sessions_.Close(&machine2_, 2);
  sessions_.Open(&spare_, -1, 3000, &spare);
  sessions_.Close(&spare_, 2);  // rekeyed to machine 2, then lost
  EXPECT_TRUE(Check({Gone(two, 2)}).gone.empty());
}

}  // namespace
}  // namespace trl

// Which acks of the coordinator keep an agent's lease, and from when: an
// ack keeps it from when its heartbeat was sent, not from when it is read.
#include "agent/link/heartbeat_sequence.h"

#include <gtest/gtest.h>

#include <string>

#include "common/heartbeat_datagram.h"

namespace trl {
namespace {

using std::chrono::milliseconds;
using Time = HeartbeatSequence::Time;

const std::string kKey(kHeartbeatKeySize, 'k');

Time At(int64_t ms) { return Time() + milliseconds(ms); }

std::string Ack(uint64_t counter, uint64_t session = 9, uint32_t machine = 1) {
  HeartbeatDatagram ack;
  ack.kind = HeartbeatKind::kAck;
  ack.machine_rank = machine;
  ack.session = session;
  ack.counter = counter;
  return EncodeHeartbeat(ack, kKey);
}

TEST(HeartbeatSequenceTest, AnAckGivesWhenItsHeartbeatWasSent) {
  HeartbeatSequence sequence(1, 9, kKey);
  sequence.Next(At(1000));
  sequence.Next(At(2000));
  // Read long after (a frozen agent): it still says 1 s.
  EXPECT_EQ(sequence.Accept(Ack(1)), At(1000));
  EXPECT_FALSE(sequence.LastAcked());
  EXPECT_FALSE(sequence.Accept(Ack(1)).has_value());  // a replay
  EXPECT_EQ(sequence.Accept(Ack(2)), At(2000));
  EXPECT_TRUE(sequence.LastAcked());
}

TEST(HeartbeatSequenceTest, AcksThatAreNotThisSessionsOrNotSentDoNotCount) {
  HeartbeatSequence sequence(1, 9, kKey);
  sequence.Next(At(1000));
  EXPECT_FALSE(sequence.Accept(Ack(2)).has_value());        // never sent
  EXPECT_FALSE(sequence.Accept(Ack(1, 8)).has_value());     // another session
  EXPECT_FALSE(sequence.Accept(Ack(1, 9, 2)).has_value());  // another machine
  std::string forged = Ack(1);
  forged.back() ^= 1;
  EXPECT_FALSE(sequence.Accept(forged).has_value());
  EXPECT_EQ(sequence.Accept(Ack(1)), At(1000));
}

TEST(HeartbeatSequenceTest, AnAckOfAHeartbeatTooOldToRememberDoesNotCount) {
  // Its send time is gone: it cannot say from when the lease would run.
  HeartbeatSequence sequence(1, 9, kKey);
  for (int i = 1; i <= 100; ++i) sequence.Next(At(i * 1000));
  EXPECT_FALSE(sequence.Accept(Ack(36)).has_value());
  EXPECT_EQ(sequence.Accept(Ack(37)), At(37000));
  EXPECT_EQ(sequence.Accept(Ack(100)), At(100000));
}

}  // namespace
}  // namespace trl

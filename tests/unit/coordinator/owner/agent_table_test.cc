// AgentTable on its own: which stream stands for which machine or spare,
// how handovers re-key streams (a swap included), who a message goes to,
// and fenced streams kept open until they are closed together.
#include "coordinator/owner/agent_table.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tests/lib/fake_agent_link.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

pb::CoordinatorMessage Ack() {
  pb::CoordinatorMessage message;
  message.mutable_heartbeat_ack();
  return message;
}

class AgentTableTest : public ::testing::Test {
 protected:
  AgentTable table_;
  FakeAgentLink machine0_, machine1_, spare_;
};

TEST_F(AgentTableTest, AStreamHasAKeyOnlyWhileRegistered) {
  table_.Heard(&machine1_);
  EXPECT_EQ(table_.KeyOf(&machine1_), std::nullopt);
  table_.Register(&machine1_, 1);
  table_.Register(&spare_, -1);
  EXPECT_EQ(table_.KeyOf(&machine1_), 1);
  EXPECT_EQ(table_.KeyOf(&spare_), -1);
  EXPECT_EQ(table_.StreamsOf(1), std::vector<AgentLink*>{&machine1_});
  table_.Unregister(&machine1_);
  EXPECT_EQ(table_.KeyOf(&machine1_), std::nullopt);
  EXPECT_TRUE(table_.StreamsOf(1).empty());
  // Unregistered, the stream is still open until it ends.
  EXPECT_EQ(table_.open(), std::set<AgentLink*>{&machine1_});
  table_.Ended(&machine1_);
  EXPECT_TRUE(table_.open().empty());
}

TEST_F(AgentTableTest, AHandoverSwapMovesBothStreams) {
  table_.Register(&machine1_, 1);
  table_.Register(&spare_, -1);
  // The spare takes machine 1's place; machine 1's agent becomes spare -2.
  const std::vector<Handover> handovers = {
      Handover{-1, 1, "the spare takes machine 1"},
      Handover{1, -2, "machine 1's agent is a spare now"}};
  const auto moves = table_.Rekey(handovers);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].first, &spare_);
  EXPECT_EQ(moves[0].second, &handovers[0]);
  EXPECT_EQ(moves[1].first, &machine1_);
  EXPECT_EQ(table_.KeyOf(&spare_), 1);
  EXPECT_EQ(table_.KeyOf(&machine1_), -2);
}

TEST_F(AgentTableTest, AHandoverOfNoRegisteredStreamMovesNothing) {
  table_.Register(&machine1_, 1);
  EXPECT_TRUE(table_.Rekey({Handover{-3, 0, "gone"}}).empty());
  EXPECT_EQ(table_.KeyOf(&machine1_), 1);
}

TEST_F(AgentTableTest, MessagesGoToTheKeysAskedForOrToEveryone) {
  table_.Register(&machine0_, 0);
  table_.Register(&machine1_, 1);
  table_.Register(&spare_, -1);
  EXPECT_EQ(table_.SendTo({1}, Ack()), 1);
  EXPECT_EQ(machine1_.acks(), 1);
  EXPECT_EQ(machine0_.acks(), 0);
  EXPECT_EQ(table_.SendTo({}, Ack()), 3);
  EXPECT_EQ(spare_.acks(), 1);
  EXPECT_EQ(table_.SendTo({7}, Ack()), 0);
  EXPECT_EQ(table_.Peers(), std::set<std::string>{"test"});
}

TEST_F(AgentTableTest, FencedStreamsAreClosedTogetherUnlessForgotten) {
  table_.Heard(&machine0_);
  table_.Heard(&machine1_);
  table_.Fence(&machine0_);
  table_.Fence(&machine1_);
  table_.Ended(&machine1_);  // an ended stream is not closed again
  EXPECT_TRUE(table_.AnyFenced());
  table_.CloseFenced();
  EXPECT_TRUE(machine0_.closed());
  EXPECT_FALSE(machine1_.closed());
  EXPECT_FALSE(table_.AnyFenced());
  table_.Fence(&spare_);
  table_.ForgetFenced();
  EXPECT_FALSE(table_.AnyFenced());
  EXPECT_FALSE(spare_.closed());
}

}  // namespace
}  // namespace trl

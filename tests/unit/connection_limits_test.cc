// The rule of the connection caps: which connections go when a peer or the
// whole port holds too many.
#include "coordinator/connection_limits.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace trl {
namespace {

PortConnection From(const std::string& address, uint64_t inode) {
  return PortConnection{inode, address,
                        address + ":" + std::to_string(40000 + inode)};
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ConnectionLimitsTest, APeerOverItsCapLosesItsNewestConnections) {
  std::vector<PortConnection> connections;
  for (uint64_t inode = 1; inode <= 5; ++inode) {
    connections.push_back(From("10.0.0.9", inode));
  }
  connections.push_back(From("10.0.0.2", 6));
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, {}, {3, 100})),
            (std::vector<uint64_t>{4, 5}));
}

TEST(ConnectionLimitsTest, AnAgentsConnectionIsNeverCut) {
  // The agent's connection is the newest from its address: a flood from
  // the same host takes the places, not the agent.
  std::vector<PortConnection> connections;
  for (uint64_t inode = 1; inode <= 4; ++inode) {
    connections.push_back(From("10.0.0.2", inode));
  }
  const std::set<std::string> agents = {"10.0.0.2:40004"};
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, agents, {2, 100})),
            (std::vector<uint64_t>{2, 3}));
}

TEST(ConnectionLimitsTest, OverTheTotalTheNewestGoWhateverThePeer) {
  std::vector<PortConnection> connections = {
      From("10.0.0.1", 1), From("10.0.0.2", 2), From("10.0.0.3", 3),
      From("10.0.0.4", 4), From("10.0.0.5", 5)};
  const std::set<std::string> agents = {"10.0.0.5:40005"};
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, agents, {10, 3})),
            (std::vector<uint64_t>{3, 4}));
}

TEST(ConnectionLimitsTest, UnderBothCapsNothingIsCut) {
  std::vector<PortConnection> connections = {From("10.0.0.1", 1),
                                             From("10.0.0.1", 2)};
  EXPECT_TRUE(ConnectionsToCut(connections, {}, {2, 2}).empty());
}

}  // namespace
}  // namespace trl

// The rule of the connection caps: which connections go when a peer or the
// whole port holds too many.
#include "coordinator/access/connection_limits.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "tests/lib/loopback_listener.h"

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

TEST(ConnectionLimitsTest, APeerOverItsCapLosesItsOldestUnprovenOnes) {
  std::vector<PortConnection> connections;
  for (uint64_t inode = 1; inode <= 5; ++inode) {
    connections.push_back(From("10.0.0.9", inode));
  }
  connections.push_back(From("10.0.0.2", 6));
  // What lingers unproven is a flood; a new client gets its chance.
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, {}, {3, 100})),
            (std::vector<uint64_t>{1, 2}));
}

TEST(ConnectionLimitsTest, AnAgentsConnectionIsNeverCut) {
  // The agent's connection is the oldest from its address: a flood from
  // the same host loses its own connections, never the agent's.
  std::vector<PortConnection> connections;
  for (uint64_t inode = 1; inode <= 4; ++inode) {
    connections.push_back(From("10.0.0.2", inode));
  }
  const std::set<std::string> agents = {"10.0.0.2:40001"};
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, agents, {2, 100})),
            (std::vector<uint64_t>{2, 3}));
}

TEST(ConnectionLimitsTest, OverTheTotalTheOldestUnprovenGoWhateverThePeer) {
  std::vector<PortConnection> connections = {
      From("10.0.0.1", 1), From("10.0.0.2", 2), From("10.0.0.3", 3),
      From("10.0.0.4", 4), From("10.0.0.5", 5)};
  const std::set<std::string> agents = {"10.0.0.1:40001"};
  // Four unproven against a total of 3: the oldest of them goes.
  EXPECT_EQ(Sorted(ConnectionsToCut(connections, agents, {10, 3})),
            (std::vector<uint64_t>{2}));
}

TEST(ConnectionLimitsTest, ProvenConnectionsDoNotCountAgainstTheTotal) {
  // A job larger than the total (16,384 agents against 5,000 at a
  // descriptor limit of 20,000): registered agents fill the port, and the
  // next ones, still unproven, must not be cut for it (they were, and
  // such a job could never finish registering).
  std::vector<PortConnection> connections;
  std::set<std::string> agents;
  for (uint64_t i = 1; i <= 8; ++i) {
    connections.push_back(From("10.1.0." + std::to_string(i), i));
    agents.insert(connections.back().peer);
  }
  for (uint64_t i = 9; i <= 11; ++i) {
    connections.push_back(From("10.1.0." + std::to_string(i), i));
  }
  EXPECT_TRUE(ConnectionsToCut(connections, agents, {64, 3}).empty());
  // One more unproven is over: the oldest unproven goes, no agent.
  connections.push_back(From("10.1.0.12", 12));
  EXPECT_EQ(ConnectionsToCut(connections, agents, {64, 3}),
            (std::vector<uint64_t>{9}));
}

TEST(ConnectionLimitsTest, ProvenConnectionsOnAnyPortShrinkEveryPortsShare) {
  // 1,824 descriptors, two ports: 200 unproven each with none proven. 200
  // workers proven on the store's port leave (1824 - 1024 - 200) / 4 = 150
  // unproven on the agents' port too: descriptors are the process's, not
  // a port's.
  std::vector<PortConnection> store, agents;
  std::set<std::string> proven;
  for (uint64_t i = 1; i <= 200; ++i) {
    store.push_back(From(
        "10.2." + std::to_string(i / 50) + "." + std::to_string(i % 50), i));
    proven.insert(store.back().peer);
  }
  for (uint64_t i = 1001; i <= 1160; ++i) {
    agents.push_back(From(
        "10.3." + std::to_string(i / 50) + "." + std::to_string(i % 50), i));
  }
  std::vector<uint64_t> oldest_ten;
  for (uint64_t i = 1001; i <= 1010; ++i) oldest_ten.push_back(i);
  EXPECT_EQ(Sorted(ConnectionsToCutOnPorts({store, agents}, proven, 64, 1824)),
            oldest_ten);
  // Nothing proven: 160 is within the share of 200.
  EXPECT_TRUE(ConnectionsToCutOnPorts({store, agents}, {}, 64, 1824).empty());
}

TEST(ConnectionLimitsTest, TheUnprovenCapLeavesTheJobsAgentsTheirDescriptors) {
  // Half of what the limit leaves past the agents and a reserve of 1024,
  // shared by the ports.
  EXPECT_EQ(UnprovenConnectionCap(20000, 8, 2), (20000 - 8 - 1024) / 4);
  EXPECT_EQ(UnprovenConnectionCap(20000, 16384, 2), (20000 - 16384 - 1024) / 4);
  EXPECT_EQ(UnprovenConnectionCap(20000, 16384, 1), (20000 - 16384 - 1024) / 2);
  // Never below 128 (a limit too small for the job is warned of), never
  // above 65536.
  EXPECT_EQ(UnprovenConnectionCap(1024, 4096, 2), 128);
  EXPECT_EQ(UnprovenConnectionCap(uint64_t{1} << 40, 8, 1), 65536);
}

// One warning at start, naming every way the limit is low, with one
// figure to raise it to.
TEST(ConnectionLimitsTest, ALowDescriptorLimitIsOneWarningWithOneFigure) {
  EXPECT_EQ(DescriptorLimitWarning(65536, 4096, 2), std::nullopt);
  EXPECT_EQ(DescriptorLimitWarning(20000, 16384, 2), std::nullopt);
  // Enough for the job, but under 16,384: a flood could stop accepts.
  const auto low = DescriptorLimitWarning(4096, 8, 2);
  ASSERT_TRUE(low.has_value());
  EXPECT_NE(low->find("only 4096 files"), std::string::npos) << *low;
  EXPECT_NE(low->find("could stop the coordinator from accepting agents"),
            std::string::npos)
      << *low;
  EXPECT_EQ(low->find("too few"), std::string::npos) << *low;
  EXPECT_NE(low->find("to 65536 or more"), std::string::npos) << *low;
  // Too few for a job's own agents (16,384 + 1024 + 2 x 2 x 128 > 17,000),
  // and the advice is 65536 (more than twice 16,384 + 1024); for 65,536
  // machines it is twice 65,536 + 1024.
  const auto cut = DescriptorLimitWarning(17000, 16384, 2);
  ASSERT_TRUE(cut.has_value());
  EXPECT_NE(cut->find("too few for 16384 agents' connections"),
            std::string::npos)
      << *cut;
  EXPECT_EQ(cut->find("could stop"), std::string::npos) << *cut;
  EXPECT_NE(cut->find("to 65536 or more"), std::string::npos) << *cut;
  const auto big = DescriptorLimitWarning(40000, 65536, 1);
  ASSERT_TRUE(big.has_value());
  EXPECT_NE(big->find("to 133120 or more"), std::string::npos) << *big;
  // Both at once: one line.
  const auto both = DescriptorLimitWarning(1024, 4096, 2);
  ASSERT_TRUE(both.has_value());
  EXPECT_NE(both->find("too few"), std::string::npos) << *both;
  EXPECT_NE(both->find("could stop"), std::string::npos) << *both;
}

TEST(ConnectionLimitsTest, GrpcPeerNamesMatchTheKernels) {
  EXPECT_EQ(PeerFromGrpc("ipv4:10.0.0.2:41234"), "10.0.0.2:41234");
  EXPECT_EQ(PeerFromGrpc("ipv6:%5B::1%5D:41234"), "[::1]:41234");
}

TEST(ConnectionLimitsTest, UnderBothCapsNothingIsCut) {
  std::vector<PortConnection> connections = {From("10.0.0.1", 1),
                                             From("10.0.0.1", 2)};
  EXPECT_TRUE(ConnectionsToCut(connections, {}, {2, 2}).empty());
}

TEST(ConnectionLimitsTest, OverACapOnlyWhenSomethingCouldBeCut) {
  std::vector<PortConnection> connections = {
      From("10.0.0.1", 1), From("10.0.0.1", 2), From("10.0.0.2", 3)};
  EXPECT_FALSE(OverACap(connections, {2, 3}));
  EXPECT_TRUE(OverACap(connections, {1, 3}));  // 10.0.0.1 holds 2
  EXPECT_TRUE(OverACap(connections, {2, 2}));  // 3 in all
  // Many peers, each under its cap, under the total: nothing to do.
  std::vector<PortConnection> agents;
  for (uint64_t i = 1; i <= 200; ++i) {
    agents.push_back(From("10.0." + std::to_string(i) + ".1", i));
  }
  EXPECT_FALSE(OverACap(agents, {64, 1000}));
  // A cap on the total below the one per address holds too.
  EXPECT_TRUE(OverACap(connections, {64, 2}));
  EXPECT_EQ(ConnectionsToCut(connections, {}, {64, 2}).size(), 1u);
}

// An IPv4 client of a dual-stack listener is an AF_INET6 socket with an
// IPv4-mapped address: it counts as its IPv4 address, found the same way
// by the kernel's socket diagnostics and by /proc/net/tcp6.
TEST(ConnectionLimitsTest, BothWaysFindTheSameConnectionsMappedAsIPv4) {
  const int listener = socket(AF_INET6, SOCK_STREAM, 0);
  const int off = 0;
  setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  sockaddr_in6 any = {};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  if (bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 ||
      listen(listener, 16) != 0) {
    close(listener);
    GTEST_SKIP() << "no IPv6 here";
  }
  socklen_t length = sizeof(any);
  getsockname(listener, reinterpret_cast<sockaddr*>(&any), &length);
  const int port = ntohs(any.sin6_port);
  std::vector<int> fds;
  sockaddr_in v4 = {};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  v4.sin_port = htons(port);
  sockaddr_in6 v6 = any;
  v6.sin6_addr = in6addr_loopback;
  for (int i = 0; i < 3; ++i) {
    const bool ipv4 = i < 2;
    const int client = socket(ipv4 ? AF_INET : AF_INET6, SOCK_STREAM, 0);
    fds.push_back(client);
    ASSERT_EQ(connect(client,
                      ipv4 ? reinterpret_cast<sockaddr*>(&v4)
                           : reinterpret_cast<sockaddr*>(&v6),
                      ipv4 ? sizeof(v4) : sizeof(v6)),
              0);
    fds.push_back(accept(listener, nullptr, nullptr));
  }
  auto by_inode = [](std::vector<PortConnection> v) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.socket_inode < b.socket_inode;
    });
    return v;
  };
  ASSERT_TRUE(ProcSockets().reads_socket_diag());
  const auto found = by_inode(ReadPortConnections(port));
  const auto from_proc = by_inode(ReadPortConnectionsFromProc(port));
  ASSERT_EQ(found.size(), 3u);
  ASSERT_EQ(from_proc.size(), 3u);
  int ipv4_peers = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].socket_inode, from_proc[i].socket_inode);
    EXPECT_EQ(found[i].peer_address, from_proc[i].peer_address);
    EXPECT_EQ(found[i].peer, from_proc[i].peer);
    if (found[i].peer_address == "127.0.0.1") {
      ++ipv4_peers;
      EXPECT_EQ(found[i].peer.rfind("127.0.0.1:", 0), 0u) << found[i].peer;
    } else {
      EXPECT_EQ(found[i].peer_address, "::1");
      EXPECT_EQ(found[i].peer.rfind("[::1]:", 0), 0u) << found[i].peer;
    }
  }
  EXPECT_EQ(ipv4_peers, 2);
  for (int fd : fds) close(fd);
  close(listener);
}

// The I/O half: this process's own connections are found and cut.
TEST(ConnectionLimitsTest, FindsAndCutsThisProcesssConnections) {
  LoopbackListener listener(16);
  ASSERT_TRUE(listener.ok());
  const int port = listener.port();
  std::vector<int> clients, accepted;
  for (int i = 0; i < 3; ++i) {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(client, listener.get(), listener.length()), 0);
    clients.push_back(client);
    accepted.push_back(accept(listener.fd(), nullptr, nullptr));
  }
  const auto found = ReadPortConnections(port);
  ASSERT_EQ(found.size(), 3u);
  for (const auto& connection : found) {
    EXPECT_EQ(connection.peer_address, "127.0.0.1");
    EXPECT_EQ(connection.peer.rfind("127.0.0.1:", 0), 0u) << connection.peer;
  }
  const auto cut = ConnectionsToCut(found, {}, {1, 100});
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(CutSockets(cut), 2);
  int closed = 0;
  for (int client : clients) {
    char byte;
    if (recv(client, &byte, 1, MSG_DONTWAIT) == 0) ++closed;
  }
  EXPECT_EQ(closed, 2);
  for (int fd : clients) close(fd);
  for (int fd : accepted) close(fd);
}

}  // namespace
}  // namespace trl

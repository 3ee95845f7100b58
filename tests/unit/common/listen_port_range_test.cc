#include "common/listen_port_range.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "common/kernel_files.h"
#include "common/network.h"

namespace trl {
namespace {

TEST(ListenPortRangeTest, TheKernelsRangeIsReadAndNonsenseRefused) {
  const auto range = ParsePortRange("32768\t60999\n");
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->first, 32768);
  EXPECT_EQ(range->last, 60999);
  EXPECT_FALSE(ParsePortRange(""));
  EXPECT_FALSE(ParsePortRange("32768"));
  EXPECT_FALSE(ParsePortRange("60999 32768"));
  EXPECT_FALSE(ParsePortRange("0 100"));
  EXPECT_FALSE(ParsePortRange("1024 70000"));
  EXPECT_FALSE(ParsePortRange("1024 2048 x"));
}

TEST(ListenPortRangeTest, ListenersArePickedBelowTheEphemeralRange) {
  const auto below = ListenPortsBelow({32768, 60999});
  ASSERT_TRUE(below.has_value());
  EXPECT_EQ(below->last, 32767);
  EXPECT_EQ(below->size(), kListenSpan);
  // Never a privileged port; too little room is no range at all.
  const auto low = ListenPortsBelow({3000, 60999});
  ASSERT_TRUE(low.has_value());
  EXPECT_EQ(low->first, 1025);
  EXPECT_EQ(low->last, 2999);
  EXPECT_FALSE(ListenPortsBelow({1200, 60999}));
  EXPECT_FALSE(ListenPortsBelow({1, 65535}));
}

TEST(ListenPortRangeTest, CandidatesVisitEveryPortOnceFromAnySeed) {
  const PortRange ports{20000, 20099};
  for (unsigned seed : {0u, 7u, 4294967295u}) {
    std::set<int> seen;
    for (int i = 0; i < ports.size(); ++i) {
      const int port = CandidatePort(ports, seed, i);
      EXPECT_TRUE(ports.Contains(port)) << port;
      seen.insert(port);
    }
    EXPECT_EQ(static_cast<int>(seen.size()), ports.size()) << seed;
  }
}

TEST(ListenPortRangeTest, OtherLaunchersDefaultPortsAreLeftToThem) {
  EXPECT_TRUE(IsAnotherLaunchersDefault(29400));  // torchrun's c10d
  EXPECT_TRUE(IsAnotherLaunchersDefault(29500));  // MASTER_PORT's default
  EXPECT_TRUE(IsAnotherLaunchersDefault(29501));
  EXPECT_FALSE(IsAnotherLaunchersDefault(29399));
  EXPECT_FALSE(IsAnotherLaunchersDefault(29601));
}

// The real pick: a port that binds, below this machine's ephemeral range,
// so that no outgoing connection can have taken it when rank 0's store
// binds it (CI saw MASTER_PORT taken: EADDRINUSE).
TEST(ListenPortRangeTest, AFreePortIsBelowThisMachinesEphemeralRange) {
  const auto ephemeral = ParsePortRange(
      ReadKernelFile("/proc/sys/net/ipv4/ip_local_port_range", 64));
  ASSERT_TRUE(ephemeral.has_value());
  ASSERT_TRUE(ListenPortsBelow(*ephemeral).has_value())
      << "this machine's ephemeral range starts at " << ephemeral->first;
  // 400 picks: a walk that starts just below 29400 must pass the skipped
  // ports without giving up (1 pick in 40 started there).
  for (int i = 0; i < 400; ++i) {
    const auto port = PickFreePort("127.0.0.1");
    ASSERT_TRUE(port.ok()) << port.status();
    EXPECT_LT(*port, ephemeral->first);
    EXPECT_GT(*port, 1024);
    EXPECT_FALSE(IsAnotherLaunchersDefault(*port)) << *port;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at = {};
    at.sin_family = AF_INET;
    at.sin_port = htons(*port);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0)
        << *port;
    close(fd);
  }
}

}  // namespace
}  // namespace trl

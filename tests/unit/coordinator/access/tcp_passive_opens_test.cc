// The namespace's accept counter: it rises when a connection to a
// listener of this process completes its handshake.
#include "coordinator/access/tcp_passive_opens.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/loopback_listener.h"

namespace trl {
namespace {

TEST(TcpPassiveOpensTest, ParsesTheTcpLines) {
  const std::string snmp =
      "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
      "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens "
      "AttemptFails\n"
      "Tcp: 1 200 120000 -1 999307 977792 21488\n"
      "Udp: InDatagrams\nUdp: 5\n";
  EXPECT_EQ(ParsePassiveOpens(snmp), 977792u);
  EXPECT_EQ(ParsePassiveOpens("Tcp: ActiveOpens\nTcp: 3\n"), std::nullopt);
  EXPECT_EQ(ParsePassiveOpens(""), std::nullopt);
}

TEST(TcpPassiveOpensTest, RisesWithAnAcceptedConnection) {
  TcpPassiveOpens counter;
  const std::optional<uint64_t> before = counter.Read();
  ASSERT_TRUE(before.has_value());
  LoopbackListener listener(4);
  ASSERT_TRUE(listener.ok());
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, listener.get(), listener.length()), 0);
  const int accepted = accept(listener.fd(), nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  const std::optional<uint64_t> after = counter.Read();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + 1);
  close(accepted);
  close(client);
}

}  // namespace
}  // namespace trl

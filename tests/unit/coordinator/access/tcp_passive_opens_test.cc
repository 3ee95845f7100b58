// The namespace's accept counter: it rises when a connection to a
// listener of this process completes its handshake.
#include "coordinator/access/tcp_passive_opens.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(
      bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
      0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(
      connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
      0);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  const std::optional<uint64_t> after = counter.Read();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + 1);
  close(accepted);
  close(client);
  close(listener);
}

}  // namespace
}  // namespace trl

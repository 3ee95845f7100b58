// Heartbeats as UDP datagrams with the real daemons on loopback: they are
// used when the port can be bound, the gRPC stream carries them otherwise,
// and garbage on the UDP port changes nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <thread>

#include "agent/link/udp_heartbeat_sender.h"
#include "common/heartbeat_datagram.h"
#include "tests/integration/job_status_probe.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// Waits until ps shows every node's heartbeats coming `via` ("udp" or
// "stream"); returns whether they did.
bool WaitForHeartbeatsVia(int port, const std::string& via, int nodes) {
  return WaitUntil(
      [&] {
        auto status = PsJson(port);
        if (!status || status->nodes_size() != nodes) return false;
        for (const auto& node : status->nodes()) {
          if (node.heartbeat_via() != via) return false;
        }
        return true;
      },
      seconds(20));
}

// A UDP socket bound to 127.0.0.1:port, or -1.
int BindUdp(int port) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

class UdpHeartbeatTest : public LauncherTest {
 protected:
  // A 2-machine job of sleeping workers with 0.2 s heartbeats (10 misses
  // allowed: a loaded machine must not lose an agent here).
  void StartJob(std::vector<std::string> coord_flags = {}) {
    const std::vector<std::string> fast = {"--heartbeat_interval", "0.2",
                                           "--heartbeat_misses", "10"};
    agent_ = StartAgent(2, 4, 1, fast);
    coord_flags.insert(coord_flags.end(), fast.begin(), fast.end());
    coord_ = StartCoordinator(2, 4, Worker({"--sleep", "60"}), coord_flags);
    const pb::JobStatus status = WaitUntilRunning(port_, 4);
    for (const auto& rank : status.ranks()) worker_pids_.insert(rank.pid());
    ASSERT_EQ(status.ranks_size(), 4) << coord_->Output() << agent_->Output();
  }
  void StopJob() {
    coord_->Signal(SIGINT);
    EXPECT_EQ(coord_->Wait(seconds(20)), 128 + SIGINT) << coord_->Output();
    EXPECT_EQ(agent_->Wait(seconds(20)), 128 + SIGINT) << agent_->Output();
  }

  std::unique_ptr<Subprocess> agent_;
  std::unique_ptr<Subprocess> coord_;
};

TEST_F(UdpHeartbeatTest, HeartbeatsTravelAsDatagrams) {
  StartJob();
  EXPECT_TRUE(WaitForHeartbeatsVia(port_, "udp", 2)) << coord_->Output();
  StopJob();
}

TEST_F(UdpHeartbeatTest, WithoutThemHeartbeatsStayOnTheStream) {
  StartJob({"--no_udp_heartbeats"});
  // Five intervals: with datagrams on, the nodes would show "udp" by now.
  std::this_thread::sleep_for(seconds(1));
  EXPECT_TRUE(WaitForHeartbeatsVia(port_, "stream", 2)) << coord_->Output();
  StopJob();
}

TEST_F(UdpHeartbeatTest, ATakenUdpPortMeansHeartbeatsOnTheStream) {
  const int taken = BindUdp(port_);
  ASSERT_GE(taken, 0);
  StartJob();
  std::this_thread::sleep_for(seconds(1));
  EXPECT_TRUE(WaitForHeartbeatsVia(port_, "stream", 2)) << coord_->Output();
  EXPECT_NE(coord_->Stderr().find("heartbeats stay on the gRPC stream"),
            std::string::npos)
      << coord_->Stderr();
  StopJob();
  close(taken);
}

TEST_F(UdpHeartbeatTest, GarbageOnTheUdpPortIsDroppedAndLoggedOnce) {
  StartJob();
  ASSERT_TRUE(WaitForHeartbeatsVia(port_, "udp", 2)) << coord_->Output();
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port_));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string kinds[] = {
      std::string(64, '\0'), "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      "TRLH" + std::string(60, '\x01'), std::string(1400, 'A'), ""};
  for (int i = 0; i < 2000; ++i) {
    const std::string& bytes = kinds[i % 5];
    sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to),
           sizeof(to));
  }
  close(fd);
  // The job runs on, its heartbeats still coming as datagrams.
  std::this_thread::sleep_for(seconds(1));
  auto status = PsJson(port_);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->state(), "running");
  EXPECT_TRUE(WaitForHeartbeatsVia(port_, "udp", 2)) << coord_->Output();
  const std::string err = coord_->Stderr();
  const std::regex dropped("dropped a heartbeat datagram");
  EXPECT_EQ(std::distance(std::sregex_iterator(err.begin(), err.end(), dropped),
                          std::sregex_iterator()),
            1)
      << err;
  StopJob();
}

TEST(UdpHeartbeatSenderTest, AReplayedAckDoesNotCount) {
  // A fake coordinator on a UDP port: it answers the first heartbeat, and
  // then an attacker (or the network) sends the same ack again, and again.
  const std::string key(kHeartbeatKeySize, 'k');
  const int coordinator = BindUdp(0);
  ASSERT_GE(coordinator, 0);
  sockaddr_in bound = {};
  socklen_t length = sizeof(bound);
  getsockname(coordinator, reinterpret_cast<sockaddr*>(&bound), &length);
  auto sender =
      UdpHeartbeatSender::Open("127.0.0.1", ntohs(bound.sin_port), 3, 77, key);
  ASSERT_TRUE(sender.ok()) << sender.status();
  ASSERT_TRUE((*sender)->SendHeartbeat());
  char buffer[256];
  sockaddr_in from = {};
  socklen_t from_length = sizeof(from);
  const ssize_t got =
      recvfrom(coordinator, buffer, sizeof(buffer), 0,
               reinterpret_cast<sockaddr*>(&from), &from_length);
  auto beat = ParseHeartbeat(std::string_view(buffer, got > 0 ? got : 0));
  ASSERT_TRUE(beat.has_value());
  HeartbeatDatagram ack = *beat;
  ack.kind = HeartbeatKind::kAck;
  HeartbeatKey signing_key(key);
  const std::string bytes = EncodeHeartbeat(ack, signing_key);
  auto send_ack = [&] {
    sendto(coordinator, bytes.data(), bytes.size(), 0,
           reinterpret_cast<sockaddr*>(&from), from_length);
  };
  auto read_acks = [&] {
    int acks = 0;
    WaitUntil(
        [&] {
          acks += (*sender)->ReadAcks();
          return acks > 0;
        },
        milliseconds(300));
    return acks;
  };
  send_ack();
  EXPECT_EQ(read_acks(), 1);
  EXPECT_TRUE((*sender)->LastHeartbeatAcked());
  send_ack();  // the same ack again
  EXPECT_EQ(read_acks(), 0);
  ASSERT_TRUE((*sender)->SendHeartbeat());
  send_ack();  // the old ack, after a newer heartbeat
  EXPECT_EQ(read_acks(), 0);
  EXPECT_FALSE((*sender)->LastHeartbeatAcked());
  close(coordinator);
}

}  // namespace
}  // namespace trl::testing

// Hostile bytes on the coordinator's port: garbage, an HTTP/1.1 request, a
// half-open connection. The coordinator stays up and a real job still runs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

// Connects to 127.0.0.1:port, sends `bytes`, returns the socket (or -1).
int ConnectAndSend(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  if (!bytes.empty()) {
    ssize_t ignored = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    (void)ignored;
  }
  return fd;
}

TEST_F(LauncherTest, HostileBytesDoNotStopTheCoordinator) {
  auto coord = StartCoordinator(2, 2, Worker());
  ASSERT_TRUE(coord->WaitForOutput("waiting for 2 machine(s)", seconds(10)))
      << coord->Output();
  std::string garbage(64 * 1024, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = char(i * 131 + 7);
  const int garbage_fd = ConnectAndSend(port_, garbage);
  const int http_fd = ConnectAndSend(
      port_, "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
  const int half_open_fd = ConnectAndSend(port_, "");
  // A flood of connections that say nothing.
  std::vector<int> flood;
  for (int i = 0; i < 200; ++i) flood.push_back(ConnectAndSend(port_, ""));
  ASSERT_GE(garbage_fd, 0);
  ASSERT_GE(http_fd, 0);
  ASSERT_GE(half_open_fd, 0);
  for (int fd : {garbage_fd, http_fd}) close(fd);

  // A real agent still joins and the job succeeds, while the half-open
  // connection and the flood are still there.
  auto agent = StartAgent(2, 2, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
  close(half_open_fd);
  for (int fd : flood) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace
}  // namespace trl::testing

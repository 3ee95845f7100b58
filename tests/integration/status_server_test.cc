// The status server's bounds, on real sockets: a client that never
// finishes its request, one that sends too much, and a crowd of idle ones
// cost a slot for a few seconds, never the answer to the next client; a
// status port in use costs a warning, never the job.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "coordinator/status/http_server.h"
#include "tests/integration/launcher_fixture.h"

namespace trl::testing {
namespace {

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};  // every read below is bounded
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What the server sends until it closes (or 10 s pass).
std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  return out;
}

class StatusServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started =
        StatusHttpServer::Start("127.0.0.1", 0, [](const HttpRequest& request) {
          return TextResponse(200, "hello " + request.target + "\n");
        });
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  std::string Get(const std::string& path) {
    const int fd = Connect(server_->port());
    SendAll(fd, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
    std::string reply = ReadAll(fd);
    close(fd);
    return reply;
  }

  std::unique_ptr<StatusHttpServer> server_;
};

TEST_F(StatusServerTest, AClientThatNeverFinishesItsRequestStallsNoOne) {
  const int slow = Connect(server_->port());
  SendAll(slow, "GET /slow HTTP/1.1\r\nHost: loc");
  const auto before = std::chrono::steady_clock::now();
  EXPECT_NE(Get("/fast").find("hello /fast"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - before, seconds(1));
  // The slow one is told it took too long, and closed.
  const std::string reply = ReadAll(slow);
  EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
  EXPECT_GE(std::chrono::steady_clock::now() - before,
            StatusHttpServer::kRequestTimeout - seconds(1));
  close(slow);
}

TEST_F(StatusServerTest, ARequestOverTheSizeBoundIsRefused) {
  const int fd = Connect(server_->port());
  SendAll(fd, "GET / HTTP/1.1\r\nX: " + std::string(16384, 'a') + "\r\n\r\n");
  const std::string reply = ReadAll(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431 ", 0), 0u) << reply.substr(0, 100);
  close(fd);
}

TEST_F(StatusServerTest, ACrowdOfIdleConnectionsMakesRoomForANewClient) {
  std::vector<int> idle;
  for (size_t i = 0; i < 2 * StatusHttpServer::kMaxConnections; ++i) {
    const int fd = Connect(server_->port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  const auto before = std::chrono::steady_clock::now();
  EXPECT_NE(Get("/metrics").find("hello /metrics"), std::string::npos);
  // Without room made, it would wait for an idle one to time out.
  EXPECT_LT(std::chrono::steady_clock::now() - before,
            StatusHttpServer::kRequestTimeout - seconds(2));
  // At most kMaxConnections are held (each is a descriptor of the
  // coordinator's): the oldest were closed at once, not timed out.
  const auto closing = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(idle.front()), "");
  EXPECT_LT(std::chrono::steady_clock::now() - closing, seconds(1));
  for (int fd : idle) close(fd);
}

class StatusPortTest : public LauncherTest {};

TEST_F(StatusPortTest, AStatusPortInUseCostsAWarningNotTheJob) {
  const int status_port = FreePort();
  const int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // As a server would: a connection of an earlier test to this port in
  // TIME_WAIT must not keep the holder off it (seen under ASan in CI).
  const int one = 1;
  setsockopt(holder, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(status_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ASSERT_EQ(listen(holder, 1), 0);
  auto coord = StartCoordinator(1, 1, Worker(),
                                {"--status_port", std::to_string(status_port)});
  EXPECT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  EXPECT_NE(coord->Stderr().find("no status page: cannot listen on "
                                 "127.0.0.1:" +
                                 std::to_string(status_port)),
            std::string::npos)
      << coord->Stderr();
  RememberWorkerPids(coord->Output());
  close(holder);
}

}  // namespace
}  // namespace trl::testing

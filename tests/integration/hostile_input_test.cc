// Hostile bytes on the coordinator's port: garbage, an HTTP/1.1 request, a
// half-open connection. The coordinator stays up and a real job still runs.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/auth_token.h"
#include "common/tls_credentials.h"
#include "proto/trl_launch.grpc.pb.h"
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
  ASSERT_TRUE(coord->WaitForOutput("machine 0 registered", seconds(10)))
      << coord->Output();
  const int files_before = OpenFileCount(coord->pid());
  const long rss_before = ResidentKiB(coord->pid());

  std::string garbage(64 * 1024, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = char(i * 131 + 7);
  std::vector<int> sockets = {
      ConnectAndSend(port_, garbage),
      ConnectAndSend(
          port_, "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"),
      ConnectAndSend(port_, "")};  // half-open: says nothing
  // A flood of connections that say nothing.
  for (int i = 0; i < 200; ++i) sockets.push_back(ConnectAndSend(port_, ""));
  for (int fd : sockets) ASSERT_GE(fd, 0);

  // An oversized message on an authenticated stream is refused.
  auto token = ResolveAuthToken("", false, false);
  ASSERT_TRUE(token.ok()) << token.status();
  auto security = ClientSecurityFor(TlsFiles{}, *token);
  ASSERT_TRUE(security.ok()) << security.status();
  grpc::ChannelArguments args;
  SetDerivedServerName(&args);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                           security->credentials, args);
  auto stub = trl::launch::v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Attach(&context);
  trl::launch::v1::AgentMessage huge;
  huge.mutable_registration()->set_hostname(std::string(5 << 20, 'x'));
  stream->Write(huge);
  stream->WritesDone();
  trl::launch::v1::CoordinatorMessage reply;
  while (stream->Read(&reply)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();

  for (int fd : sockets) close(fd);
  // Descriptors and memory come back down once the clients are gone.
  EXPECT_TRUE(
      WaitUntil([&] { return OpenFileCount(coord->pid()) <= files_before + 4; },
                seconds(10)))
      << "open files: " << files_before << " before, "
      << OpenFileCount(coord->pid()) << " after";
  EXPECT_LT(ResidentKiB(coord->pid()), rss_before + 16 * 1024);

  // A real agent still joins and the job succeeds.
  auto agent = StartAgent(2, 2, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
}

// True once the peer has closed `fd` (recv sees the end), within `timeout`.
bool ClosedByPeer(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd waiting = {fd, POLLIN, 0};
    if (poll(&waiting, 1, 50) == 1) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;  // EOF or reset: closed by the coordinator
    }
  }
  return false;
}

// gRPC 1.51 cannot cap the number of connections; the coordinator bounds
// how long each costs it instead: one that never completes the HTTP/2
// handshake is dropped after 5 s, one that does but makes no call after
// --connection_idle_timeout. Neither needs the client to go away.
TEST_F(LauncherTest, ConnectionsThatMakeNoCallAreClosedByTheCoordinator) {
  auto coord =
      StartCoordinator(2, 2, Worker(), {"--connection_idle_timeout", "1"});
  ASSERT_TRUE(coord->WaitForOutput("machine 0 registered", seconds(10)))
      << coord->Output();
  const int files_before = OpenFileCount(coord->pid());
  // A plaintext HTTP/2 client preface on the TLS port: refused at once.
  const std::string preface = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                              std::string("\0\0\0\x04\0\0\0\0\0", 9);
  std::vector<int> idle, silent;
  for (int i = 0; i < 20; ++i) idle.push_back(ConnectAndSend(port_, preface));
  for (int i = 0; i < 20; ++i) silent.push_back(ConnectAndSend(port_, ""));
  for (int fd : idle) ASSERT_GE(fd, 0);
  for (int fd : silent) ASSERT_GE(fd, 0);
  // Accepted: each silent one holds a descriptor of the coordinator's.
  EXPECT_TRUE(WaitUntil(
      [&] { return OpenFileCount(coord->pid()) >= files_before + 15; },
      seconds(5)))
      << OpenFileCount(coord->pid()) << " open, " << files_before << " before";
  // Clients with the token that connect and make no call: closed after the
  // idle timeout (1 s here).
  auto token = ResolveAuthToken("", false, false);
  ASSERT_TRUE(token.ok()) << token.status();
  auto security = ClientSecurityFor(TlsFiles{}, *token);
  ASSERT_TRUE(security.ok());
  std::vector<std::shared_ptr<grpc::Channel>> quiet;
  for (int i = 0; i < 5; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    SetDerivedServerName(&args);
    quiet.push_back(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port_), security->credentials, args));
    ASSERT_TRUE(quiet.back()->WaitForConnected(
        std::chrono::system_clock::now() + seconds(5)));
  }
  for (auto& channel : quiet) {
    EXPECT_TRUE(WaitUntil(
        [&] { return channel->GetState(false) != GRPC_CHANNEL_READY; },
        seconds(10)))
        << "a connection that made no call stayed open";
  }
  for (int fd : idle) {
    EXPECT_TRUE(ClosedByPeer(fd, seconds(10))) << "an idle connection stayed";
  }
  for (int fd : silent) {
    EXPECT_TRUE(ClosedByPeer(fd, seconds(10))) << "a silent connection stayed";
  }
  // The coordinator's descriptors are back while the clients still hold
  // their ends.
  EXPECT_TRUE(
      WaitUntil([&] { return OpenFileCount(coord->pid()) <= files_before + 4; },
                seconds(5)))
      << OpenFileCount(coord->pid()) << " open, " << files_before << " before";
  for (int fd : idle) close(fd);
  for (int fd : silent) close(fd);
  // A real agent keeps its stream past the idle timeout and the job runs.
  auto agent = StartAgent(2, 2, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
}

// gRPC 1.51 has no cap on connections: a peer holds a descriptor per
// connection until its handshake times out. The coordinator keeps at most
// 64 from one address (coordinator/access/connection_limits.h), cutting the
// oldest unproven first and never a registered agent's: here the flood
// comes from machine 0's own address, where its agent is.
TEST_F(LauncherTest, OneAddressHoldsAtMost64Connections) {
  auto coord = StartCoordinator(2, 2, Worker());
  ASSERT_TRUE(coord->WaitForOutput("machine 0 registered", seconds(10)))
      << coord->Output();
  std::vector<int> flood;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectAndSend(port_, "");
    ASSERT_GE(fd, 0);
    flood.push_back(fd);
  }
  auto closed = [&] {
    int count = 0;
    for (int fd : flood) {
      pollfd readable{fd, POLLIN, 0};
      if (poll(&readable, 1, 0) > 0) ++count;
    }
    return count;
  };
  // Well before the 5 s handshake timeout would close them all.
  // 64 from 127.0.0.1: machine 0's agent's stream and 63 of the flood.
  ASSERT_TRUE(WaitUntil([&] { return closed() >= 137; }, seconds(3)))
      << closed() << " of 200 closed";
  EXPECT_EQ(closed(), 137) << "more than 137 were closed";
  for (int fd : flood) close(fd);
  auto agent = StartAgent(2, 2, 1);
  ASSERT_EQ(coord->Wait(seconds(30)), 0) << coord->Output();
  ASSERT_EQ(agent->Wait(seconds(30)), 0) << agent->Output();
  RememberWorkerPids(coord->Stdout() + agent->Stdout());
}

}  // namespace
}  // namespace trl::testing

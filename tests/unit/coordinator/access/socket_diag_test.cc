// The kernel's socket diagnostics, asked for real sockets of this process
// on 127.0.0.1 and ::1: the dump finds the accepted ends on the asked port
// (by inode, as /proc/self/fd names them) and nothing on another port.
#include "coordinator/access/socket_diag.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

namespace trl {
namespace {

// A listener on `loopback` (127.0.0.1 or ::1), port 0, and `count`
// connections to it from the same address; closes them all at the end.
class Loopback {
 public:
  Loopback(int family, int count) : family_(family) {
    listener_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage address = Address(0);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), Length()) != 0 ||
        listen(listener_, 16) != 0) {
      return;
    }
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(family == AF_INET
                      ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                      : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    for (int i = 0; i < count; ++i) {
      const int client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(client, reinterpret_cast<sockaddr*>(&address), Length()) !=
          0) {
        close(client);
        return;
      }
      clients_.push_back(client);
      accepted_.push_back(accept(listener_, nullptr, nullptr));
    }
  }
  ~Loopback() {
    for (int fd : clients_) close(fd);
    for (int fd : accepted_) close(fd);
    if (listener_ >= 0) close(listener_);
  }
  bool ok(int count) const {
    return port_ != 0 && static_cast<int>(accepted_.size()) == count;
  }
  uint16_t port() const { return port_; }
  // The inodes of the accepted ends: what the dump of `port` must hold.
  std::set<uint64_t> AcceptedInodes() const { return Inodes(accepted_); }
  std::set<uint16_t> ClientPorts() const {
    std::set<uint16_t> ports;
    for (int fd : clients_) {
      sockaddr_storage address = {};
      socklen_t length = sizeof(address);
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
      ports.insert(
          ntohs(family_ == AF_INET
                    ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                    : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port));
    }
    return ports;
  }

 private:
  sockaddr_storage Address(uint16_t port) const {
    sockaddr_storage address = {};
    if (family_ == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      v4->sin_port = htons(port);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_loopback;
      v6->sin6_port = htons(port);
    }
    return address;
  }
  socklen_t Length() const {
    return family_ == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  }
  static std::set<uint64_t> Inodes(const std::vector<int>& fds) {
    std::set<uint64_t> inodes;
    for (int fd : fds) {
      struct stat info = {};
      if (fstat(fd, &info) == 0) inodes.insert(info.st_ino);
    }
    return inodes;
  }

  const int family_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::vector<int> clients_, accepted_;
};

std::set<uint64_t> InodesOf(const std::vector<DiagSocket>& sockets) {
  std::set<uint64_t> inodes;
  for (const auto& s : sockets) inodes.insert(s.inode);
  return inodes;
}

TEST(SocketDiagTest, FindsTheAcceptedEndsOnTheAskedPortOverIPv4) {
  auto diag = SocketDiag::Open();
  ASSERT_TRUE(diag.ok()) << diag.status();
  Loopback asked(AF_INET, 3), other(AF_INET, 2);
  ASSERT_TRUE(asked.ok(3) && other.ok(2));

  const auto found = (*diag)->Established(AF_INET, asked.port());
  ASSERT_TRUE(found.ok()) << found.status();
  // Exactly the three accepted ends: not the clients' ends (their local
  // port is another), not the listener (not ESTABLISHED), nothing of the
  // other port.
  EXPECT_EQ(InodesOf(*found), asked.AcceptedInodes());
  ASSERT_EQ(found->size(), 3u);
  std::set<uint16_t> peer_ports;
  for (const auto& s : *found) {
    EXPECT_EQ(s.family, AF_INET);
    EXPECT_EQ(s.local_port, asked.port());
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, s.local_address.data(), text, sizeof(text));
    EXPECT_STREQ(text, "127.0.0.1");
    inet_ntop(AF_INET, s.peer_address.data(), text, sizeof(text));
    EXPECT_STREQ(text, "127.0.0.1");
    peer_ports.insert(s.peer_port);
  }
  EXPECT_EQ(peer_ports, asked.ClientPorts());

  // The other port's dump holds only its own two, and the IPv6 dump of
  // the asked port nothing.
  const auto other_found = (*diag)->Established(AF_INET, other.port());
  ASSERT_TRUE(other_found.ok()) << other_found.status();
  EXPECT_EQ(InodesOf(*other_found), other.AcceptedInodes());
  const auto v6 = (*diag)->Established(AF_INET6, asked.port());
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_TRUE(v6->empty());
}

TEST(SocketDiagTest, FindsTheAcceptedEndsOnTheAskedPortOverIPv6) {
  auto diag = SocketDiag::Open();
  ASSERT_TRUE(diag.ok()) << diag.status();
  Loopback asked(AF_INET6, 2), other(AF_INET6, 1);
  if (!asked.ok(2) || !other.ok(1)) {
    GTEST_SKIP() << "no IPv6 loopback (::1) here";
  }
  const auto found = (*diag)->Established(AF_INET6, asked.port());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(InodesOf(*found), asked.AcceptedInodes());
  for (const auto& s : *found) {
    EXPECT_EQ(s.family, AF_INET6);
    EXPECT_EQ(s.local_port, asked.port());
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, s.peer_address.data(), text, sizeof(text));
    EXPECT_STREQ(text, "::1");
  }
  const auto v4 = (*diag)->Established(AF_INET, asked.port());
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_TRUE(v4->empty());
}

TEST(SocketDiagTest, ManyDumpsOnOneSocketEachSeeTheirOwnAnswer) {
  // The governor keeps one netlink socket for its whole life: dump after
  // dump on it, with more connections than fit in one batch of a reply
  // (~100 bytes a socket, 32 KiB a batch).
  auto diag = SocketDiag::Open();
  ASSERT_TRUE(diag.ok()) << diag.status();
  Loopback many(AF_INET, 400);  // 800 descriptors: under the usual 1024
  ASSERT_TRUE(many.ok(400));
  for (int round = 0; round < 20; ++round) {
    const auto found = (*diag)->Established(AF_INET, many.port());
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_EQ(InodesOf(*found), many.AcceptedInodes()) << "round " << round;
  }
}

}  // namespace
}  // namespace trl

#include "bench/sim/sim_datagrams.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/heartbeat_datagram.h"
#include "common/network.h"

namespace trl::sim {

SimDatagrams::~SimDatagrams() {
  if (fd_ >= 0) close(fd_);
}

bool SimDatagrams::OpenTowards(int port) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ >= 0) return port == port_;
  auto fd = OpenUdpSocket(host_, port, UdpEnd::kConnected);
  if (!fd.ok()) return false;
  // A second's acks of 16,384 agents (64 bytes each, ~1 MiB with the
  // kernel's overhead) wait here between two drains.
  const int bytes = 8 << 20;
  setsockopt(*fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  port_ = port;
  fd_ = *fd;
  return true;
}

bool SimDatagrams::Send(std::string_view bytes) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fd = fd_;
  }
  return fd >= 0 && send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT) ==
                        static_cast<ssize_t>(bytes.size());
}

void SimDatagrams::Drain(
    const std::function<void(uint32_t, std::string_view)>& deliver) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fd = fd_;
  }
  if (fd < 0) return;
  char buffer[kHeartbeatDatagramSize + 1];
  while (true) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got < 0) {
      if (errno == ECONNREFUSED || errno == EINTR) continue;
      return;
    }
    const std::string_view bytes(buffer, static_cast<size_t>(got));
    const auto parsed = ParseHeartbeat(bytes);
    if (parsed) deliver(parsed->machine_rank, bytes);
  }
}

}  // namespace trl::sim

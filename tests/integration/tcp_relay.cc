#include "tests/integration/tcp_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace trl::testing {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace

TcpRelay::TcpRelay(int target_port) : target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = Loopback(0);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  listen(listen_fd_, 16);
  socklen_t length = sizeof(address);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Loop(); });
}

TcpRelay::~TcpRelay() {
  stop_ = true;
  char byte = 1;
  ssize_t ignored = write(wake_[1], &byte, 1);
  (void)ignored;
  thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) close(fd);
}

void TcpRelay::CutAndResume() {
  cut_ = true;
  holding_ = false;
  char byte = 1;
  ssize_t ignored = write(wake_[1], &byte, 1);
  (void)ignored;
}

std::string TcpRelay::Captured() const {
  std::lock_guard<std::mutex> lock(captured_mutex_);
  return captured_;
}

void TcpRelay::Loop() {
  std::vector<std::pair<int, int>> pairs;  // client, target
  while (!stop_) {
    if (cut_.exchange(false)) {
      for (auto& [a, b] : pairs) {
        close(a);
        close(b);
      }
      pairs.clear();
    }
    std::vector<pollfd> polls = {{listen_fd_, POLLIN, 0},
                                 {wake_[0], POLLIN, 0}};
    if (!holding_) {
      for (auto& [a, b] : pairs) {
        polls.push_back({a, POLLIN, 0});
        polls.push_back({b, POLLIN, 0});
      }
    }
    if (poll(polls.data(), polls.size(), 100) < 0 && errno != EINTR) return;
    if (polls[1].revents != 0) {
      char buffer[16];
      ssize_t ignored = read(wake_[0], buffer, sizeof(buffer));
      (void)ignored;
    }
    if (polls[0].revents != 0) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      const int target = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address = Loopback(target_port_);
      if (client >= 0 && connect(target, reinterpret_cast<sockaddr*>(&address),
                                 sizeof(address)) == 0) {
        pairs.push_back({client, target});
      } else {
        if (client >= 0) close(client);
        close(target);
      }
    }
    if (holding_) continue;
    // Only the pairs in `polls` have events: a pair accepted just above, or
    // every pair when holding_ was set while they were polled, waits for the
    // next round (reading polls[] for it ran past the end of the vector).
    const size_t polled = (polls.size() - 2) / 2;
    std::vector<std::pair<int, int>> open;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (i >= polled) {
        open.push_back(pairs[i]);
        continue;
      }
      bool closed = false;
      for (int side = 0; side < 2 && !closed; ++side) {
        const pollfd& p = polls[2 + 2 * i + side];
        if (p.revents == 0) continue;
        const int from = side == 0 ? pairs[i].first : pairs[i].second;
        const int to = side == 0 ? pairs[i].second : pairs[i].first;
        char buffer[65536];
        const ssize_t n = read(from, buffer, sizeof(buffer));
        if (n <= 0) {
          closed = true;
          break;
        }
        {
          std::lock_guard<std::mutex> lock(captured_mutex_);
          captured_.append(buffer, static_cast<size_t>(n));
        }
        ssize_t done = 0;
        while (done < n) {
          const ssize_t w = write(to, buffer + done, n - done);
          if (w <= 0) {
            closed = true;
            break;
          }
          done += w;
        }
      }
      if (closed) {
        close(pairs[i].first);
        close(pairs[i].second);
      } else {
        open.push_back(pairs[i]);
      }
    }
    pairs = open;
  }
  for (auto& [a, b] : pairs) {
    close(a);
    close(b);
  }
}

}  // namespace trl::testing
